"""1 000 strands × 20 segments on a sphere turning about its axis: Tangle's DER hair vs Blender's particle
Hair Dynamics (quality 5), same scene, same process run.

Scene: a 10 cm sphere with 1 000 straight hairs of 12 cm (20 segments each) on its upper half, turning once
in 5 s about +z; gravity; 24 fps.  Blender: a hair particle system on a UV sphere (48 × 24), hair dynamics
on with quality 5 (5 solver steps per frame), the sphere's rotation keyframed (linear), frames stepped with
frame_set and timed.  Tangle: the DER solver in-process (no sockets) with the same roots, 5 substeps per
frame, hair–hair Coulomb friction contact (μ = 0.3) and the sphere as a collider (μ = 0.3) — contact that
Blender's hair dynamics does not resolve between strands.

Printed: ms per frame for both, the ratio, and Tangle's contacts and iterations per substep.

    .venv/bin/python -m benchmarks.der_vs_blender_hair [--frames 12] [--strands 1000] [--segments 20]
    python -m benchmarks.der_vs_blender_hair --device cuda --blender-ms 744   # GPU server without bpy
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
from benchmarks.der_hairball import hemisphere_roots
from benchmarks.kernel_warmup import print_kernel_warmup

SPHERE_RADIUS = 0.1      # m
HAIR_LENGTH = 0.12       # m
PERIOD = 5.0             # s per turn
FPS = 24


def run_tangle(strands: int, segments: int, frames: int, substeps: int, iterations: int, refresh: int,
               tolerance: float = 1e-6, log=None, local_solver: str = "gauss_seidel", device: str = "cpu",
               frames_out: list | None = None):
    """Tangle's DER on the scene: (wall s per frame, CPU s per frame, mean contacts per substep, mean
    iterations per substep, DOF count, per-frame wall seconds).  log: print a line per frame to it.
    device: "cpu" or "cuda" (the solver's backend; each frame ends with a copy of the positions to the host,
    as the server does, so the time includes all queued device work).  frames_out: a list that gets every
    frame's positions (N, 3) [m] on the host."""
    from benchmarks.der_hairball import SpinningSphere, rotate_z
    from solver_server.backend import get_backend
    from solver_server.solvers.der import (ContactSettings, DerControl, DerMaterial, DerSolver, NewtonSettings,
                                           build_model, rest_state)

    directions = hemisphere_roots(strands)
    along = SPHERE_RADIUS + np.linspace(0.0, HAIR_LENGTH, segments + 1)
    points = (directions[:, None, :] * along[None, :, None]).reshape(-1, 3)
    offsets = np.arange(strands + 1) * (segments + 1)
    material = DerMaterial(radius=5e-5, young_modulus=3e9, shear_modulus=1e9, density=1300.0, damping=0.5)
    backend = get_backend(device)
    xp = backend.xp
    model = build_model(xp, xp.asarray(points), xp.asarray(offsets), material)
    spin = 2.0 * np.pi / PERIOD
    solver = DerSolver(model, backend,
                       NewtonSettings(max_iterations=iterations, tolerance=tolerance, quasi_newton=True,
                                      quasi_newton_matrix="gauss_newton", refresh_interval=refresh,
                                      contact_detection_tolerance=1e-4),   # the scene defaults (der/group.py)
                       colliders=[SpinningSphere(SPHERE_RADIUS, spin, friction=0.3)],
                       contact=ContactSettings(friction=0.3, collider_friction=0.3, local_solver=local_solver))
    state = rest_state(xp, model)
    rest_targets = points[backend.to_host(solver.fixed_vertices)]
    dt = 1.0 / (FPS * substeps)
    contacts, steps_iterations = [], []
    clock = 0.0
    frame_seconds = []
    started, cpu_started = time.perf_counter(), time.process_time()
    for step in range(frames * substeps):
        if step % substeps == 0:
            frame_started = time.perf_counter()
        clock += dt
        out = state.copy()
        stats = solver.step(state, out, DerControl(vertex_targets=rotate_z(rest_targets, spin * clock)), None, dt)
        state = out
        contacts.append(stats.get("contacts", 0))
        steps_iterations.append(stats["iterations"])
        if step % substeps == substeps - 1:
            on_host = backend.to_host(state.positions)
            if frames_out is not None:
                frames_out.append(on_host)
            frame_seconds.append(time.perf_counter() - frame_started)
            if log is not None:
                print(f"  tangle frame {len(frame_seconds)}: {frame_seconds[-1]:.2f} s, contacts "
                      f"{contacts[-1]}, iterations {steps_iterations[-substeps:]}", file=log, flush=True)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    return (elapsed / frames, cpu / frames, float(np.mean(contacts)), float(np.mean(steps_iterations)), model.n_dofs,
            frame_seconds)


def add_hair_dynamics(obj, strands: int, length: float, segments: int, quality: int, last_frame: int,
                      min_height: float, **particle_settings):
    """A hair particle system with Hair Dynamics on mesh object ``obj``: ``strands`` hairs of ``length`` [m] and
    ``segments`` segments emitted from its faces above local height ``min_height`` (a density vertex group),
    the other ``particle_settings`` set on its ParticleSettings, solver quality ``quality``, cached over frames
    1..``last_frame``. Returns the ParticleSystem."""
    group = obj.vertex_groups.new(name="hair_density")
    group.add([v.index for v in obj.data.vertices if v.co.z > min_height], 1.0, "REPLACE")
    obj.modifiers.new("hair", "PARTICLE_SYSTEM")
    system = obj.particle_systems[0]
    system.vertex_group_density = group.name
    settings = system.settings
    settings.type = "HAIR"
    settings.count = strands
    settings.hair_length = length
    settings.hair_step = segments
    settings.emit_from = "FACE"
    for name, value in particle_settings.items():
        setattr(settings, name, value)
    system.use_hair_dynamics = True
    system.cloth.settings.quality = quality
    system.point_cache.frame_start, system.point_cache.frame_end = 1, last_frame
    return system


def run_blender(strands: int, segments: int, frames: int, quality: int):
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.render.fps = FPS
    bpy.ops.mesh.primitive_uv_sphere_add(radius=SPHERE_RADIUS, segments=48, ring_count=24, location=(0, 0, 0))
    sphere = bpy.context.active_object
    system = add_hair_dynamics(sphere, strands, HAIR_LENGTH, segments, quality, 1 + frames, min_height=1e-6,
                               use_emit_random=False, use_even_distribution=True)
    # one turn per PERIOD about +z, keyframed with linear interpolation
    sphere.rotation_euler = (0.0, 0.0, 0.0)
    sphere.keyframe_insert("rotation_euler", index=2, frame=1)
    last = 1 + frames
    sphere.rotation_euler = (0.0, 0.0, 2.0 * np.pi * frames / (FPS * PERIOD))
    sphere.keyframe_insert("rotation_euler", index=2, frame=last)
    animation = sphere.animation_data.action
    for curve in animation.fcurves:
        for point in curve.keyframe_points:
            point.interpolation = "LINEAR"
    scene.frame_start, scene.frame_end = 1, last
    scene.frame_set(1)
    frame_seconds = []
    cpu_started = time.process_time()
    for frame in range(2, last + 1):
        started = time.perf_counter()
        scene.frame_set(frame)
        frame_seconds.append(time.perf_counter() - started)
    cpu = (time.process_time() - cpu_started) / frames
    # the point cache holds one simulated state per frame: proof that the dynamics ran
    return float(np.mean(frame_seconds)), cpu, frame_seconds, system.point_cache.info


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strands", type=int, default=1000)
    parser.add_argument("--segments", type=int, default=20)
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument("--substeps", type=int, default=5, help="Tangle substeps per frame (Blender: quality)")
    parser.add_argument("--quality", type=int, default=5, help="Blender hair dynamics quality (steps per frame)")
    parser.add_argument("--iterations", type=int, default=50, help="Tangle N_max of the global/local loop")
    parser.add_argument("--tolerance", type=float, default=1e-6,
                        help="Tangle: mean |dv| [m/s] that ends the Newton/contact loop (seed eq. 4.3)")
    parser.add_argument("--refresh", type=int, default=1,
                        help="Tangle: refactor a stale quasi-Newton matrix every this many iterations (large substeps "
                             "turn edges far within a step: 1 converges in about half the iterations of 4)")
    parser.add_argument("--local-solver", choices=("jacobi", "gauss_seidel"), default="gauss_seidel",
                        help="Tangle: contact local step (seed Jacobi, or Gauss-Seidel on the exact Delassus operator)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="Tangle's solver backend")
    parser.add_argument("--blender-ms", type=float, default=None,
                        help="skip Blender here and take this ms/frame measured by an earlier run (e.g. Blender on "
                             "the artist's machine, Tangle on a GPU server without bpy); the ratio is then printed "
                             "as a cross-machine one")
    args = parser.parse_args(argv)
    print_kernel_warmup("cpu" if args.device == "cpu" else "cuda:0")

    print(f"scene: {args.strands} strands x {args.segments} segments on a {SPHERE_RADIUS * 100:g} cm sphere turning "
          f"once in {PERIOD:g} s, {args.frames} frames at {FPS} fps")
    if args.blender_ms is None:
        blender_s, blender_cpu, frame_seconds, cache = run_blender(args.strands, args.segments, args.frames,
                                                                   args.quality)
        print(f"blender hair dynamics : {blender_s * 1e3:8.1f} ms/frame, CPU {blender_cpu * 1e3:.1f} ms/frame "
              f"(all threads)  (quality {args.quality}; first frame "
              f"{frame_seconds[0] * 1e3:.0f} ms, later frames {1e3 * float(np.mean(frame_seconds[1:] or [0.0])):.0f} "
              f"ms; point cache: {cache} no hair-hair contact)")
    else:
        blender_s, blender_cpu = args.blender_ms / 1e3, None
        print(f"blender hair dynamics : {args.blender_ms:8.1f} ms/frame, given (--blender-ms), not measured here")
    if args.device != "cpu":
        # CuPy compiles each elementwise kernel on first use (frames of several seconds on a fresh GPU machine),
        # and contact kernels first run in later frames: the whole run once, untimed (as benchmarks.gpu does)
        print("untimed warm-up run on the GPU first (CuPy compiles its kernels on first use)", flush=True)
        run_tangle(args.strands, args.segments, args.frames, args.substeps, args.iterations, args.refresh,
                   args.tolerance, log=None, local_solver=args.local_solver, device=args.device)
    tangle_s, tangle_cpu, contacts, iterations, dofs, _ = run_tangle(
        args.strands, args.segments, args.frames, args.substeps, args.iterations, args.refresh, args.tolerance,
        log=sys.stdout, local_solver=args.local_solver, device=args.device)
    print(f"tangle DER            : {tangle_s * 1e3:8.1f} ms/frame, CPU {tangle_cpu * 1e3:.1f} ms/frame  "
          f"({args.device}, {args.substeps} substeps, {dofs} DOF, "
          f"{contacts:.0f} contacts and {iterations:.1f} iterations per substep, hair-hair friction mu = 0.3, "
          f"{args.local_solver} contact solve)")
    if blender_cpu is None:
        print(f"speed ratio           : tangle is {blender_s / tangle_s:.2f}x the given Blender time per frame "
              f"(wall time, NOT the same machine or process run)")
    else:
        print(f"speed ratio           : tangle is {blender_s / tangle_s:.2f}x Blender's hair dynamics per frame "
              f"(wall time; CPU time: {blender_cpu / tangle_cpu:.2f}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Fast hair models (seed 002 Cosserat force transport, seed 004 particle hair) and guide interpolation.

1. 100 guide strands × 1000 segments (seed 002 §5.2.2: 0.64 ms simulation + 2.3 ms collision per 3 ms
   step on a Core 2 Duo 6700 + GeForce 8800): ms per solver step for both models, interaction on/off.
2. 10 000 strands interpolated from 200 guides: ms per frame including the interpolation, and the
   bytes one frame costs on the wire with server-side vs client-side interpolation.
3. Largest stable step of the Cosserat model and of our DER solver (the same-process anchor) for
   50/100/200 segments and E = 1/10/100 MPa (seed 002 §5.1.4 table; 5 m strand there, 1 m here,
   wisp radius 5 mm), with the peak node speed (free fall from 1 m: 4.4 m/s).

    python -m benchmarks.fast_hair [--device cpu|cuda] [--quick]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from solver_server.backend import get_backend
from benchmarks.kernel_warmup import print_kernel_warmup
from solver_server.solvers.cosserat import CosseratControl, CosseratSettings, CosseratSolver
from solver_server.solvers.guides.interpolation import GuideInterpolator
from solver_server.solvers.guides.layout import StrandLayout
from solver_server.solvers.guides.selection import assign_guides, select_guides
from solver_server.solvers.particles import ParticleHairSettings, ParticleHairSolver, StrandControl

SEED_SIMULATION_MS = 0.64
SEED_COLLISION_MS = 2.3
GRAVITY = np.array([0.0, 0.0, -9.81])


def head_of_hair(strands: int, points: int, length: float, seed: int = 0) -> np.ndarray:
    """(S, P, 3) strands hanging from roots on the upper half of a 0.1 m sphere, lengths ±20 %."""
    rng = np.random.default_rng(seed)
    index = np.arange(strands) + 0.5
    z = 1.0 - index / strands
    azimuth = np.pi * (1.0 + 5.0 ** 0.5) * index
    ring = np.sqrt(1.0 - z * z)
    normal = np.stack([ring * np.cos(azimuth), ring * np.sin(azimuth), z], axis=1)
    roots = 0.1 * normal
    lengths = length * rng.uniform(0.8, 1.2, strands)
    t = np.linspace(0.0, 1.0, points)
    out_dir = normal * 0.3 + np.array([0.0, 0.0, -1.0])
    out_dir /= np.linalg.norm(out_dir, axis=1, keepdims=True)
    return roots[:, None, :] + (lengths[:, None] * t[None, :])[..., None] * out_dir[:, None, :]


def timed(function, repeats: int, sync, warmups: int = 2) -> float:
    """ms per call of ``function`` over ``repeats`` calls after ``warmups`` untimed ones: a step's first calls take
    other paths than its later ones (a Verlet list built, then reused), and on a GPU CuPy compiles each of its
    kernels on first use (on an H200, timed after a single untimed call, the interaction's steps just after the
    release took 465 ms each, against 24 ms once swinging)."""
    for _ in range(warmups):
        function()
    sync()
    started = time.perf_counter()
    for _ in range(repeats):
        function()
    sync()
    return (time.perf_counter() - started) * 1000.0 / repeats


def guide_step_benchmark(backend, strands: int, segments: int, repeats: int) -> None:
    xp = backend.xp
    sync = (lambda: xp.cuda.Stream.null.synchronize()) if backend.name == "cuda" else (lambda: None)
    rest = head_of_hair(strands, segments + 1, 0.5)
    layout = StrandLayout.uniform(strands, segments + 1)
    print(f"\n{strands} strands × {segments} segments ({backend.name})")
    for label, extra in (("cosserat", {}), ("cosserat + swept-sphere interaction",
                                            {"interaction_inner_radius": 0.001, "interaction_outer_radius": 0.002})):
        settings = CosseratSettings(radius=1e-3, young_modulus=1e8, shear_modulus=4e7, max_step=3e-3, **extra)
        solver = CosseratSolver(rest, layout, settings, GRAVITY, xp)
        state = solver.initial_state()
        control = CosseratControl(state.root_positions.copy(), state.root_rotations.copy())
        for moment, settle_s in (("released", 0.0), ("swinging after 0.3 s", 0.3)):
            for _ in range(int(round(settle_s / 3e-3))):
                solver.step(state, state, control, None, 3e-3)
            stats = []
            ms = timed(lambda: stats.append(solver.step(state, state, control, None, 3e-3)), repeats, sync)
            corrected = sum(int(item["corrected_strands"]) for item in stats)
            share = corrected / sum(int(item["strand_parts"]) for item in stats)
            print(f"  {label + ', ' + moment:58s} {ms:8.2f} ms per 3 ms step ({share:.0%} of strand parts with "
                  f"the mid-velocity pass; seed: {SEED_SIMULATION_MS} ms simulation, "
                  f"{SEED_SIMULATION_MS + SEED_COLLISION_MS:.2f} ms with collision)")
    settings = ParticleHairSettings()
    solver = ParticleHairSolver(rest, layout, settings, GRAVITY, xp)
    state = solver.initial_state()
    control = StrandControl(state.positions[:, :2].copy())
    h = solver.max_substep
    ms = timed(lambda: solver.step(state, state, control, None, h), repeats, sync)
    print(f"  {'particles (one stable substep, h = %.2f ms)' % (h * 1e3):58s} {ms:8.2f} ms per step; "
          f"{ms * math.ceil(3e-3 / h):.2f} ms per 3 ms")


def interpolation_benchmark(backend, strands: int, guides: int, points: int, frames: int) -> None:
    xp = backend.xp
    sync = (lambda: xp.cuda.Stream.null.synchronize()) if backend.name == "cuda" else (lambda: None)
    rest = head_of_hair(strands, points, 0.3)
    layout = StrandLayout.uniform(strands, points)
    started = time.perf_counter()
    chosen = select_guides(rest, layout, guides)
    assignment = assign_guides(rest, layout, chosen)
    interpolator = GuideInterpolator(rest, layout, assignment, xp)
    setup_s = time.perf_counter() - started
    guide_layout = StrandLayout.uniform(guides, points)
    solver = ParticleHairSolver(rest[chosen], guide_layout, ParticleHairSettings(), GRAVITY, xp)
    state = solver.initial_state()
    control = StrandControl(state.positions[:, :2].copy())
    roots = xp.asarray(rest[:, 0])
    frame_dt = 1.0 / 24.0

    def frame():
        for _ in range(4):
            solver.step(state, state, control, None, frame_dt / 4)
        return interpolator.interpolate(state.positions, roots)

    total_ms = timed(frame, frames, sync)
    interp_ms = timed(lambda: interpolator.interpolate(state.positions, roots), frames, sync)
    server_bytes = strands * points * 3 * 4
    client_bytes = guides * points * 3 * 4
    one_time = assignment.pairs.nbytes // 2 + assignment.weights.nbytes // 2 + chosen.nbytes
    print(f"\n{strands} strands from {guides} guides, {points} points each ({backend.name})")
    print(f"  guide selection + weights (once): {setup_s * 1000:.0f} ms")
    print(f"  per frame (4 substeps particles + interpolation): {total_ms:.2f} ms, of which interpolation "
          f"{interp_ms:.2f} ms")
    print(f"  bytes per frame, interpolation on the server: {server_bytes:,} (float32 positions of every strand)")
    print(f"  bytes per frame, interpolation on the client: {client_bytes:,} (guides only; "
          f"+ {one_time:,} bytes once for guide pairs and weights as int32/float32); ratio "
          f"{server_bytes / client_bytes:.0f}×")


def stability_table(quick: bool, with_der: bool = True) -> None:
    print("\nLargest stable step (1 m strand, r = 5 mm, ρ = 1300, released horizontally, damping 0.1/s, 0.5 s;"
          " stable = finite and node speed < 60 m/s), and the peak node speed at that step; Cosserat: mean"
          " parts the strand split a nominal step into (turn-limited refinement)")
    print(f"  {'segments':>8} {'E [MPa]':>8} {'Cosserat [ms]':>14} {'peak [m/s]':>11} {'refine':>7} {'DER [ms]':>9}"
          f" {'peak [m/s]':>11}")
    candidates = [1e-3, 2e-3, 5e-3, 1e-2, 2e-2] if not quick else [5e-3, 1e-2]
    for segments in (50, 100, 200):
        for young in (1e6, 1e7, 1e8):
            cosserat = _largest_stable(lambda step: _released_cosserat(segments, young, step), candidates)
            der = (_largest_stable(lambda step: _released_der(segments, young, step), candidates[::-1], descending=True)
                   if with_der else (0.0, 0.0))
            _, _, refinement = _released_cosserat(segments, young, cosserat[0]) if cosserat[0] else (0, 0, 0.0)
            cells = []
            for best, peak in (cosserat[:2], der):
                mark = "+" if best == max(candidates) else " "
                cells.append(f"{best * 1e3:13.1f}{mark} {peak:11.1f}" if best else f"{'—':>14} {'—':>11}")
            print(f"  {segments:8d} {young / 1e6:8.0f} {cells[0]} {refinement:7.2f} {cells[1]}", flush=True)


def _largest_stable(run, candidates, descending: bool = False):
    """(largest stable step, its peak speed) scanning ``candidates`` upward (stop at the first
    failure) or downward (stop at the first success)."""
    best, best_peak = 0.0, 0.0
    for step in candidates:
        stable, peak = run(step)[:2]
        if stable:
            best, best_peak = step, peak
            if descending:
                break
        elif not descending:
            break
    return best, best_peak


def _released_cosserat(segments: int, young: float, step: float):
    rest = np.zeros((1, segments + 1, 3))
    rest[0, :, 0] = np.linspace(0.0, 1.0, segments + 1)
    settings = CosseratSettings(radius=5e-3, young_modulus=young, shear_modulus=young / 2.6, max_step=step)
    solver = CosseratSolver(rest, StrandLayout.uniform(1, segments + 1), settings, GRAVITY)
    state = solver.initial_state()
    control = CosseratControl(state.root_positions.copy(), state.root_rotations.copy())
    taken = []
    # parts per nominal step: the one strand splits a step into parts where it turns fast
    stable, peak = _track(lambda: taken.append(int(solver.step(state, state, control, None, step)["strand_parts"])),
                          lambda: solver.positions(state)[0], step)
    return stable, peak, float(np.mean(taken)) if taken else 0.0


def _released_der(segments: int, young: float, step: float):
    try:
        from solver_server.solvers.der import (DerControl, DerMaterial, DerSolver, NewtonSettings,  # noqa: PLC0415
                                               build_model, rest_state)
    except ImportError:
        return False, 0.0
    points = np.zeros((segments + 1, 3))
    points[:, 0] = np.linspace(0.0, 1.0, segments + 1)
    material = DerMaterial(radius=5e-3, young_modulus=young, shear_modulus=young / 2.6, density=1300.0, damping=0.1)
    model = build_model(np, points, np.array([0, segments + 1]), material)
    solver = DerSolver(model, get_backend("cpu"), NewtonSettings(max_iterations=50, tolerance=1e-6, quasi_newton=True))
    holder = {"state": rest_state(np, model)}
    control = DerControl(vertex_targets=points[np.asarray(solver.fixed_vertices)])

    def advance():
        out = holder["state"].copy()
        solver.step(holder["state"], out, control, None, step)
        holder["state"] = out

    return _track(advance, lambda: np.asarray(holder["state"].positions), step)


def _track(advance, positions, step: float, seconds: float = 0.5):
    """Run ``advance`` for ``seconds``; (stable, peak node speed [m/s])."""
    previous = positions().copy()
    peak = 0.0
    for _ in range(int(round(seconds / step))):
        try:
            advance()
        except (FloatingPointError, ArithmeticError):
            return False, peak
        current = positions()
        if not np.all(np.isfinite(current)):
            return False, peak
        peak = max(peak, float(np.linalg.norm(current - previous, axis=-1).max()) / step)
        if peak > 60.0:
            return False, peak
        previous = current.copy()
    return True, peak


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--quick", action="store_true", help="fewer repeats and a shorter stability scan")
    parser.add_argument("--only", choices=("steps", "interpolation", "stability"), help="run one section")
    parser.add_argument("--no-der", action="store_true", help="stability table without the DER column")
    args = parser.parse_args(argv)
    backend = get_backend(args.device)
    print_kernel_warmup(backend.warp_device)
    repeats = 2 if args.quick else 5
    if args.only in (None, "steps"):
        guide_step_benchmark(backend, 100, 1000, repeats)
    if args.only in (None, "interpolation"):
        interpolation_benchmark(backend, 10_000, 200, 32, 3 if args.quick else 10)
    if args.only in (None, "stability"):
        stability_table(args.quick, with_der=not args.no_der)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The same solvers on --device cuda vs --device cpu: PD cloth and the DER hairball, ratio printed.

Scenes (built as wire dicts and run in-process through ``Simulation``, so the numbers are solver time):

- PD cloth, seed 001: 141 × 141 vertices (2 m square, 1 m high) pinned at two corners, draping over a
  0.4 m sphere (``benchmarks.pd_cloth_vs_blender.grid_cloth``); 24 fps, 2 substeps, 10 PD iterations.
- DER hairball, seed 000: 1000 clamped radial strands × 10 points on the upper half of a 0.1 m sphere
  (``benchmarks.der_hairball.hairball``) falling onto it, μ = 0.3; 24 fps, 8 substeps (dt ≈ 5.2 ms).

For each device: one untimed frame (factorizations, CUDA kernel compilation), then ``--frames`` timed
frames; printed: ms per frame (wall), device_ms per frame (CUDA events on GPU), contacts, and, when both
devices ran, the cpu/cuda time ratio and the largest position difference between the two runs.
Without CuPy or a CUDA device it prints "CUDA not available: <reason>" and runs the CPU part only.

``--seed-scenes`` runs seed 001's three scenes instead, on each device, and prints frames per second beside the
thesis's figures (RTX 3060 Ti): the 141 × 141 cloth above (54 FPS with A-Jacobi), a 49k-tet soft body (its
Armadillo, 45 FPS) and a 171k-tet one (its Dragon, 168k tets, 8.5–10 FPS), the blobs of
``benchmarks.pd_softbody`` dropped on a floor (``blob_scene``). A thesis frame is one PD step; ours is a 24 fps frame of
2 substeps, so both "frames" and "steps" per second are printed (targets: cloth ≥ 54, Armadillo ≥ 45,
Dragon ≥ 10 on a GPU). On a GPU each scene runs twice: with Tangle's default Cholesky global step (cholespy's
device solve) and with the seed's A-Jacobi (order 2, 30 and 120 Chebyshev sweeps, replayed as one CUDA graph per
global step), each printed with its largest position difference from the Cholesky frames.

``--broad-phase`` times the broad phases instead (collision/broad_phase.py): a crumpled sheet of
20k / 50k / 100k points at cloth spacing, pairs within 1.5 point spacings (``neighbour_pairs``) and the
16 nearest within that distance (``nearest_within``), with scipy's k-d tree, the hash grid in numpy and,
when CuPy is usable, the hash grid in CuPy (best of 3, synchronized); it checks the sets agree.

    .venv/bin/python -m benchmarks.gpu [--frames 5] [--resolution 141] [--strands 1000] [--vertices 10]
    .venv/bin/python -m benchmarks.gpu --seed-scenes [--frames 12]
    .venv/bin/python -m benchmarks.gpu --broad-phase [--sizes 20000 50000 100000]
"""

from __future__ import annotations

import argparse
import copy
import time

import numpy as np

from benchmarks.der_hairball import hairball
from benchmarks.pd_softbody import blob_scene
from benchmarks.pd_cloth_vs_blender import SPHERE_CENTER, SPHERE_RADIUS, grid_cloth
from solver_server.backend import BackendError, get_backend
from solver_server.collision import broad_phase
from solver_server.simulation import Simulation


def cloth_scene(resolution: int, frames: int) -> dict:
    vertices, triangles, corners = grid_cloth(resolution, 2.0, 1.0)
    return {"gravity": [0.0, 0.0, -9.81],
            "time": {"fps": 24, "frame_start": 1, "frame_end": 2 + frames, "substeps": 2},
            "solver": {"pd": {"iterations": 10}},
            "objects": [{"id": "Cloth", "kind": "cloth", "vertices": vertices, "triangles": triangles,
                         "pins": {"indices": corners, "weights": np.ones(2)}, "params": {}},
                        {"id": "Ball", "kind": "collider",
                         "shape": {"type": "sphere", "center": list(SPHERE_CENTER), "radius": SPHERE_RADIUS},
                         "params": {}}]}


SEED_SCENES = [("cloth 141x141", lambda frames: cloth_scene(141, frames), 54.0),
               ("Armadillo-size soft body (49k tets)", lambda frames: blob_scene(29, 2 + frames), 45.0),
               ("Dragon-size soft body (171k tets)", lambda frames: blob_scene(45, 2 + frames), 8.5)]


# seed 001's GPU global step, A-Jacobi of order 2 with Chebyshev: 30 sweeps per global step (Tangle's default
# count), and 120 (on the 49k-tet blob, 2.1 mm from the Cholesky frames after 24 frames against 33 mm with 30:
# measured on the CPU; the sweeps are one graph replay per global step on a GPU)
SEED_GLOBAL_STEPS = {"A-Jacobi 30": {"global": "a_jacobi", "order": 2, "jacobi_iterations": 30},
                     "A-Jacobi 120": {"global": "a_jacobi", "order": 2, "jacobi_iterations": 120}}


def seed_scene_table(backends: dict, frames: int) -> None:
    """Seed 001's three scenes on every backend: frames and PD steps per second beside the thesis's FPS, with
    the Cholesky global step (Tangle's default) and, on a GPU, also with the seed's own A-Jacobi one (its
    largest position difference from the Cholesky frames printed beside it)."""
    for title, build, seed_fps in SEED_SCENES:
        scene = build(frames)
        substeps = scene["time"]["substeps"]
        for name, backend in backends.items():
            variants = {"cholesky": scene}
            for label, settings in SEED_GLOBAL_STEPS.items() if name != "cpu" else ():
                variants[label] = copy.deepcopy(scene)
                variants[label]["solver"]["pd"].update(settings)
            reference = None
            for label, variant in variants.items():
                result = run(variant, backend)
                frame_fps = 1e3 / result["ms"]
                difference = ""
                if reference is None:
                    reference = result["positions"]
                else:
                    worst = max(float(np.abs(result["positions"][k] - reference[k]).max()) for k in reference)
                    difference = f"; {worst * 1e3:.2f} mm from the Cholesky frames"
                print(f"{title} [{name}, {label}]: {frame_fps:6.1f} frames/s ({result['ms']:.1f} ms per 24 fps "
                      f"frame), {frame_fps * substeps:6.1f} steps/s; thesis {seed_fps:.1f} FPS (one step per frame)"
                      f"{difference}", flush=True)


def hairball_scene(strands: int, vertices: int, frames: int) -> dict:
    points, offsets = hairball(strands, vertices, 0.1, 0.12)
    return {"gravity": [0.0, 0.0, -9.81],
            "time": {"fps": 24, "frame_start": 1, "frame_end": 2 + frames, "substeps": 8},
            "solver": {"der": {"max_iterations": 50, "tolerance": 1e-6, "quasi_newton": True}},
            "objects": [{"id": "Hair", "kind": "hair", "points": points, "strand_offsets": offsets.astype(np.int32),
                         "params": {"model": "der", "radius": 5e-5, "young_modulus": 3e9, "shear_modulus": 1e9,
                                    "density": 1300.0, "damping": 0.5, "friction": 0.3, "collider_friction": 0.3}},
                        {"id": "Head", "kind": "collider", "shape": {"type": "sphere", "center": [0, 0, 0],
                                                                      "radius": 0.1}, "params": {"friction": 0.3}}]}


def run(scene: dict, backend) -> dict:
    """Untimed first frame, then every other frame timed. Returns means and the last positions.

    On a device backend the whole scene runs once untimed first: CuPy compiles every kernel on its first use
    (~0.7 s each with nvrtc, cached on disk afterwards), and kernels first used in later frames (contact,
    collisions) would otherwise land in the timed frames (on a fresh H100 that made PD cloth 4.8 s per
    frame instead of 0.18 s)."""
    if backend.name != "cpu":
        warm_up = Simulation(scene, backend)
        warm_up.initial_frame()
        for _ in range(warm_up.frame_start + 1, warm_up.frame_end + 1):
            warm_up.advance(None)
    simulation = Simulation(scene, backend)
    simulation.initial_frame()
    simulation.advance(None)
    walls, devices, contacts, positions = [], [], [], {}
    for _ in range(simulation.frame_start + 2, simulation.frame_end + 1):
        started = time.perf_counter()
        _, positions, stats = simulation.advance(None)
        walls.append((time.perf_counter() - started) * 1e3)
        devices.append(stats["device_ms"])
        contacts.append(stats["contacts"])
    return {"ms": float(np.mean(walls)), "device_ms": float(np.mean(devices)), "contacts": float(np.mean(contacts)),
            "positions": positions}


def crumpled_sheet(count: int, seed: int = 0) -> tuple[np.ndarray, float]:
    """(count, 3) points [m] on a 2 m wavy sheet and a radius of 1.5 mean point spacings [m]."""
    rng = np.random.default_rng(seed)
    flat = rng.random((count, 2)) * 2.0
    height = 1.0 + 0.1 * np.sin(3.0 * flat[:, 0]) + 0.002 * rng.standard_normal(count)
    return np.column_stack([flat, height]), 1.5 * 2.0 / np.sqrt(count)


def _best_ms(function, synchronize, repeats: int = 3):
    times, result = [], None
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        synchronize()
        times.append((time.perf_counter() - started) * 1e3)
    return min(times), result


def broad_phase_table(sizes) -> None:
    """Print k-d tree vs hash grid (numpy, and CuPy when usable) timings of the two broad-phase queries."""
    implementations = {"kdtree (scipy)": (np, lambda a: a, lambda: None, broad_phase.kdtree_neighbour_pairs,
                                          broad_phase.kdtree_nearest_within),
                       "grid (numpy)": (np, lambda a: a, lambda: None,
                                        lambda p, r: broad_phase.grid_neighbour_pairs(np, p, r),
                                        lambda q, p, r, k: broad_phase.grid_nearest_within(np, q, p, r, k))}
    try:
        cuda = get_backend("cuda")
        cupy = cuda.xp
        implementations["grid (cupy)"] = (
            cupy, cupy.asarray, lambda: cupy.cuda.Stream.null.synchronize(),
            lambda p, r: broad_phase.grid_neighbour_pairs(cupy, p, r),
            lambda q, p, r, k: broad_phase.grid_nearest_within(cupy, q, p, r, k))
    except BackendError as exc:
        print(f"CUDA not available: {exc}; numpy and scipy only")
    for count in sizes:
        points, radius = crumpled_sheet(count)
        counts = {}
        for name, (xp, upload, synchronize, pairs, nearest) in implementations.items():
            device_points = upload(points)
            pairs_ms, found_pairs = _best_ms(lambda: pairs(device_points, radius), synchronize)
            nearest_ms, found_nearest = _best_ms(lambda: nearest(device_points, device_points, radius, 16),
                                                 synchronize)
            counts[name] = (len(found_pairs), len(found_nearest[0]))
            print(f"{count:7d} points, radius {radius * 1e3:.1f} mm: {name:15s} neighbour_pairs {pairs_ms:8.1f} ms "
                  f"({counts[name][0]} pairs), nearest_within k=16 {nearest_ms:8.1f} ms ({counts[name][1]} found)")
        if len(set(counts.values())) != 1:
            print(f"MISMATCH at {count} points: {counts}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=None,
                        help="timed frames per scene and device (default 5; --seed-scenes: 12, so that the soft "
                             "bodies land on the floor inside the timed frames)")
    parser.add_argument("--resolution", type=int, default=141, help="cloth vertices per side (seed 001: 141)")
    parser.add_argument("--strands", type=int, default=1000, help="hairball strands (seed 000: 1000)")
    parser.add_argument("--vertices", type=int, default=10, help="points per hairball strand")
    parser.add_argument("--broad-phase", action="store_true", help="time the broad phases instead of the scenes")
    parser.add_argument("--seed-scenes", action="store_true",
                        help="seed 001's cloth, Armadillo- and Dragon-size soft bodies in FPS beside the thesis's")
    parser.add_argument("--sizes", type=int, nargs="+", default=[20000, 50000, 100000],
                        help="point counts for --broad-phase")
    args = parser.parse_args(argv)
    if args.frames is None:
        args.frames = 12 if args.seed_scenes else 5
    if args.broad_phase:
        broad_phase_table(args.sizes)
        return 0

    backends = {"cpu": get_backend("cpu")}
    try:
        backends["cuda"] = get_backend("cuda")
    except BackendError as exc:
        print(f"CUDA not available: {exc}; running the CPU part only")
    for name, backend in backends.items():
        info = backend.device_info()
        print(f"{name}: {info['name']} ({info['memory_bytes'] / 2**30:.1f} GiB)")

    if args.seed_scenes:
        seed_scene_table(backends, args.frames)
        return 0
    scenes = {f"PD cloth {args.resolution}x{args.resolution}": cloth_scene(args.resolution, args.frames),
              f"DER hairball {args.strands}x{args.vertices}": hairball_scene(args.strands, args.vertices, args.frames)}
    for title, scene in scenes.items():
        results = {name: run(scene, backend) for name, backend in backends.items()}
        for name, result in results.items():
            print(f"{title} [{name}]: {result['ms']:.1f} ms/frame wall, {result['device_ms']:.1f} ms/frame device, "
                  f"{result['contacts']:.0f} contacts/frame")
        if "cuda" in results:
            cpu, cuda = results["cpu"], results["cuda"]
            difference = max(float(np.abs(cpu["positions"][k] - cuda["positions"][k]).max()) for k in cpu["positions"])
            print(f"{title}: cpu/cuda time ratio {cpu['ms'] / cuda['ms']:.2f}x "
                  f"(max position difference {difference:.2e} m after {args.frames + 1} frames)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Soft bodies of ~50 000 and ~170 000 tets falling onto the floor: ms per substep, split local / global / collision.

The body is a generated "blob" (a closed sphere-like surface with radial bumps, the kind of shape a
bunny or armadillo stand-in gives: concave regions, varying thickness), tetrahedralized by the solver's
own lattice embedding (`tet_resolution` cells along the longest axis: 29 gives 49 212 tets, the size of seed
001's Armadillo, 49k; 45 gives 171 348, the size of its Dragon, 168k), dropped from 0.3 m onto a plane
collider. The target: the 50k-tet body at ≤ 100 ms per substep on the CPU. There is no same-scene anchor
in Blender (its Soft Body modifier has no tetrahedral model), so this prints absolute figures only.

    .venv/bin/python -m benchmarks.pd_softbody [--resolution 29 45] [--frames 12] [--substeps 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from benchmarks.kernel_warmup import print_kernel_warmup


def bumpy_blob(rings: int = 32, segments: int = 64, radius_m: float = 0.5):
    """Closed, outward-oriented triangle surface: vertices f64 (V, 3) [m], triangles i32 (F, 3)."""
    theta = np.linspace(0.0, np.pi, rings + 1)[1:-1]
    phi = np.linspace(0.0, 2.0 * np.pi, segments, endpoint=False)
    t, p = np.meshgrid(theta, phi, indexing="ij")
    bump = 1.0 + 0.18 * np.sin(3.0 * t) * np.cos(2.0 * p) + 0.08 * np.cos(5.0 * p) * np.sin(t) ** 2
    ring = np.stack([np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)], axis=-1) * bump[..., None]
    vertices = np.concatenate([[[0.0, 0.0, 1.0]], ring.reshape(-1, 3), [[0.0, 0.0, -1.0]]]) * radius_m
    j = np.arange(segments)
    top = np.stack([np.zeros(segments, int), 1 + j, 1 + (j + 1) % segments], 1)
    band_starts = 1 + np.arange(rings - 2)[:, None] * segments + j[None, :]
    a = band_starts.ravel()
    b = (1 + np.arange(rings - 2)[:, None] * segments + (j[None, :] + 1) % segments).ravel()
    bands = np.concatenate([np.stack([a, a + segments, b + segments], 1), np.stack([a, b + segments, b], 1)])
    last = len(vertices) - 1
    base = 1 + (rings - 2) * segments
    bottom = np.stack([np.full(segments, last), base + (j + 1) % segments, base + j], 1)
    return vertices, np.concatenate([top, bands, bottom]).astype(np.int32)


def blob_scene(resolution: int, frame_end: int, substeps: int = 2, iterations: int = 10) -> dict:
    """The wire scene: the blob embedded at ``resolution`` lattice cells, its lowest point about 0.3 m above a
    floor plane, frames 1 … ``frame_end`` at 24 fps."""
    vertices, triangles = bumpy_blob()
    vertices[:, 2] += 0.3 + 0.5 * 1.3
    return {
        "gravity": [0.0, 0.0, -9.81],
        "time": {"fps": 24, "frame_start": 1, "frame_end": frame_end, "substeps": substeps},
        "solver": {"pd": {"iterations": iterations}},
        "objects": [
            {"id": "Blob", "kind": "softbody", "vertices": vertices, "triangles": triangles,
             "params": {"tet_resolution": resolution, "young_modulus": 2e5, "poisson_ratio": 0.3}},
            {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]},
             "params": {}},
        ],
    }


def run(resolution: int, frames: int, substeps: int, iterations: int) -> None:
    """Drop the blob embedded at ``resolution`` cells; prints its size and the per-substep split."""
    from solver_server.backend import get_backend
    from solver_server.simulation import Simulation

    scene = blob_scene(resolution, 1 + frames, substeps, iterations)
    triangles = scene["objects"][0]["triangles"]
    started = time.perf_counter()
    simulation = Simulation(scene, get_backend("cpu"))
    setup_s = time.perf_counter() - started
    tets = sum(len(group.model.tets) for group in simulation.groups if hasattr(group, "model"))
    nodes = sum(len(group.model.rest) for group in simulation.groups if hasattr(group, "model"))
    print(f"soft body: {len(triangles)} surface triangles -> {tets} tets on {nodes} lattice nodes "
          f"(setup incl. tets, constraints, factorization {setup_s:.2f} s)")

    simulation.initial_frame()
    totals = {"step_ms": 0.0, "local_ms": 0.0, "global_ms": 0.0, "collision_ms": 0.0}
    substeps_run = 0
    lowest = np.inf
    for _ in range(frames):
        _, positions, stats = simulation.advance(None)
        lowest = min(lowest, float(positions["Blob"][:, 2].min()))
        for key in totals:
            totals[key] += float(stats.get(key, 0.0))  # step_ms: mean per substep; the rest: sums per frame
        substeps_run += int(stats["substeps"])
    per_substep = {key: value / (substeps_run if key != "step_ms" else frames) for key, value in totals.items()}
    print(f"  per substep: {per_substep['step_ms']:.0f} ms  (local {per_substep['local_ms']:.0f} ms, "
          f"global {per_substep['global_ms']:.0f} ms, collision {per_substep['collision_ms']:.0f} ms) "
          f"over {substeps_run} substeps; lowest surface point {lowest * 1e3:.1f} mm above the floor")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--resolution", type=int, nargs="+", default=[29, 45],
                        help="lattice cells along the longest axis, one body per value")
    parser.add_argument("--frames", type=int, default=12)
    parser.add_argument("--substeps", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args(argv)
    print_kernel_warmup()
    for resolution in args.resolution:
        run(resolution, args.frames, args.substeps, args.iterations)


if __name__ == "__main__":
    main()

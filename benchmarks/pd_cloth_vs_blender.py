"""Seed 001 cloth scene: Tangle's Projective Dynamics vs Blender's own Cloth modifier, same run.

Scene: a 2 m × 2 m cloth of 141 × 141 vertices (19 881 vertices, 39 200 triangles) lying flat 1 m above
the origin, pinned at its two corners on the −Y edge, draping over a 0.4 m sphere at z = 0.4 m; 30 frames
at 24 fps. Blender's Cloth runs at quality 5 (5 substeps per frame) with a Collision modifier on the
sphere; Tangle runs the PD solver in-process (no sockets, so both numbers are pure solver time).

Printed: ms per frame for each, their ratio, Tangle's split per substep (local step, global solves, collider
contact, hard strain limit), and the edge stretch (l / l_rest − 1) at the last frame as max,
99.9th and 99th percentile, plus Tangle's worst edge over all frames (visual quality: the issue asks for no
visible stretching beyond 10 %).

    .venv/bin/python -m benchmarks.pd_cloth_vs_blender [--frames 30] [--resolution 141]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from benchmarks.kernel_warmup import print_kernel_warmup


def grid_cloth(resolution: int, size_m: float, height_m: float):
    """Flat square grid: vertices f64 (R*R, 3) [m], triangles i32 (2*(R-1)^2, 3), corner pin indices."""
    axis = np.linspace(-size_m / 2, size_m / 2, resolution)
    gx, gy = np.meshgrid(axis, axis, indexing="xy")
    vertices = np.stack([gx.ravel(), gy.ravel(), np.full(gx.size, height_m)], axis=1)
    index = np.arange(resolution * resolution).reshape(resolution, resolution)
    a, b = index[:-1, :-1].ravel(), index[:-1, 1:].ravel()
    c, d = index[1:, :-1].ravel(), index[1:, 1:].ravel()
    triangles = np.concatenate([np.stack([a, b, d], 1), np.stack([a, d, c], 1)]).astype(np.int32)
    corners = np.array([index[0, 0], index[0, -1]], dtype=np.int32)
    return vertices, triangles, corners


def unique_edges(triangles: np.ndarray) -> np.ndarray:
    """(E, 2) sorted vertex pairs of all triangle edges."""
    edges = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    return np.unique(np.sort(edges, axis=1), axis=0)


def edge_stretch(vertices_rest: np.ndarray, vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Relative edge elongation l / l_rest − 1 of every unique triangle edge, (E,)."""
    edges = unique_edges(triangles)
    rest = np.linalg.norm(vertices_rest[edges[:, 0]] - vertices_rest[edges[:, 1]], axis=1)
    now = np.linalg.norm(vertices[edges[:, 0]] - vertices[edges[:, 1]], axis=1)
    return now / rest - 1.0


def stretch_summary(stretch: np.ndarray) -> str:
    """max, 99.9th and 99th percentile of an edge stretch array, in per cent."""
    return (f"max {stretch.max() * 100:5.1f} %, 99.9th {np.percentile(stretch, 99.9) * 100:4.1f} %, "
            f"99th {np.percentile(stretch, 99) * 100:4.1f} %")


SPLIT_KEYS = ("local_ms", "global_ms", "collision_ms", "strain_limit_ms")   # the PD step's timing stats

SPHERE_CENTER = (0.0, 0.0, 0.4)
SPHERE_RADIUS = 0.4


def run_tangle(resolution: int, frames: int, substeps: int, iterations: int):
    from solver_server.backend import get_backend
    from solver_server.simulation import Simulation

    vertices, triangles, corners = grid_cloth(resolution, 2.0, 1.0)
    scene = {
        "gravity": [0.0, 0.0, -9.81],
        "time": {"fps": 24, "frame_start": 1, "frame_end": 1 + frames, "substeps": substeps},
        "solver": {"pd": {"iterations": iterations}},
        "objects": [
            {"id": "Cloth", "kind": "cloth", "vertices": vertices, "triangles": triangles,
             "pins": {"indices": corners, "weights": np.ones(2)}, "params": {}},
            {"id": "Ball", "kind": "collider",
             "shape": {"type": "sphere", "center": list(SPHERE_CENTER), "radius": SPHERE_RADIUS},
             "params": {}},
        ],
    }
    simulation = Simulation(scene, get_backend("cpu"))
    simulation.initial_frame()
    edges = unique_edges(triangles)
    rest = np.linalg.norm(vertices[edges[:, 0]] - vertices[edges[:, 1]], axis=1)
    solver_seconds = 0.0
    positions = None
    worst_any_frame = 0.0
    split = dict.fromkeys(SPLIT_KEYS, 0.0)
    substeps_run = 0
    for _ in range(frames):
        started = time.perf_counter()
        _, frame_positions, stats = simulation.advance(None)
        solver_seconds += time.perf_counter() - started
        for key in SPLIT_KEYS:
            split[key] += float(stats.get(key, 0.0))        # summed over the frame's substeps
        substeps_run += int(stats["substeps"])
        positions = frame_positions["Cloth"].astype(np.float64)
        length = np.linalg.norm(positions[edges[:, 0]] - positions[edges[:, 1]], axis=1)
        worst_any_frame = max(worst_any_frame, float((length / rest).max() - 1.0))
    elapsed = solver_seconds
    split = {key: value / max(substeps_run, 1) for key, value in split.items()}
    return elapsed / frames, edge_stretch(vertices, positions, triangles), worst_any_frame, split


def run_blender(resolution: int, frames: int, quality: int):
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    vertices, triangles, corners = grid_cloth(resolution, 2.0, 1.0)
    mesh = bpy.data.meshes.new("Cloth")
    mesh.from_pydata(vertices.tolist(), [], triangles.tolist())
    cloth = bpy.data.objects.new("Cloth", mesh)
    bpy.context.scene.collection.objects.link(cloth)
    pin_group = cloth.vertex_groups.new(name="pin")
    pin_group.add([int(i) for i in corners], 1.0, "REPLACE")
    modifier = cloth.modifiers.new("Cloth", "CLOTH")
    modifier.settings.quality = quality
    modifier.settings.vertex_group_mass = "pin"
    modifier.point_cache.frame_end = 1 + frames

    bpy.ops.mesh.primitive_uv_sphere_add(radius=SPHERE_RADIUS, location=SPHERE_CENTER, segments=48, ring_count=24)
    bpy.context.active_object.modifiers.new("Collision", "COLLISION")

    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 1 + frames
    scene.frame_set(1)
    started = time.perf_counter()
    for frame in range(2, frames + 2):
        scene.frame_set(frame)
    elapsed = time.perf_counter() - started
    evaluated = cloth.evaluated_get(bpy.context.evaluated_depsgraph_get())
    positions = np.empty(len(evaluated.data.vertices) * 3)
    evaluated.data.vertices.foreach_get("co", positions)
    return elapsed / frames, edge_stretch(vertices, positions.reshape(-1, 3), triangles)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--resolution", type=int, default=141)
    parser.add_argument("--frames", type=int, default=30)
    parser.add_argument("--substeps", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--quality", type=int, default=5)
    args = parser.parse_args(argv)
    print_kernel_warmup()

    print(f"scene: {args.resolution}x{args.resolution} cloth ({args.resolution ** 2} vertices), sphere collider, "
          f"{args.frames} frames at 24 fps")
    tangle_s, tangle_stretch, tangle_worst, split = run_tangle(args.resolution, args.frames, args.substeps,
                                                              args.iterations)
    print(f"tangle PD   : {tangle_s * 1e3:8.1f} ms/frame  (substeps {args.substeps}, iterations {args.iterations})")
    print("              per substep: " + ", ".join(f"{key[:-3].replace('_', ' ')} {value:.1f} ms"
                                                   for key, value in split.items()))
    print(f"              last frame edge stretch {stretch_summary(tangle_stretch)}; "
          f"worst edge over all frames {tangle_worst * 100:.1f} %")
    blender_s, blender_stretch = run_blender(args.resolution, args.frames, args.quality)
    print(f"blender     : {blender_s * 1e3:8.1f} ms/frame  (Cloth modifier, quality {args.quality})")
    print(f"              last frame edge stretch {stretch_summary(blender_stretch)}")
    print(f"speed ratio : tangle is {blender_s / tangle_s:.2f}x Blender's Cloth per frame")


if __name__ == "__main__":
    main()

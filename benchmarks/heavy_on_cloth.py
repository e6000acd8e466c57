"""A heavy soft body on a pinned cloth: a 0.4 m Jelly block (67 kg) dropped 5 cm onto a 2 m Denim cloth pinned at
its four corners, strain limits (1, 1.1); Tangle's PD vs Blender's Cloth (pinned group, collision with the block)
with a Soft Body block (Collision modifier, so the cloth feels it), same run.

Per solver, over all frames: the worst cloth edge (l / l_rest), the block's volume (enclosed by its surface,
relative to the start), how far the block's lowest point gets below the cloth's lowest point [m] (0: it stays
above), the block's lowest point [m] and ms per frame.
With --render DIR, frames 12 and the last of Tangle are rendered (Workbench) into DIR/heavy_block_tangle_fNN.png.

    .venv/bin/python -m benchmarks.heavy_on_cloth [--frames 48] [--resolution 30] [--render docs/images]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tests.physics.test_heavy_body_on_cloth import edge_ratios, heavy_block_on_pinned_cloth

from benchmarks.kernel_warmup import print_kernel_warmup
from benchmarks.suzanne_drape import add_pinned_cloth
from benchmarks.workbench import render_still


def enclosed_volume(points, triangles) -> float:
    """|Volume| [m³] enclosed by the closed surface ``triangles`` (T, 3) over ``points`` (N, 3)."""
    a, b, c = (points[triangles[:, k]] for k in range(3))
    return abs(float(np.einsum("ij,ij->i", a, np.cross(b, c)).sum()) / 6.0)


def figures(cloth_frames, block_frames, rest, triangles, block_triangles) -> dict:
    """The quality figures of per-frame cloth and block positions (F, N, 3)."""
    extent = np.array([enclosed_volume(block, block_triangles) for block in block_frames])
    sink = [max(0.0, float(cloth[:, 2].min() - block[:, 2].min())) for cloth, block in zip(cloth_frames, block_frames)]
    return {"worst_edge": max(float(edge_ratios(cloth, rest, triangles).max()) for cloth in cloth_frames),
            "volume_min": float(extent.min() / extent[0]), "volume_max": float(extent.max() / extent[0]),
            "sinks_below_cloth_m": max(sink), "block_lowest_m": float(min(block[:, 2].min() for block in block_frames))}


def run_tangle(resolution: int, frames: int):
    from solver_server.backend import get_backend
    from solver_server.simulation import Simulation

    scene, rest, triangles = heavy_block_on_pinned_cloth(resolution, frames)
    simulation = Simulation(scene, get_backend("cpu"))
    _, positions, _ = simulation.initial_frame()
    cloth, block = [positions["Cloth"]], [positions["Jelly"]]
    started = time.perf_counter()
    for _ in range(frames - 1):
        _, positions, _ = simulation.advance(None)
        cloth.append(positions["Cloth"])
        block.append(positions["Jelly"])
    elapsed = time.perf_counter() - started
    return np.array(cloth, float), np.array(block, float), elapsed / (frames - 1), (rest, triangles, scene)


def run_blender(resolution: int, frames: int):
    import bpy

    scene_dict, rest, triangles = heavy_block_on_pinned_cloth(resolution, frames)
    cloth_spec, block_spec = scene_dict["objects"]
    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    cloth = add_pinned_cloth(scene, rest, triangles, cloth_spec["pins"]["indices"])
    cloth.modifiers["Cloth"].settings.mass = cloth_spec["params"]["density"] * 4.0 / len(rest)   # kg per vertex
    cloth.modifiers["Cloth"].point_cache.frame_end = frames
    block_mesh = bpy.data.meshes.new("Jelly")
    block_mesh.from_pydata(np.asarray(block_spec["vertices"]).tolist(), [], np.asarray(block_spec["triangles"]).tolist())
    block = bpy.data.objects.new("Jelly", block_mesh)
    scene.collection.objects.link(block)
    block.modifiers.new("Softbody", "SOFT_BODY")
    block.soft_body.mass = 1050.0 * 0.4 ** 3 / len(block_spec["vertices"])
    block.soft_body.use_goal = False
    block.modifiers.new("Collision", "COLLISION")
    block.modifiers["Softbody"].point_cache.frame_end = frames
    scene.frame_start, scene.frame_end = 1, frames
    cloth_frames, block_frames = [], []
    started = time.perf_counter()
    for frame in range(1, frames + 1):
        scene.frame_set(frame)
        depsgraph = bpy.context.evaluated_depsgraph_get()
        for obj, out in ((cloth, cloth_frames), (block, block_frames)):
            evaluated = obj.evaluated_get(depsgraph)
            positions = np.empty(len(evaluated.data.vertices) * 3)
            evaluated.data.vertices.foreach_get("co", positions)
            out.append(positions.reshape(-1, 3))
    elapsed = time.perf_counter() - started
    return np.array(cloth_frames), np.array(block_frames), elapsed / frames


def render(path, cloth_xyz, triangles, block_xyz, block_triangles):
    """Workbench image of cloth and block at one frame, from the side, a little above."""
    import bpy

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    for name, vertices, faces, color in (("Cloth", cloth_xyz, triangles, (0.25, 0.35, 0.7, 1.0)),
                                          ("Jelly", block_xyz, block_triangles, (0.9, 0.6, 0.1, 1.0))):
        mesh = bpy.data.meshes.new(name)
        mesh.from_pydata(np.asarray(vertices).tolist(), [], np.asarray(faces).tolist())
        obj = bpy.data.objects.new(name, mesh)
        obj.color = color
        scene.collection.objects.link(obj)
    render_still(path, (0.0, -4.2, 1.6), (0.0, 0.0, 0.6))


def _line(name, ms, values):
    return (f"{name:8s}: {ms:8.1f} ms/frame | worst edge {values['worst_edge']:6.3f}x | block volume "
            f"{values['volume_min']:.2f}-{values['volume_max']:.2f}x | sinks below the cloth "
            f"{values['sinks_below_cloth_m']:.3f} m | block lowest {values['block_lowest_m']:.3f} m")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=48)
    parser.add_argument("--resolution", type=int, default=30)
    parser.add_argument("--render", default=None, help="folder for Workbench stills of Tangle's frames")
    args = parser.parse_args(argv)
    print_kernel_warmup()
    cloth, block, ms, (rest, triangles, scene) = run_tangle(args.resolution, args.frames)
    print(f"scene: {args.resolution}x{args.resolution} Denim cloth 2 m, corners pinned, limits (1, 1.1); 0.4 m Jelly "
          f"block (67 kg) dropped 5 cm onto it; {args.frames} frames at 24 fps")
    block_triangles = np.asarray(scene["objects"][1]["triangles"])
    print(_line("tangle", ms * 1e3, figures(cloth, block, rest, triangles, block_triangles)))
    blender_cloth, blender_block, blender_ms = run_blender(args.resolution, args.frames)
    print(_line("blender", blender_ms * 1e3, figures(blender_cloth, blender_block, rest, triangles, block_triangles)))
    if args.render:
        for frame in (12, args.frames):
            render(f"{args.render}/heavy_block_tangle_f{frame:02d}.png", cloth[frame - 1], triangles, block[frame - 1],
                   block_triangles)
    return 0


if __name__ == "__main__":
    import os
    import sys

    code = main()
    sys.stdout.flush()
    os._exit(code)     # bpy's atexit handlers can hang a headless process

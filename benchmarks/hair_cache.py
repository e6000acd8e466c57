"""Baked Curves hair stored two ways, same frames, same process run: keyframes (one F-curve per point
coordinate) against the Geometry Nodes bake packed in the .blend (``blender_addon.hair_cache``).

For each groom size, the same precomputed frames (a swaying groom) go through the add-on's own bake
outputs exactly as a bake writes them (``begin``, ``write`` per frame, ``flush``); then the file is saved,
reopened with no add-on, and played: ``frame_set`` on every frame with the hair's evaluated positions
read back and compared with what was written.

Printed per storage: time to store the frames, .blend size, playback frames per second, worst error.

    .venv/bin/python -m benchmarks.hair_cache [--frames 96] [--grooms 112x10,1000x20]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPOSITORY_ROOT = Path(__file__).resolve().parents[1]
CACHES = ("KEYFRAMES", "GEOMETRY_NODES")


def groom_frames(strands: int, points: int, frames: int) -> tuple[np.ndarray, np.ndarray]:
    """(rest (S P, 3), frames (F, S P, 3)) [m]: straight 10 cm strands on a 1 m row, swaying."""
    rest = np.zeros((strands, points, 3))
    rest[:, :, 0] = np.linspace(0.0, 1.0, strands)[:, None]
    rest[:, :, 2] = np.linspace(0.0, 0.1, points)[None, :]
    height = rest[:, :, 2] / 0.1
    phase = np.arange(frames)[:, None, None] * 0.2 + rest[None, :, 0:1, 0] * 6.0
    moved = np.repeat(rest[None], frames, axis=0)
    moved[..., 1] += 0.03 * height[None] ** 2 * np.sin(phase)
    return rest.reshape(-1, 3), moved.reshape(frames, -1, 3).astype(np.float32)


def _curves_object(bpy, strands: int, points: int, rest: np.ndarray):
    curves = bpy.data.hair_curves.new("Groom")
    curves.add_curves([points] * strands)
    curves.position_data.foreach_set("vector", rest.astype(np.float32).ravel())
    obj = bpy.data.objects.new("Groom", curves)
    bpy.context.scene.collection.objects.link(obj)
    obj.tangle.role = "HAIR"
    return obj


def store(bpy, cache: str, strands: int, points: int, rest: np.ndarray, frames: np.ndarray, path: Path) -> float:
    """Write the frames through the bake output for ``cache`` into a new file at ``path``; seconds taken."""
    from blender_addon import bake_output, hair_io
    from blender_addon.core.bake_state import bake_route

    bpy.ops.wm.read_factory_settings(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, len(frames)
    obj = _curves_object(bpy, strands, points, rest)
    target = hair_io.make_target(obj, hair_io.read_strands(obj), np.eye(4))
    output = bake_output.output_for(bake_route("SHAPE_KEYS", cache), scene, target, 1)
    started = time.perf_counter()
    output.begin(None)
    for frame, positions in enumerate(frames, start=1):
        output.write(frame, positions)
    output.flush()
    elapsed = time.perf_counter() - started
    bpy.ops.wm.save_as_mainfile(filepath=str(path), compress=False)
    return elapsed


def play(bpy, path: Path, frames: np.ndarray) -> tuple[float, float]:
    """(frames per second, worst position error [m]) playing the saved file (no add-on involved)."""
    bpy.ops.wm.open_mainfile(filepath=str(path))
    scene, obj = bpy.context.scene, bpy.data.objects["Groom"]
    read = np.empty(frames.shape[1] * 3, np.float32)
    worst = 0.0
    started = time.perf_counter()
    for frame in range(1, len(frames) + 1):
        scene.frame_set(frame)
        evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
        evaluated.data.attributes["position"].data.foreach_get("vector", read)
        worst = max(worst, float(np.abs(read.reshape(-1, 3) - frames[frame - 1]).max()))
    return len(frames) / (time.perf_counter() - started), worst


def _run(bpy, args) -> None:
    print(f"{'groom':>12} {'storage':>15} {'store s':>8} {'.blend MB':>10} {'play fps':>9} {'worst mm':>9}")
    with tempfile.TemporaryDirectory() as folder:
        for groom in args.grooms.split(","):
            strands, points = (int(value) for value in groom.lower().split("x"))
            rest, frames = groom_frames(strands, points, args.frames)
            for cache in CACHES:
                path = Path(folder) / f"{cache}_{groom}.blend"
                seconds = store(bpy, cache, strands, points, rest, frames, path)
                fps, worst = play(bpy, path, frames)
                print(f"{groom:>12} {cache:>15} {seconds:8.2f} {os.path.getsize(path) / 2**20:10.2f} "
                      f"{fps:9.1f} {worst * 1e3:9.4f}", flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=96)
    parser.add_argument("--grooms", default="112x10,1000x20", help="strands x points per strand, comma separated")
    args = parser.parse_args(argv)
    import bpy

    sys.path.insert(0, str(REPOSITORY_ROOT))
    import blender_addon

    blender_addon.register()
    try:
        _run(bpy, args)
    finally:
        blender_addon.unregister()  # bpy 4.5 hangs at interpreter exit while operator classes are registered
    return 0


if __name__ == "__main__":
    sys.exit(main())

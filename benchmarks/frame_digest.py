"""Bit-for-bit fingerprints of the solvers' frames, for restructures that must not change behaviour.

Runs short versions of the reference shots through the public entry points (scene dicts through
``Simulation``, the hairball and the hair of ``der_vs_blender_hair`` through ``DerSolver``) on the CPU and prints one SHA-256 per shot over every
frame's positions (float32 as streamed, the hairball's float64 state). Run it before and after a change
and compare the lines: equal digests mean identical frames.

    .venv/bin/python -m benchmarks.frame_digest [--only cloth_on_suzanne,der_on_suzanne] [--out digests.txt]
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from argparse import Namespace

import numpy as np


def _simulated(scene_dict, drive) -> list[np.ndarray]:
    """Every frame's positions of every object (sorted by id) of a scene run to its last frame."""
    from solver_server.backend import get_backend
    from solver_server.simulation import Simulation

    simulation = Simulation(scene_dict, get_backend("cpu"))
    _, positions, _ = simulation.initial_frame()
    frames = [positions[key] for key in sorted(positions)]
    for frame in range(simulation.frame_start + 1, simulation.frame_end + 1):
        _, positions, _ = simulation.advance(drive(frame) if drive else None)
        frames.extend(positions[key] for key in sorted(positions))
    return frames


def cloth_on_suzanne():
    from tests.physics.character_scenes import cloth_on_suzanne as build

    scene_dict, drive, *_ = build(resolution=24, frames=12)
    return _simulated(scene_dict, drive)


def _hair(model: str, strands: int, frames: int, guide_count: int = 0):
    from tests.physics.character_scenes import hair_on_character

    scene_dict, drive, *_ = hair_on_character(model, strands=strands, frames=frames, motion_frames=frames,
                                              guide_count=guide_count)
    return _simulated(scene_dict, drive)


def der_on_suzanne():
    return _hair("der", 40, 5)


def cosserat_on_suzanne():
    return _hair("cosserat", 150, 8)


def particles_on_suzanne():
    return _hair("particles", 150, 8)


def cosserat_guides_on_suzanne():
    return _hair("cosserat", 150, 8, guide_count=20)


def der_guides_on_suzanne():
    return _hair("der", 150, 5, guide_count=20)


def softbody_on_ball():
    from tests.physics.scenes import box_tets, scene

    vertices, tets, triangles, _ = box_tets((4, 4, 4), (0.3, 0.3, 0.3), origin=(-0.15, -0.15, 0.45))
    jelly = {"id": "Jelly", "kind": "softbody", "vertices": vertices, "tets": tets, "triangles": triangles,
             "params": {"young_modulus": 2e4, "poisson_ratio": 0.4, "friction": 0.3}}
    ball = {"id": "Ball", "kind": "collider", "shape": {"type": "sphere", "center": [0.05, 0.0, 0.2],
                                                       "radius": 0.2}, "params": {"friction": 0.3}}
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "normal": [0, 0, 1], "offset": 0.0},
             "params": {"friction": 0.5}}
    return _simulated(scene([jelly, ball, floor], frame_end=12), None)


def der_hairball():
    from benchmarks.der_hairball import HairballRun

    run = HairballRun(Namespace(strands=150, vertices=10, length=0.55, radius=1e-4, iterations=50, matrix="gauss_newton",
                                refresh=4, local_solver="gauss_seidel"))
    frames = []
    for _ in range(40):     # the strands reach the sphere and each other after about 0.5 s
        run.step(0.02, 5)
        frames.append(np.asarray(run.state.positions))
    return frames


def der_vs_blender_hair():
    from benchmarks.der_vs_blender_hair import run_tangle

    frames = []
    run_tangle(strands=1000, segments=20, frames=6, substeps=5, iterations=50, refresh=1, frames_out=frames)
    return frames


SHOTS = {function.__name__: function for function in (cloth_on_suzanne, der_on_suzanne, cosserat_on_suzanne,
                                                       particles_on_suzanne, cosserat_guides_on_suzanne,
                                                       der_guides_on_suzanne, softbody_on_ball, der_hairball,
                                                       der_vs_blender_hair)}


def digest(frames: list[np.ndarray]) -> str:
    hasher = hashlib.sha256()
    for array in frames:
        hasher.update(np.ascontiguousarray(array).tobytes())
    return hasher.hexdigest()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated shot names (default: all)")
    parser.add_argument("--out", default=None, help="also write the lines to this file")
    args = parser.parse_args(argv)
    names = [name for name in args.only.split(",") if name] or list(SHOTS)
    unknown = sorted(set(names) - set(SHOTS))
    if unknown:
        parser.error(f"unknown shots {unknown}; known: {sorted(SHOTS)}")
    lines = []
    for name in names:
        started = time.perf_counter()
        frames = SHOTS[name]()
        line = f"{name} {digest(frames)} frames={len(frames)}"
        lines.append(line)
        print(f"{line} ({time.perf_counter() - started:.1f} s)", flush=True)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the host does per substep on the CUDA code path: Warp launches, other array operations and device → host
synchronizations, counted on the CPU through ``--device cuda-emulated`` (``solver_server/emulated_device.py``:
CuPy's refusals and synchronization points on numpy, every ``backend.name != "cpu"`` branch taken, kernels in
CUDA's launch layouts).

On a GPU every array operation is a launch or an allocation driven from Python (tens of µs of host time each),
and every synchronization stalls the host until the device queue drains; a device-resident substep has a fixed
sequence of kernels and no synchronization at all. This benchmark is the count the design is held to.

Scenes (steady state: one frame run first and not counted, then ``--frames`` frames counted):

- PD cloth, 141 × 141 vertices pinned at two corners over a sphere (seed 001's cloth, ``benchmarks.gpu``);
- a 49k-tet soft body dropped on a floor (seed 001's Armadillo size, ``benchmarks.pd_softbody``);
- DER, 1 000 strands × 20 points falling onto the head they are rooted on (dense contact, the hairball's
  layout with longer strands);
- the seed hairball, DER 1 000 strands × 10 points (``benchmarks.gpu``);
- Cosserat, 100 strands × 1 000 segments hanging in free air (seed 002's guide step, ``benchmarks.fast_hair``);
- particle hair, 1 000 strands × 20 points falling onto the head they are rooted on (the hairball's layout);
- DER hair on Blender's Suzanne, a triangle-mesh collider (``tests.physics.character_scenes.hair_on_suzanne``,
  the head held still: strands standing out of the scalp falling onto it), the path of an artist's hair on a head.

Per substep (one ``group.step``): Warp launches (``wp.launch``, recorded launches and graph replays), other array
operations (``xp`` calls, operators, indexing), synchronizations, uploads, and the wall time split into time
inside Warp calls and the rest (the Python glue and the emulated device's numpy work). The last line reads
``host syncs per substep: max N``.

    .venv/bin/python -m benchmarks.host_cost [--frames 1] [--only pd_cloth,der_contact,...] [--small]
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np
import warp as wp

from benchmarks.der_hairball import hairball
from benchmarks.fast_hair import head_of_hair
from benchmarks.gpu import cloth_scene, hairball_scene
from benchmarks.pd_softbody import blob_scene
from solver_server import emulated_device as emulated
from solver_server.simulation import Simulation
from tests.physics.character_scenes import hair_on_suzanne

HEAD = {"id": "Head", "kind": "collider", "shape": {"type": "sphere", "center": [0.0, 0.0, 0.0], "radius": 0.1},
        "params": {"friction": 0.3}}


def _hair_scene(points: np.ndarray, model: str, substeps: int, frames: int, params: dict | None = None,
                head: bool = True) -> dict:
    strands, per_strand = points.shape[:2]
    return {"gravity": [0.0, 0.0, -9.81],
            "time": {"fps": 24, "frame_start": 1, "frame_end": 2 + frames, "substeps": substeps},
            "objects": [{"id": "Hair", "kind": "hair", "points": points.reshape(-1, 3),
                         "strand_offsets": (np.arange(strands + 1) * per_strand).astype(np.int32),
                         "params": {"model": model, "collider_friction": 0.3, **(params or {})}},
                        *([HEAD] if head else [])]}


def scenes(small: bool) -> dict:
    """name -> scene(frames) builder; ``small`` shrinks every scene (a quick look at the counts)."""
    scale = 4 if small else 1
    return {
        "pd_cloth": lambda frames: cloth_scene(141 // scale, frames),
        "pd_softbody": lambda frames: blob_scene(29 // scale, 2 + frames),
        "der_contact": lambda frames: hairball_scene(1000 // scale, 20, frames),
        "der_hairball": lambda frames: hairball_scene(1000 // scale, 10, frames),
        "cosserat": lambda frames: _hair_scene(head_of_hair(100 // scale, 1001 // scale, 0.5), "cosserat", 1, frames,
                                               {"radius": 1e-3, "young_modulus": 1e8, "shear_modulus": 4e7,
                                                "cosserat_max_step": 3e-3}, head=False),
        "particles": lambda frames: _hair_scene(
            hairball(1000 // scale, 20, 0.1, 0.12)[0].reshape(1000 // scale, 20, 3), "particles", 1, frames),
        "der_on_mesh": lambda frames: _still_head_hair(frames + 2),
    }


def _still_head_hair(frames: int) -> dict:
    """``hair_on_suzanne`` with the head and the roots held still (the counts need no drive)."""
    scene = hair_on_suzanne(frames=frames)[0]
    for spec in scene["objects"]:
        spec["animated"] = False
    return scene


class WarpCalls:
    """Counts and times the Warp calls that run kernels while the emulated device is inside a substep."""

    def __init__(self):
        self.launches = 0
        self.seconds = 0.0

    def _wrap(self, function, counts_as_launch):
        calls = self

        def counted(*args, **kwargs):
            if emulated.current_substep() is None:
                return function(*args, **kwargs)
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                calls.seconds += time.perf_counter() - started
                calls.launches += int(counts_as_launch(args, kwargs))
        return counted

    @contextlib.contextmanager
    def installed(self):
        """wp.launch (not when it only records a command), recorded launches and graph replays."""
        originals = (wp.launch, wp.capture_launch, wp.Launch.launch)
        wp.launch = self._wrap(originals[0], lambda args, kwargs: not kwargs.get("record_cmd", False))
        wp.capture_launch = self._wrap(originals[1], lambda args, kwargs: True)
        wp.Launch.launch = self._wrap(originals[2], lambda args, kwargs: True)
        try:
            yield self
        finally:
            wp.launch, wp.capture_launch, wp.Launch.launch = originals


def measure(scene: dict, calls: WarpCalls) -> dict:
    """Per-substep counts of one scene on the emulated CUDA device (module docstring): ``Simulation`` runs every
    group's substep inside the device's guard, where the counters count."""
    simulation = Simulation(scene, emulated.emulated_cuda_backend())
    timing = {"substeps": 0, "seconds": 0.0}
    for group in simulation.groups:
        step = group.step

        def timed(inputs, step=step):
            started = time.perf_counter()
            try:
                return step(inputs)
            finally:
                timing["substeps"] += 1
                timing["seconds"] += time.perf_counter() - started
        group.step = timed
    simulation.initial_frame()
    simulation.advance(None)                                        # first frame: lists, factors, graphs
    for table in (emulated.SYNCS, emulated.OPERATIONS, emulated.HOST_TO_DEVICE):
        table.clear()
    calls.launches, calls.seconds = 0, 0.0
    timing.update(substeps=0, seconds=0.0)
    for _ in range(simulation.frame_start + 2, simulation.frame_end + 1):
        simulation.advance(None)
    substeps = max(timing["substeps"], 1)
    return {"substeps": timing["substeps"],
            "launches": calls.launches / substeps,
            "operations": sum(emulated.OPERATIONS.values()) / substeps,
            "syncs": sum(emulated.SYNCS.values()) / substeps,
            "uploads": sum(emulated.HOST_TO_DEVICE.values()) / substeps,
            "wall_ms": timing["seconds"] * 1e3 / substeps,
            "warp_ms": calls.seconds * 1e3 / substeps,
            "glue_ms": (timing["seconds"] - calls.seconds) * 1e3 / substeps}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=1, help="counted frames per scene (after one uncounted)")
    parser.add_argument("--only", help="comma-separated scene names")
    parser.add_argument("--small", action="store_true", help="every scene at a quarter of its size")
    args = parser.parse_args(argv)
    builders = scenes(args.small)
    names = args.only.split(",") if args.only else list(builders)
    unknown = sorted(set(names) - set(builders))
    if unknown:
        parser.error(f"unknown scenes {unknown}; known: {sorted(builders)}")
    print(f"{'scene':14s} {'substeps':>8s} {'launches':>9s} {'array ops':>10s} {'syncs':>8s} {'uploads':>8s} "
          f"{'wall ms':>9s} {'in Warp':>9s} {'glue ms':>9s}   (per substep, cuda-emulated)")
    worst = 0.0
    with WarpCalls().installed() as calls:
        for name in names:
            figure = measure(builders[name](args.frames), calls)
            worst = max(worst, figure["syncs"])
            print(f"{name:14s} {figure['substeps']:8d} {figure['launches']:9.1f} {figure['operations']:10.1f} "
                  f"{figure['syncs']:8.1f} {figure['uploads']:8.1f} {figure['wall_ms']:9.1f} "
                  f"{figure['warp_ms']:9.1f} {figure['glue_ms']:9.1f}", flush=True)
    print(f"host syncs per substep: max {worst:g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

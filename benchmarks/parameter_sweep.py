"""The parameter sweep (run by name; a finder, not a test): draws the parameters of one object kind's
table (``solver_server.sim.params``) across their whole range, each at a bound or log-uniform between (an
open lower bound of 0 reads as 1e-9 of the upper), with substeps 1..24, and runs 2 frames of a small scene:
``der`` / ``cosserat`` / ``particles``: 3 rooted strands of 6 points lying just above a floor (friction,
collider friction, contact offset, damping, radius, density, Young's and shear moduli); ``cloth``: a 10 × 10
cloth pinned at two corners falling onto a floor (friction, thickness, damping, density, stretch, shear and
bend stiffness, self-collision on or off); ``softbody``: a 3 × 3 × 3-cell tet box dropped on a floor
(friction, thickness, damping, density, Young's modulus, Poisson ratio). Prints how each draw ended
(finite frames, ``bad_scene`` at submit, ``simulation_failed``, non-finite, other exception), every draw
that did not end well, and the time per frame against the median of all draws (target: no draw above 10×),
and the time per substep against its median (the substeps are drawn too, so per frame they alone span 24×).

    .venv/bin/python -m benchmarks.parameter_sweep [--kind der] [--draws 40] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter

import numpy as np

from solver_server.backend import get_backend
from solver_server.sim.errors import SceneError, SimulationError
from solver_server.sim.params import CLOTH, HAIR, SOFTBODY
from solver_server.simulation import Simulation
from tests.physics.scenes import box_tets, cloth_object, grid, scene

FLOOR = {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "normal": [0, 0, 1], "point": [0, 0, 0]}}
HAIR_DRAWN = ("friction", "collider_friction", "thickness", "damping", "radius", "density", "young_modulus",
              "shear_modulus")


def draw_value(rng, spec):
    """A bound of table parameter ``spec`` (a quarter of the draws each) or a log-uniform value between."""
    low = spec.low if spec.low > 0.0 else spec.high * 1e-9
    pick = rng.random()
    if pick < 0.25:
        return float(spec.high)
    if pick < 0.5 and not spec.low_open:
        return float(spec.low)
    return float(10.0 ** rng.uniform(math.log10(low), math.log10(spec.high)))


def hair_over_a_floor(params, model="der"):
    strands = [np.stack([np.full(6, 0.05 * k), np.linspace(0.0, 0.2, 6), np.full(6, 0.02)], axis=1) for k in range(3)]
    hair = {"id": "Hair", "kind": "hair", "points": np.concatenate(strands).astype(np.float32),
            "strand_offsets": np.arange(0, 19, 6).astype(np.int32),
            "params": {"model": model, **params}}
    if model != "cosserat":        # the Cosserat model clamps the first two points itself (it needs no pins)
        hair["pins"] = {"indices": np.arange(0, 18, 6).astype(np.int32), "weights": np.ones(3, np.float32)}
    return [hair, FLOOR]


def cloth_over_a_floor(params):
    vertices, triangles, index = grid(10, 10, size=0.5, height=0.3)
    return [cloth_object(vertices, triangles, pins=[index[0, 0], index[-1, 0]], params=params), FLOOR]


def soft_box_over_a_floor(params):
    vertices, tets, triangles, _ = box_tets((3, 3, 3), (0.2, 0.2, 0.2), origin=(0.0, 0.0, 0.1))
    return [{"id": "Soft", "kind": "softbody", "vertices": vertices, "tets": tets, "triangles": triangles,
             "params": params}, FLOOR]


# kind -> (its parameter table, the parameters drawn, the scene objects for a draw, the simulated object's id)
KINDS = {
    "der": (HAIR, HAIR_DRAWN, lambda p: hair_over_a_floor(p, "der"), "Hair"),
    "cosserat": (HAIR, HAIR_DRAWN, lambda p: hair_over_a_floor(p, "cosserat"), "Hair"),
    "particles": (HAIR, HAIR_DRAWN, lambda p: hair_over_a_floor(p, "particles"), "Hair"),
    "cloth": (CLOTH, ("friction", "thickness", "damping", "density", "stretch_stiffness", "shear_stiffness",
                      "bend_stiffness"), cloth_over_a_floor, "Cloth"),
    "softbody": (SOFTBODY, ("friction", "thickness", "damping", "density", "young_modulus", "poisson_ratio"),
                 soft_box_over_a_floor, "Soft"),
}


def run_draw(objects, object_id, substeps, frames=2):
    """(outcome, seconds per frame or None, detail) of a scene of ``objects``."""
    try:
        simulation = Simulation(scene(objects, frame_end=1 + frames, substeps=substeps), get_backend("cpu"))
    except SceneError as error:
        return "bad_scene", None, str(error)
    simulation.initial_frame()
    started = time.perf_counter()
    try:
        for _ in range(frames):
            _, positions, _ = simulation.advance(None)
            if not np.all(np.isfinite(positions[object_id])):
                return "non-finite", None, ""
    except SimulationError as error:
        return "simulation_failed", None, str(error)
    except Exception as error:  # noqa: BLE001 - the sweep reports whatever breaks
        return "exception", None, f"{type(error).__name__}: {error}"
    return "finite", (time.perf_counter() - started) / frames, ""


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kind", choices=sorted(KINDS), default="der")
    parser.add_argument("--draws", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    table, drawn, build, object_id = KINDS[args.kind]
    specs = {spec.name: spec for spec in table}
    rows = []
    for _ in range(args.draws):
        params = {name: draw_value(rng, specs[name]) for name in drawn}
        if args.kind == "cloth":
            params["self_collision"] = bool(rng.random() < 0.5)
        substeps = 1 if rng.random() < 0.2 else int(rng.integers(1, 25))
        rows.append((params, substeps, *run_draw(build(params), object_id, substeps)))
    print("outcomes:", dict(Counter(row[2] for row in rows)))
    times = [row[3] for row in rows if row[3] is not None]
    median = float(np.median(times)) if times else float("nan")
    for params, substeps, outcome, seconds, detail in rows:
        crawls = seconds is not None and seconds > 10.0 * median
        if outcome not in ("finite", "bad_scene") or crawls:
            shown = ", ".join(f"{name}={value:.3g}" for name, value in params.items())
            print(f"{outcome}{' (crawls)' if crawls else ''}: substeps={substeps}, {shown}: {detail[:160]}")
    if times:
        print(f"time per frame: median {median * 1e3:.0f} ms, largest {max(times) * 1e3:.0f} ms "
              f"({max(times) / median:.1f}x the median; target: at most 10x)")
        # the draws' substeps range over 1..24, so per frame a 24-substep draw costs ~24x a 1-substep one by
        # construction; per substep compares a draw with its neighbours in cost
        per_substep = [row[3] / row[1] for row in rows if row[3] is not None]
        middle = float(np.median(per_substep))
        print(f"time per substep: median {middle * 1e3:.1f} ms, largest {max(per_substep) * 1e3:.1f} ms "
              f"({max(per_substep) / middle:.1f}x the median)")


if __name__ == "__main__":
    main()

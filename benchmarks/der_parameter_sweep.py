"""Issue 20's parameter sweep for DER hair (run by name; it is a finder, not a test): draws every
parameter of the hair table (``solver_server.sim.params.HAIR``: friction, collider friction, contact
offset, damping, radius, density, Young's and shear moduli) across its whole range, each at a bound or
log-uniform between (an open lower bound of 0 reads as 1e-9 of the upper), with substeps 1..24, on 3 rooted
strands of 6 points lying just above a floor, 2 frames each. Prints how each draw ended (finite frames,
``bad_scene`` at submit, ``simulation_failed``, non-finite, other exception), every draw that did not end
well, and the time per frame against the median of all draws (issue 20: no draw above 10×).

    .venv/bin/python -m benchmarks.der_parameter_sweep [--draws 40] [--seed 0]
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter

import numpy as np

from solver_server.backend import get_backend
from solver_server.sim.errors import SceneError, SimulationError
from solver_server.sim.params import HAIR
from solver_server.simulation import Simulation
from tests.physics.scenes import scene

SPECS = {spec.name: spec for spec in HAIR}
DRAWN = ("friction", "collider_friction", "thickness", "damping", "radius", "density", "young_modulus",
         "shear_modulus")


def draw_value(rng, name):
    """A bound of table parameter ``name`` (a quarter of the draws each) or a log-uniform value between."""
    spec = SPECS[name]
    low = spec.low if spec.low > 0.0 else spec.high * 1e-9
    pick = rng.random()
    if pick < 0.25:
        return float(spec.high)
    if pick < 0.5 and not spec.low_open:
        return float(spec.low)
    return float(10.0 ** rng.uniform(math.log10(low), math.log10(spec.high)))


def hair_over_a_floor(params):
    strands = [np.stack([np.full(6, 0.05 * k), np.linspace(0.0, 0.2, 6), np.full(6, 0.02)], axis=1) for k in range(3)]
    hair = {"id": "Hair", "kind": "hair", "points": np.concatenate(strands).astype(np.float32),
            "strand_offsets": np.arange(0, 19, 6).astype(np.int32),
            "pins": {"indices": np.arange(0, 18, 6).astype(np.int32), "weights": np.ones(3, np.float32)},
            "params": {"model": "der", **params}}
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "normal": [0, 0, 1], "point": [0, 0, 0]}}
    return [hair, floor]


def run_draw(params, substeps, frames=2):
    """(outcome, seconds per frame or None, detail)."""
    try:
        simulation = Simulation(scene(hair_over_a_floor(params), frame_end=1 + frames, substeps=substeps),
                                get_backend("cpu"))
    except SceneError as error:
        return "bad_scene", None, str(error)
    simulation.initial_frame()
    started = time.perf_counter()
    try:
        for _ in range(frames):
            _, positions, _ = simulation.advance(None)
            if not np.all(np.isfinite(positions["Hair"])):
                return "non-finite", None, ""
    except SimulationError as error:
        return "simulation_failed", None, str(error)
    except Exception as error:  # noqa: BLE001 - the sweep reports whatever breaks
        return "exception", None, f"{type(error).__name__}: {error}"
    return "finite", (time.perf_counter() - started) / frames, ""


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    rows = []
    for _ in range(args.draws):
        params = {name: draw_value(rng, name) for name in DRAWN}
        substeps = 1 if rng.random() < 0.2 else int(rng.integers(1, 25))
        rows.append((params, substeps, *run_draw(params, substeps)))
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
              f"({max(times) / median:.1f}x the median; issue 20 bar: at most 10x)")


if __name__ == "__main__":
    main()

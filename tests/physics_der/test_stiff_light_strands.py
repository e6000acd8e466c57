"""The parameter sweep's runaway at the hair table's corner (seed 1): stiff, light strands (E ≈ 1 TPa,
12 kg/m³, 1 cm radius) pinned at the root only, falling onto a floor.  Each is a rigid rod on a hinge; its
stretch blocks outweigh the inertia ~10⁸ times, so impulses solved on the Delassus response of the matrix
before a refresh (edges turned by a milliradian since) came out ~10⁴ too large and launched the rods upright
at 50 m/s.  The contacts now solve their impulses again on every refreshed matrix before a step applies them."""

from __future__ import annotations

import numpy as np

from benchmarks.parameter_sweep import hair_over_a_floor
from solver_server.backend import get_backend
from solver_server.simulation import Simulation
from tests.physics.scenes import run, scene

CORNER = {"friction": 1.41e-08, "collider_friction": 0.0, "thickness": 3.71e-09, "damping": 0.00966,
          "radius": 0.01, "density": 11.7, "young_modulus": 9.8e11, "shear_modulus": 4.38e10}
ROOT_HEIGHT = 0.02   # m: the strands lie straight at this height, the floor is z = 0


def test_stiff_light_rods_land_on_the_floor_and_stay_there():
    frames = run(Simulation(scene(hair_over_a_floor(CORNER), frame_end=16, substeps=1, fps=240),
                            get_backend("cpu")))
    heights = np.stack([positions["Hair"][:, 2] for _, positions, _ in frames])     # (frames, points)
    assert np.all(np.isfinite(heights))
    # a hinged rod only swings down onto the floor: no point ever rises above the root (it rose to 0.216 m)
    assert heights.max() <= ROOT_HEIGHT + 1e-6
    tips = heights[:, 5::6]
    # the tips come to rest on the floor at one radius (the contact distance), not inside it
    assert np.all(tips >= CORNER["radius"] - 2e-4)
    np.testing.assert_allclose(tips[-1], CORNER["radius"], atol=2e-4)


def test_the_sweep_draw_that_ran_away_simulates_at_its_own_substeps():
    simulation = Simulation(scene(hair_over_a_floor(CORNER), frame_end=4, substeps=10), get_backend("cpu"))
    frames = run(simulation)      # raised "runaway: a point moved at 58.9 m/s" at frame 3
    final = frames[-1][1]["Hair"]
    assert np.all(np.isfinite(final)) and final[:, 2].max() <= ROOT_HEIGHT + 1e-6

"""Bending stiffness and droop: a 1 m cloth flap clamped along one edge droops less the stiffer it bends.

A pin holds a position, not an angle: one pinned row is a hinge, and a flap hinged on it hangs straight down
whatever its bending stiffness (no bending energy resists a rigid turn about the hinge). Clamping an edge, as
a cantilever, takes two pinned rows, which hold the edge's tangent too. A flap measured while it still swings
about its hinge shows any droop at all, stiffer or not; both cases are measured here once settled."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.simulation import Simulation

from .scenes import cloth_object, grid, run, scene

SIDE = 11                                  # vertices per side of the 1 m flap (10 cm edges)
COTTON = {"density": 0.15, "stretch_stiffness": 2000.0, "shear_stiffness": 200.0, "damping": 3.0}
FRAMES = 96                                # 4 s: the damped flap has settled


def _settled_droop(bend_stiffness: float, pinned_rows: int) -> float:
    """Mean drop [m] of the free edge of a horizontal 1 m flap pinned along its first ``pinned_rows`` rows."""
    vertices, triangles, index = grid(SIDE, SIDE, size=1.0, height=1.0)
    flap = cloth_object(vertices, triangles, pins=index[:pinned_rows].ravel(),
                        params={**COTTON, "bend_stiffness": bend_stiffness})
    frames = run(Simulation(scene([flap], frame_end=FRAMES, substeps=4), get_backend("cpu")))
    positions = frames[-1][1]["Cloth"]
    assert np.all(np.isfinite(positions))
    return float(1.0 - positions[index[-1], 2].mean())


def test_a_clamped_flap_droops_less_the_stiffer_it_bends():
    stiffness = (0.0, 0.005, 0.05, 0.5, 5.0)     # [N·m]
    droop = [_settled_droop(value, pinned_rows=2) for value in stiffness]
    # a limp flap hangs from the clamp: 0.9 m below it (the clamp is the first 0.1 m)
    assert droop[0] == pytest.approx(0.9, abs=0.01)
    for softer, stiffer, value in zip(droop, droop[1:], stiffness[1:]):
        assert stiffer <= softer + 2e-3, f"bend stiffness {value} N·m droops more than a softer flap: {droop}"
    assert droop[-1] < 0.2 * droop[0], droop            # the stiffest flap stands out nearly level
    assert droop[3] < 0.8 * droop[0], droop


def test_a_single_pinned_row_is_a_hinge_the_flap_hangs_at_any_bend_stiffness():
    for value in (0.0, 0.5, 5.0):
        assert _settled_droop(value, pinned_rows=1) == pytest.approx(1.0, abs=5e-3), value

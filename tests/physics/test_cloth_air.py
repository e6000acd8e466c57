"""Still air on cloth (solvers/pd/air.py): a sheet moving along its normal is slowed as a flat plate, inside the
PD solve. A sheet falling flat reaches the terminal speed √(2 σ g / (ρ_air C_d air_drag)); edge-on it falls
freely; without the setting (the default) it falls freely flat too."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.kernels.air import AIR_DENSITY
from solver_server.simulation import Simulation
from solver_server.solvers.pd.air import PLATE_DRAG_COEFFICIENT

from .scenes import cloth_object, grid, scene

DENSITY = 0.2      # kg/m²
GRAVITY = 9.81


def _fall_speeds(tilt_degrees: float, air_drag: float | None, frames: int = 48) -> np.ndarray:
    """Downward speed [m/s] of a 0.5 m sheet's centre of mass at every frame after the first, the sheet tilted by
    ``tilt_degrees`` about x (0: flat, 90: edge-on) and falling from rest; ``air_drag`` None leaves the default."""
    vertices, triangles, _ = grid(10, 10, size=0.5, height=0.0)
    angle = np.radians(tilt_degrees)
    turn = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(angle), -np.sin(angle)], [0.0, np.sin(angle), np.cos(angle)]])
    params = {"density": DENSITY, "damping": 0.0}       # air alone slows it
    if air_drag is not None:
        params["air_drag"] = air_drag
    simulation = Simulation(scene([cloth_object(vertices @ turn.T, triangles, params=params)], frame_end=frames,
                                  substeps=4), get_backend("cpu"))
    heights = [simulation.initial_frame()[1]["Cloth"][:, 2].mean()]
    for _ in range(2, frames + 1):
        heights.append(simulation.advance(None)[1]["Cloth"][:, 2].mean())
    return -np.diff(heights) * 24.0


@pytest.mark.parametrize("air_drag", [1.0, 4.0])
def test_a_sheet_falling_flat_reaches_the_flat_plate_terminal_speed(air_drag):
    terminal = np.sqrt(2.0 * DENSITY * GRAVITY / (AIR_DENSITY * PLATE_DRAG_COEFFICIENT * air_drag))
    speeds = _fall_speeds(0.0, air_drag)
    assert speeds[23] == pytest.approx(terminal, rel=0.03)          # after one second
    assert speeds[-1] == pytest.approx(speeds[23], rel=1e-3)        # and steady from then on


def test_a_sheet_falling_edge_on_falls_freely():
    speeds = _fall_speeds(90.0, 1.0, frames=25)
    assert speeds[-1] == pytest.approx(GRAVITY * 23.5 / 24.0, rel=0.01)     # between frames 24 and 25


def test_without_air_drag_a_flat_sheet_falls_freely():
    speeds = _fall_speeds(0.0, None, frames=25)
    assert speeds[-1] == pytest.approx(GRAVITY * 23.5 / 24.0, rel=0.01)

"""Air drag on hair: the drag law of a thin cylinder in cross-flow (``kernels/air.py``) against measured
cylinder drag, the terminal velocity of a falling strand against the law's own prediction, and every hair
model slowing a swinging strand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.kernels.air import AIR_KINEMATIC_VISCOSITY
from solver_server.simulation import Simulation
from solver_server.solvers.air_drag import StrandAirDrag
from tests.physics.air_reference import HALF_DENSITY_VISCOSITY, drag_number
from tests.physics.scenes import scene

RADIUS = 1.0e-4
DENSITY = 1300.0
LINEAR_DENSITY = DENSITY * math.pi * RADIUS ** 2


def _drag_numbers(reynolds, tangent=(0.0, 0.0, 1.0)):
    """Re·C_d that StrandAirDrag applies at these Reynolds numbers (motion along x, strand along ``tangent``)."""
    speed = np.asarray(reynolds, np.float64) * AIR_KINEMATIC_VISCOSITY / (2.0 * RADIUS)
    count = len(speed)
    drag = StrandAirDrag(np, np.full(count, RADIUS), np.full(count, LINEAR_DENSITY), np.ones(count))
    velocities = np.zeros((count, 3))
    velocities[:, 0] = speed
    rates = drag.rates(velocities, np.tile(np.asarray(tangent, np.float64), (count, 1)))
    return rates * LINEAR_DENSITY / HALF_DENSITY_VISCOSITY


def test_drag_coefficient_follows_measured_cylinder_drag():
    # the standard drag curve of a circular cylinder in cross-flow (White, Viscous Fluid Flow; Tritton 1959)
    reynolds = np.array([1.0, 10.0, 100.0, 1000.0])
    measured = np.array([10.0, 3.0, 1.45, 1.0])
    drag_coefficient = _drag_numbers(reynolds) / reynolds
    assert np.all(np.abs(drag_coefficient / measured - 1.0) < 0.15), drag_coefficient


def test_drag_is_continuous_across_the_two_regimes_and_falls_off_at_rest():
    below, above = _drag_numbers([1.0 - 1e-9, 1.0 + 1e-9])
    assert abs(below / above - 1.0) < 1e-6
    slow = _drag_numbers([1e-3, 1e-2, 1e-1, 0.5])
    assert np.all(np.diff(slow) > 0.0) and slow[0] > 0.0     # Re·C_d grows with the speed, never negative


def test_motion_along_the_strand_meets_the_low_speed_drag_only():
    along = _drag_numbers([10.0], tangent=(1.0, 0.0, 0.0))[0]
    across = _drag_numbers([10.0])[0]
    assert along < 0.1 * across


def _terminal_speed(radius, density, gravity=9.81):
    """Speed [m/s] at which the drag of a horizontal strand balances its weight, by bisection on the law."""
    linear_density = density * math.pi * radius ** 2
    low, high = 0.0, 100.0
    for _ in range(200):
        speed = 0.5 * (low + high)
        force = HALF_DENSITY_VISCOSITY * float(drag_number(2.0 * radius * speed / AIR_KINEMATIC_VISCOSITY)) * speed
        low, high = (speed, high) if force < linear_density * gravity else (low, speed)
    return 0.5 * (low + high)


def test_a_horizontal_der_strand_falls_at_the_terminal_speed_of_the_drag_law():
    points = np.zeros((8, 3))
    points[:, 0] = np.linspace(0.0, 0.1, 8)
    hair = {"id": "Hair", "kind": "hair", "points": points.astype(np.float32),
            "strand_offsets": np.array([0, 8], np.int32), "pins": {"indices": [], "weights": []},
            "params": {"model": "der", "radius": RADIUS, "density": DENSITY, "damping": 0.0}}
    simulation = Simulation(scene([hair], frame_end=36, substeps=4), get_backend("cpu"))
    heights = [np.asarray(simulation.initial_frame()[1]["Hair"], np.float64)[:, 2].mean()]
    for _ in range(35):
        heights.append(np.asarray(simulation.advance(None)[1]["Hair"], np.float64)[:, 2].mean())
    speed = -(heights[-1] - heights[-2]) * 24.0
    expected = _terminal_speed(RADIUS, DENSITY)
    assert 0.8 < expected < 1.5                        # the law's figure for a 0.2 mm hair: about 1.1 m/s
    assert abs(speed / expected - 1.0) < 0.03, (speed, expected)


@pytest.mark.parametrize("model", ["der", "cosserat", "particles"])
def test_air_slows_a_swinging_strand_in_every_model(model):
    """A rooted horizontal strand swings down under gravity: 1.5 s later its tip moves far slower in air than
    without air drag (both with the model's damping off)."""
    def tip_speed(air_drag):
        points = np.zeros((12, 3))
        points[:, 0] = np.linspace(0.0, 0.25, 12)
        hair = {"id": "Hair", "kind": "hair", "points": points.astype(np.float32),
                "strand_offsets": np.array([0, 12], np.int32),
                "params": {"model": model, "radius": RADIUS, "damping": 0.0, "air_drag": air_drag}}
        simulation = Simulation(scene([hair], frame_end=40, substeps=4), get_backend("cpu"))
        simulation.initial_frame()
        tips = []
        for _ in range(39):
            _, positions, _ = simulation.advance(None)
            tips.append(np.asarray(positions["Hair"], np.float64)[-1])
        steps = np.linalg.norm(np.diff(np.array(tips), axis=0), axis=1) * 24.0
        assert np.all(np.isfinite(steps))
        return float(steps[-12:].max())

    assert tip_speed(1.0) < 0.5 * tip_speed(0.0)

"""Wind on cloth (solvers/pd/wind.py): a face takes the wind's component along its normal.
Analytic cases without gravity: a free sheet facing the wind moves ½ s t², edge-on it does not move, at
45° it takes half the wind along its normal; the gust follows strength + amplitude sin(2π t / period);
a flag pinned at its mast, under gravity, is lifted and blown downwind."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.simulation import Simulation

from .scenes import cloth_object, grid, run, scene

FRAMES, FPS = 12, 24
STILL_AIR = {"damping": 0.0}


def _sheet(normal_axis: str):
    """A 0.4 m square sheet whose normal is ±y (it stands in the XZ plane) or ±z (it lies in XY)."""
    vertices, triangles, index = grid(6, 6, size=0.4, height=0.0)
    if normal_axis == "y":
        vertices = vertices[:, [0, 2, 1]]
    return vertices, triangles, index


SUBSTEPS = 2


def _implicit_euler_drift(acceleration, frames=FRAMES):
    """Displacement [m] under acceleration(t) [m/s²] after ``frames`` by the solver's own time stepping:
    v_k = v_(k−1) + h a(t_k), x_k = x_(k−1) + h v_k with t_k the end of substep k (½ a t² (1 + 1/N) for a
    constant a: backward Euler is not exact for it)."""
    h = 1.0 / (FPS * SUBSTEPS)
    velocity = position = 0.0
    for k in range(1, frames * SUBSTEPS + 1):
        velocity += h * acceleration(k * h)
        position += h * velocity
    return position


def _drift(normal_axis, wind, frames=FRAMES):
    vertices, triangles, _ = _sheet(normal_axis)
    params = {**STILL_AIR, **{f"wind_{key}": value for key, value in wind.items()}}
    frames_out = run(Simulation(scene([cloth_object(vertices, triangles, params=params)], frame_end=1 + frames,
                                      substeps=SUBSTEPS, gravity=(0.0, 0.0, 0.0)), get_backend("cpu")))
    return frames_out[-1][1]["Cloth"].astype(np.float64) - vertices


def test_a_sheet_facing_the_wind_moves_half_s_t_squared():
    drift = _drift("y", {"direction": [0.0, 1.0, 0.0], "strength": 2.0})
    expected = _implicit_euler_drift(lambda t: 2.0)
    assert abs(expected / (0.5 * 2.0 * (FRAMES / FPS) ** 2) - 1.0) < 0.05    # ½ s t², to the step's error
    np.testing.assert_allclose(drift[:, 1], expected, rtol=1e-5)
    assert np.abs(drift[:, [0, 2]]).max() < 1e-6


def test_a_sheet_edge_on_to_the_wind_feels_none():
    assert np.abs(_drift("z", {"direction": [1.0, 0.0, 0.0], "strength": 5.0})).max() < 1e-6   # float32 output


def test_at_45_degrees_the_sheet_takes_half_the_wind_along_its_normal():
    diagonal = [1.0 / math.sqrt(2.0), 1.0 / math.sqrt(2.0), 0.0]
    drift = _drift("y", {"direction": diagonal, "strength": 2.0})
    # (w · n̂) n̂ with n̂ = ±y: |w| cos 45° along y, nothing along x
    np.testing.assert_allclose(drift[:, 1], _implicit_euler_drift(lambda t: 2.0 / math.sqrt(2.0)), rtol=1e-5)
    assert np.abs(drift[:, 0]).max() < 1e-6


@pytest.mark.parametrize("period", [0.5, 1.0])
def test_a_gust_integrates_its_sine(period):
    """strength 0, amplitude 3: a(t) = 3 sin(2π t / period), stepped as the solver steps it; close to the
    continuous 3 (t/ω − sin(ω t)/ω²)."""
    drift = _drift("y", {"direction": [0.0, 1.0, 0.0], "strength": 0.0, "amplitude": 3.0, "period": period})
    omega = 2.0 * math.pi / period
    expected = _implicit_euler_drift(lambda t: 3.0 * math.sin(omega * t))
    seconds = FRAMES / FPS
    continuous = 3.0 * (seconds / omega - math.sin(omega * seconds) / omega ** 2)
    assert abs(expected - continuous) < 0.1 * continuous          # 24 substeps of a 0.5-1 s period
    np.testing.assert_allclose(drift[:, 1], expected, rtol=1e-5, atol=1e-7)


def test_a_flag_on_its_mast_is_blown_downwind_and_lifted():
    vertices, triangles, index = _sheet("y")           # hangs in the XZ plane
    vertices = vertices + [0.0, 0.0, 1.0]
    mast = index[0, :]                                 # the x = 0 column, all heights
    params = {"wind_direction": [1.0, 0.3, 0.0], "wind_strength": 12.0, "wind_amplitude": 4.0, "wind_period": 0.4}
    calm, windy = (np.array([frame[1]["Cloth"] for frame in run(Simulation(
        scene([cloth_object(vertices, triangles, pins=mast, params=p)], frame_end=37), get_backend("cpu")))])
        for p in ({}, params))
    assert np.all(np.isfinite(windy))
    free = np.setdiff1d(np.arange(len(vertices)), mast)
    # without wind the free edge hangs below the mast; with it, the flag swings out along the wind and flutters
    # about it (so the figures are means over frames 13-37, not one phase of the flutter)
    assert windy[12:, free, 1].mean() > calm[12:, free, 1].mean() + 0.03
    assert windy[12:, free, 2].mean() > calm[12:, free, 2].mean() + 0.01
    np.testing.assert_allclose(windy[-1, mast], vertices[mast], atol=1e-6)

"""Wind on DER hair (solvers/der/wind.py): the component of the wind across the strand.
A clamped horizontal rod in a wind blowing down across it (no gravity) bends like the Euler–Bernoulli
cantilever under the same load per length; a wind along the rod moves nothing; through the scene
parameters, a gusty wind blows hanging strands downwind."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.simulation import Simulation
from solver_server.solvers.der.model import DerMaterial
from tests.physics.scenes import run as run_frames
from tests.physics.scenes import scene

from .helpers import clamped_rod_in_wind

MATERIAL = DerMaterial(radius=1e-3, young_modulus=2e9, shear_modulus=1e9, density=1000.0)
N, LENGTH = 21, 0.2


def _rod_in_wind(direction, strength=9.81):
    return clamped_rod_in_wind(MATERIAL, N, LENGTH, direction, strength)


def test_a_wind_across_a_clamped_rod_bends_it_like_the_cantilever_under_that_load():
    model, state = _rod_in_wind((0.0, 0.0, -1.0))
    segment = LENGTH / (N - 1)
    bending_length = LENGTH - 0.5 * segment              # as in test_dynamics' cantilever
    load = MATERIAL.density * np.pi * MATERIAL.radius ** 2 * 9.81
    stiffness = MATERIAL.young_modulus * np.pi * MATERIAL.radius ** 4 / 4
    expected = load * bending_length ** 4 / (8 * stiffness)
    assert expected / bending_length < 0.05              # small deflection: across ≈ the fixed direction
    assert abs(-state.positions[-1, 2] - expected) / expected < 0.10
    np.testing.assert_allclose(state.positions[:2], model.rest_positions[:2])


def test_a_wind_along_the_rod_moves_nothing():
    model, state = _rod_in_wind((1.0, 0.0, 0.0), strength=50.0)
    np.testing.assert_allclose(state.positions, model.rest_positions, atol=1e-9)


@pytest.mark.parametrize("model_name", ["der"])
def test_hanging_strands_are_blown_downwind_through_the_scene_parameters(model_name):
    strands = [np.stack([np.full(8, 0.02 * k), np.zeros(8), np.linspace(1.0, 0.86, 8)], axis=1) for k in range(3)]
    hair = {"id": "Hair", "kind": "hair", "points": np.concatenate(strands).astype(np.float32),
            "strand_offsets": np.arange(0, 25, 8).astype(np.int32), "params": {"model": model_name}}
    still = np.stack([frame[1]["Hair"] for frame in run_frames(Simulation(scene([hair], frame_end=13),
                                                                          get_backend("cpu")))])
    windy_hair = {**hair, "params": {**hair["params"], "wind_direction": [0.0, 1.0, 0.0], "wind_strength": 6.0,
                                     "wind_amplitude": 2.0, "wind_period": 0.5}}
    windy = np.stack([frame[1]["Hair"] for frame in run_frames(Simulation(scene([windy_hair], frame_end=13),
                                                                          get_backend("cpu")))])
    assert np.all(np.isfinite(windy))
    tips = windy[:, 7::8, 1]                                    # (frames, strands) downwind offsets of the tips
    assert np.abs(still[:, 7::8, 1]).max() < 1e-6              # without wind they hang in their plane
    # the stiff strands swing about their bent equilibrium downwind (the 0.5 s gust drives the swing)
    assert tips.mean() > 0.02 and tips.max() > 0.05
    np.testing.assert_allclose(windy[:, 0::8], still[:, 0::8], atol=1e-6)    # the roots stay clamped

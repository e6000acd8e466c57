"""Analytic checks of soft pins, damping and friction against a moving collider."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.simulation import Simulation

from .scenes import cloth_object, grid, run, scene

BACKEND = get_backend("cpu")


def test_soft_pins_sag_by_weight_over_stiffness():
    """Every vertex pinned with weight 0.5 and pin_stiffness k: the sheet translates rigidly (no edge
    strain), so each vertex settles at m g / (0.5 k) below its target."""
    vertices, triangles, _ = grid(6, 6, size=0.5, height=1.0)
    stiffness = 50.0
    cloth = cloth_object(vertices, triangles, params={"pin_stiffness": stiffness, "damping": 20.0})
    cloth["pins"] = {"indices": np.arange(len(vertices), dtype=np.int32), "weights": np.full(len(vertices), 0.5)}
    sim = Simulation(scene([cloth], frame_end=48), BACKEND)
    final = run(sim)[-1][1]["Cloth"]
    mass = sim.groups[0].model.mass
    expected = mass * 9.81 / (0.5 * stiffness)
    np.testing.assert_allclose(vertices[:, 2] - final[:, 2], expected, rtol=1e-3)


def test_damping_gives_terminal_velocity():
    """Per substep the positions advance by h(v + h g) and then v ← (v + h g)/(1 + d h): the velocity
    settles at g/d and the positions move at g/d·(1 + d h)."""
    vertices, triangles, _ = grid(4, 4, size=0.2, height=0.0)
    damping = 4.0
    sim = Simulation(scene([cloth_object(vertices, triangles, params={"damping": damping})], frame_end=61), BACKEND)
    frames = run(sim)
    fall = [positions["Cloth"][:, 2].mean() for _, positions, _ in frames]
    speed = (fall[-2] - fall[-1]) * 24.0
    h = 1.0 / 24 / 4
    assert speed == pytest.approx(9.81 / damping * (1 + damping * h), rel=1e-3)


def test_static_friction_carries_a_block_on_a_moving_platform():
    """A cloth patch resting on a box collider that slides sideways at 0.5 m/s moves with it when μ is
    high (surface motion enters the friction) and stays behind on a frictionless box."""
    vertices, triangles, _ = grid(5, 5, size=0.2, height=0.105)
    travelled = {}
    for mu in (0.0, 0.8):
        platform = {"id": "Platform", "kind": "collider", "animated": True, "params": {"friction": mu},
                    "shape": {"type": "box", "size": [2.0, 2.0, 0.2]}, "matrix_world": np.eye(4)}
        cloth = cloth_object(vertices, triangles, params={"friction": mu, "thickness": 0.005})

        def drive(frame):
            matrix = np.eye(4)
            matrix[0, 3] = 0.5 * max(0, frame - 7) / 24.0  # starts moving after 0.25 s
            return {"Platform": {"matrix_world": matrix}}

        final = run(Simulation(scene([cloth, platform], frame_end=31), BACKEND), drive)[-1][1]["Cloth"]
        travelled[mu] = final[:, 0].mean() - vertices[:, 0].mean()
    platform_travel = 0.5 * 24 / 24.0
    assert travelled[0.8] == pytest.approx(platform_travel, rel=0.05)
    assert abs(travelled[0.0]) < 0.01

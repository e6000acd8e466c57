"""Pins in time: a cloth's pins let go at the frame the artist sets (``unpin_frame``), and from then on it falls;
before that frame the pinned vertices hold exactly; a pin whose target jumps is pulled in at ``pin_pull_speed``.
No runaway, every frame finite."""

from __future__ import annotations

import numpy as np

from solver_server.backend import get_backend
from solver_server.simulation import Simulation

from .scenes import cloth_object, grid, run, scene

UNPIN = 8


def _bake(unpin_frame: int):
    vertices, triangles, index = grid(8, 8, size=0.5, height=1.0)
    pins = [index[0, 0], index[-1, 0]]
    cloth = cloth_object(vertices, triangles, pins=pins, params={"unpin_frame": unpin_frame})
    frames = run(Simulation(scene([cloth], frame_end=16, substeps=4), get_backend("cpu")))
    return np.array([positions["Cloth"] for _, positions, _ in frames], np.float64), vertices[pins]


def test_the_pins_let_go_at_the_unpin_frame_and_the_cloth_falls():
    positions, pinned_rest = _bake(UNPIN)
    held, _ = _bake(0)
    pinned = positions[:, [0, 7 * 8]]
    assert np.all(np.isfinite(positions))
    # frames 1 .. UNPIN − 1: held exactly, the same bake as without the unpin
    np.testing.assert_array_equal(positions[:UNPIN - 1], held[:UNPIN - 1])
    assert np.abs(pinned[:UNPIN - 1] - pinned_rest).max() < 1e-6
    # from the unpin frame on the whole cloth falls freely: its pinned corners drop as fast as the rest of it
    drop = pinned_rest[:, 2] - pinned[-1, :, 2]
    assert drop.min() > 0.3, drop
    speed = np.abs(np.diff(positions, axis=0)).max() * 24.0
    assert speed < 10.0, f"a point moved at {speed:.1f} m/s"
    # without the unpin the corners never move
    assert np.abs(held[:, [0, 7 * 8]] - pinned_rest).max() < 1e-6


def _jumping_pin_bake(pull_speed: float):
    """A cloth pinned at one corner whose target (sent as drive vertices) jumps 0.5 m sideways at frame 5."""
    vertices, triangles, index = grid(6, 6, size=0.3, height=1.0)
    corner = int(index[0, 0])
    cloth = cloth_object(vertices, triangles, pins=[corner], params={"pin_pull_speed": pull_speed},
                         animated=True, matrix_world=np.eye(4))

    def drive(frame):
        moved = vertices.copy()
        if frame >= 5:
            moved[:, 0] += 0.5
        return {"Cloth": {"matrix_world": np.eye(4), "vertices": moved}}

    frames = run(Simulation(scene([cloth], frame_end=24, substeps=4), get_backend("cpu")), drive)
    positions = np.array([p["Cloth"] for _, p, _ in frames], np.float64)
    return positions[:, corner], vertices[corner]


def test_a_pin_whose_target_jumps_is_pulled_in_at_the_pull_speed():
    """With pin_pull_speed 1 m/s the pinned corner covers the 0.5 m jump at 1/24 m per frame and then holds its
    target; with 0 it follows at once (the substep interpolation spreads the jump over frame 5)."""
    pulled, rest = _jumping_pin_bake(1.0)
    target = rest + [0.5, 0.0, 0.0]
    gap = np.linalg.norm(pulled - target, axis=1)
    assert np.all(np.isfinite(pulled))
    np.testing.assert_allclose(pulled[:4], np.broadcast_to(rest, (4, 3)), atol=1e-6)     # frames 1-4: at rest
    steps = -np.diff(gap[3:16])                                 # frames 5..16: pulled in at 1/24 m a frame
    np.testing.assert_allclose(steps, 1.0 / 24.0, rtol=1e-6)
    assert gap[-1] < 1e-6                                       # arrived (12 frames) and held
    instant, _ = _jumping_pin_bake(0.0)
    assert np.linalg.norm(instant[4] - target) < 1e-6

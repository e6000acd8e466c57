"""Timed unpin: a cloth's pins let go at the frame the artist sets (``unpin_frame``), and from then on it falls;
before that frame the pinned vertices hold exactly. No runaway, every frame finite."""

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

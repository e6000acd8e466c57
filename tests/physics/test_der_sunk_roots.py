"""DER hair whose clamped roots start inside a collider: the free vertices that only the roots
could bring out (nearer to a sunk root than its depth, or in the run of vertices inside next to it) are left
out of contact and counted, so the solver does not fight an impossible contact for every iteration it has."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.simulation import Simulation

from .scenes import run, scene, uv_sphere

STRANDS, POINTS, LENGTH = 5, 8, 0.2
CENTER, RADIUS = np.array([0.04, 0.0, 0.0]), 0.1


def _hair():
    strands = [np.stack([np.full(POINTS, 0.02 * k), np.zeros(POINTS), np.linspace(0.0, -LENGTH, POINTS)], axis=1)
               for k in range(STRANDS)]
    roots = np.arange(0, STRANDS * POINTS, POINTS).astype(np.int32)
    return {"id": "Hair", "kind": "hair", "points": np.concatenate(strands).astype(np.float32),
            "strand_offsets": np.arange(0, STRANDS * POINTS + 1, POINTS).astype(np.int32),
            "pins": {"indices": roots, "weights": np.ones(STRANDS, np.float32)}, "params": {"model": "der"}}


def _ball(kind):
    if kind == "sphere":
        return {"id": "Ball", "kind": "collider", "shape": {"type": "sphere", "center": CENTER.tolist(),
                                                            "radius": RADIUS}}
    vertices, triangles = uv_sphere(rings=16, segments=32, radius=RADIUS, center=tuple(CENTER))
    return {"id": "Ball", "kind": "collider", "vertices": vertices, "triangles": triangles,
            "params": {"thickness": 0.0}}


def _inside_count():
    points = _hair()["points"].astype(float)
    free = np.ones(len(points), bool)
    free[::POINTS] = False
    return int(((np.linalg.norm(points - CENTER, axis=1) < RADIUS) & free).sum())


@pytest.mark.parametrize("kind", ["sphere", "mesh"])
def test_roots_sunk_in_a_collider_do_not_make_the_solver_fight_and_are_counted(kind):
    frames = run(Simulation(scene([_hair(), _ball(kind)], frame_end=12), get_backend("cpu")))
    positions = np.array([frame[1]["Hair"] for frame in frames])
    assert np.all(np.isfinite(positions))
    for _, _, stats in frames[1:]:
        # 4 substeps: a handful of Newton iterations each, not the iteration cap of a contact that cannot be met
        assert stats["iterations"] <= 16, stats
        assert stats["unreachable_contacts"] == _inside_count() == 15, stats
    # the strands hang where they were rooted: nothing was pushed sideways out of the ball
    np.testing.assert_allclose(positions[-1][:, :2], positions[0][:, :2], atol=2e-3)

"""DER grooms that start through a collider (strands cut by the ground, roots grown through a body): the job
finishes, every frame is finite, the first frame's stats count the free points that started inside
(``started_inside``), and strands free to move come out over a frame or two instead of being flung.

Every vertex inside the solid used to be asked back onto the surface within one step: a strand cut by a plane
collapsed its under-ground segments onto one surface point (zero length: a non-finite Newton direction that
failed the job at frame 2), and free strands were launched a metre into the air."""

from __future__ import annotations

import numpy as np

from solver_server.backend import get_backend
from solver_server.simulation import Simulation
from tests.physics.scenes import run, scene, uv_sphere

POINTS, STRANDS = 10, 5
FLOOR = {"id": "Floor", "kind": "collider", "shape": {"type": "plane", "normal": [0, 0, 1], "offset": 0.0},
         "params": {"friction": 0.5}}


def _hair(strands, pins=None):
    hair = {"id": "Hair", "kind": "hair", "points": np.concatenate(strands),
            "strand_offsets": np.arange(len(strands) + 1, dtype=np.int32) * POINTS, "params": {"model": "der"}}
    if pins is not None:
        hair["pins"] = pins
    return hair


def _bake(objects, frames=12):
    return run(Simulation(scene(objects, frame_end=frames, substeps=4), get_backend("cpu")))


def test_clamped_strands_cut_by_the_ground_finish_and_are_counted():
    """Five strands rooted 5 cm above a floor plane and reaching 30 cm below it (default DER parameters)."""
    strands = [np.stack([np.full(POINTS, 0.02 * k), np.zeros(POINTS), np.linspace(0.05, -0.3, POINTS)], axis=1)
               for k in range(STRANDS)]
    frames = _bake([_hair(strands), FLOOR])
    assert len(frames) == 12
    assert all(np.all(np.isfinite(positions["Hair"])) for _, positions, _ in frames)
    # the clamped roots are the first two points; the other eight of each strand start under the floor
    assert frames[1][2]["started_inside"] == 8 * STRANDS
    assert all("started_inside" not in stats for _, _, stats in frames[2:])


def test_free_strands_through_the_ground_come_out_without_being_flung():
    strands = [np.stack([np.linspace(0.0, 0.2, POINTS), np.full(POINTS, 0.02 * k), np.linspace(0.05, -0.1, POINTS)],
                        axis=1) for k in range(STRANDS)]
    free = {"indices": np.zeros(0, np.int32), "weights": np.zeros(0)}
    frames = _bake([_hair(strands, pins=free), FLOOR], frames=24)
    heights = np.array([positions["Hair"][:, 2] for _, positions, _ in frames])
    assert frames[1][2]["started_inside"] == int((np.concatenate(strands)[:, 2] < 0).sum())
    assert heights[2:].min() > -1e-3, "out of the floor from the second frame on"
    assert heights.max() < 0.3, f"flung {heights.max():.2f} m up (a 10 cm recovery must not launch the strands)"
    settling = np.abs(frames[-1][1]["Hair"] - frames[-2][1]["Hair"]).max()
    assert settling < 5e-3, f"the strands rest on the floor at the end (still moving {settling * 1e3:.1f} mm a frame)"


def test_strands_rooted_inside_a_closed_body_are_counted_and_stay_finite():
    vertices, triangles = uv_sphere(8, 16, radius=0.1)
    body = {"id": "Body", "kind": "collider", "vertices": vertices, "triangles": np.asarray(triangles, np.int32),
            "params": {"friction": 0.3}}
    strands = [np.stack([np.full(POINTS, 0.02 * (k - 2)), np.zeros(POINTS), np.linspace(0.0, 0.25, POINTS)], axis=1)
               for k in range(STRANDS)]
    frames = _bake([_hair(strands), body], frames=6)
    assert all(np.all(np.isfinite(positions["Hair"])) for _, positions, _ in frames)
    assert frames[1][2].get("started_inside", 0) > 0

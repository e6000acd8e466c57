"""The pre-roll (``time.preroll``): frames simulated before frame_start with every object held at its frame_start
pose, none of them output, so the shot starts with the cloth and hair at rest. It is the same simulation as
those frames run in the shot with the objects held still (bit for bit), a resumed bake does not run it again, and
a bad value is refused naming the field."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.sim.builder import MAX_PREROLL
from solver_server.sim.errors import SceneError
from solver_server.simulation import Simulation

from .scenes import cloth_object, grid, scene, uv_sphere

PREROLL = 6
SHOT_END = 8


def _sphere_matrix(frame: int) -> np.ndarray:
    """The ball's matrix_world: at rest until frame 2, then sliding 5 cm a frame along x."""
    matrix = np.eye(4)
    matrix[0, 3] = 0.05 * max(frame - 2, 0)
    return matrix


def _scene(frame_start: int, preroll: int) -> dict:
    """A cloth pinned at two corners draping over a ball that starts to slide at frame 2, and a few DER strands
    hanging from fixed roots."""
    vertices, triangles, index = grid(10, 10, size=0.6, height=0.32)
    vertices[:, :2] -= 0.3
    cloth = cloth_object(vertices, triangles, pins=[index[0, 0], index[-1, 0]])
    ball_vertices, ball_triangles = uv_sphere(8, 16, radius=0.25)
    ball = {"id": "Ball", "kind": "collider", "vertices": ball_vertices, "triangles": ball_triangles,
            "matrix_world": _sphere_matrix(1), "animated": True}
    strands, points = 4, 8
    roots = np.stack([np.full(strands, -0.1), np.linspace(0.5, 0.8, strands), np.full(strands, 0.5)], axis=1)
    along = np.linspace(0.0, 0.2, points)
    hair_points = (roots[:, None, :] + along[None, :, None] * np.array([1.0, 0.0, 0.0])).reshape(-1, 3)
    hair = {"id": "Hair", "kind": "hair", "points": hair_points,
            "strand_offsets": (np.arange(strands + 1) * points).astype(np.int32), "params": {"model": "der"}}
    built = scene([cloth, ball, hair], frame_end=SHOT_END, substeps=3)
    built["time"].update(frame_start=frame_start, preroll=preroll)
    return built


def _drive(frame: int) -> dict:
    return {"Ball": {"matrix_world": _sphere_matrix(frame)}}


def _frames(simulation: Simulation, first: int) -> dict[int, dict]:
    """{frame: positions} from ``first`` to frame_end (the output of frame_start included when it is ≥ first)."""
    out = {}
    frame, positions, _ = simulation.initial_frame()
    if frame >= first:
        out[frame] = positions
    for frame in range(simulation.frame_start + 1, simulation.frame_end + 1):
        _, positions, _ = simulation.advance(_drive(max(frame, 1)))
        if frame >= first:
            out[frame] = positions
    return out


def test_a_pre_roll_is_the_shot_started_earlier_with_everything_held_at_its_first_pose():
    backend = get_backend("cpu")
    prerolled = _frames(Simulation(_scene(1, PREROLL), backend), 1)
    # the same frames with the shot started PREROLL frames earlier and the ball held at its frame-1 pose until then
    earlier = _frames(Simulation(_scene(1 - PREROLL, 0), backend), 1)
    at_rest = _frames(Simulation(_scene(1, 0), backend), 1)
    assert sorted(prerolled) == list(range(1, SHOT_END + 1))
    for frame in prerolled:
        for object_id in ("Cloth", "Hair"):
            np.testing.assert_array_equal(prerolled[frame][object_id], earlier[frame][object_id])
    # the first frame is no longer the submitted state: the cloth has sagged onto the ball and the hair hangs
    cloth_drop = at_rest[1]["Cloth"][:, 2] - prerolled[1]["Cloth"][:, 2]
    assert cloth_drop.max() > 0.01
    hair = prerolled[1]["Hair"].reshape(4, 8, 3)
    assert np.all(hair[:, -1, 2] < hair[:, 0, 2] - 0.02)                    # every tip below its root
    np.testing.assert_allclose(hair[:, 0], at_rest[1]["Hair"].reshape(4, 8, 3)[:, 0], atol=1e-12)  # roots held


def test_a_resumed_pre_rolled_bake_continues_exactly_and_does_not_pre_roll_again():
    backend = get_backend("cpu")
    whole = Simulation(_scene(1, PREROLL), backend)
    whole.initial_frame()
    for frame in range(2, 5):
        whole.advance(_drive(frame))
    checkpoint = whole.checkpoint()
    expected = [whole.advance(_drive(frame))[1] for frame in range(5, SHOT_END + 1)]
    resumed = Simulation(_scene(1, PREROLL), backend)
    resumed.restore(checkpoint)
    assert resumed.preroll_left == 0
    for frame, positions in zip(range(5, SHOT_END + 1), expected):
        got = resumed.advance(_drive(frame))[1]
        for object_id in ("Cloth", "Hair"):
            np.testing.assert_array_equal(got[object_id], positions[object_id])


def test_the_first_frame_reports_the_pre_roll_and_advance_refuses_to_skip_it():
    backend = get_backend("cpu")
    simulation = Simulation(_scene(1, 2), backend)
    assert simulation.preroll_left == 2
    simulation.preroll_frame()
    assert simulation.preroll_left == 1
    with pytest.raises(Exception, match="pre-roll"):
        simulation.advance(_drive(2))
    _, _, stats = simulation.initial_frame()
    assert simulation.preroll_left == 0 and stats["preroll_frames"] == 2


@pytest.mark.parametrize("value", [-1, 2.5, True, "10", MAX_PREROLL + 1])
def test_a_bad_pre_roll_is_refused_naming_the_field(value):
    bad = _scene(1, 0)
    bad["time"]["preroll"] = value
    with pytest.raises(SceneError, match="time.preroll"):
        Simulation(bad, get_backend("cpu"))

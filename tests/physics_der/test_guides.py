"""DER hair on guide strands (der/guides.py): only the guides are simulated, every strand is drawn from them, the
guides as simulated; artist-chosen guides; guides with pins are refused by name."""

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.sim.errors import SceneError
from solver_server.simulation import Simulation


def _scene(strands=6, points=8, guides=None, guide_count=0, pins=None):
    """Strands in a row, straight out along +x at z = 1, falling under gravity from clamped roots; the hair object
    slides along +y (its roots with it)."""
    position = np.zeros((strands, points, 3))
    position[:, :, 0] = np.linspace(0.0, 0.14, points)
    position[:, :, 1] = np.arange(strands)[:, None] * 0.01
    position[:, :, 2] = 1.0
    hair = {"id": "Hair", "kind": "hair", "points": position.reshape(-1, 3), "animated": True,
            "strand_offsets": np.arange(strands + 1, dtype=np.int32) * points, "matrix_world": np.eye(4),
            "params": {"model": "der", "radius": 2e-4, "guide_count": guide_count}}
    if guides is not None:
        hair["guides"] = np.asarray(guides, np.int32)
    if pins is not None:
        hair["pins"] = pins
    return {"gravity": [0.0, 0.0, -9.81], "time": {"fps": 24, "frame_start": 1, "frame_end": 10, "substeps": 2},
            "objects": [hair]}


def _drive(frame):
    matrix = np.eye(4)
    matrix[1, 3] = 0.004 * (frame - 1)
    return {"Hair": {"matrix_world": matrix}}


def _frames(scene):
    simulation = Simulation(scene, get_backend("cpu"))
    frames = [simulation.initial_frame()]
    for frame in range(2, 11):
        frames.append(simulation.advance(_drive(frame)))
    return simulation, np.array([positions["Hair"] for _, positions, _ in frames], np.float64)


def test_guide_count_simulates_the_guides_and_draws_every_strand():
    simulation, frames = _frames(_scene(guide_count=2))
    group = simulation.groups[0]
    hair = group.solvers[0].objects[0]
    assert hair.guides is not None and hair.model.n_strands == 2
    assert frames.shape == (10, 48, 3) and np.all(np.isfinite(frames))
    strands = frames.reshape(10, 6, 8, 3)
    # roots carried with the object, the strands fall (children with their guides)
    np.testing.assert_allclose(strands[-1, :, 0, 1], np.arange(6) * 0.01 + 0.036, atol=1e-6)
    assert np.all(strands[-1, :, -1, 2] < 0.99)
    # the guides are drawn as simulated
    simulated = np.asarray(group.solvers[0].object_positions(0))
    guide_rows = hair.guides.rows
    np.testing.assert_allclose(strands[-1, guide_rows].reshape(-1, 3), simulated, atol=1e-6)
    # every strand keeps its length (the guides do, to the solver's tolerance)
    lengths = np.linalg.norm(np.diff(strands[-1], axis=1), axis=2)
    np.testing.assert_allclose(lengths, 0.02, rtol=1e-3)


def test_every_strand_simulated_gives_the_same_frames_as_no_guides():
    """guide_count at least the strand count simulates every strand: the frames of a scene without guides."""
    np.testing.assert_array_equal(_frames(_scene(guide_count=6))[1], _frames(_scene())[1])


def test_artist_guides_are_the_strands_simulated():
    simulation, frames = _frames(_scene(guides=[0, 5]))
    hair = simulation.groups[0].solvers[0].objects[0]
    np.testing.assert_array_equal(hair.guides.rows, [0, 5])
    assert hair.model.n_strands == 2 and frames.shape == (10, 48, 3)


def test_guides_with_pins_are_refused_by_name():
    pins = {"indices": np.array([0, 1], np.int32), "weights": np.ones(2)}
    with pytest.raises(SceneError, match="guide strands .* need clamped roots for der hair") as raised:
        Simulation(_scene(guide_count=2, pins=pins), get_backend("cpu"))
    assert "Hair" in str(raised.value) or getattr(raised.value, "object", None) == "Hair"


def test_a_guided_object_beside_a_fully_simulated_one_in_one_solver_resumes_exactly():
    """Two DER hair objects sharing one solver (they collide), the first on guides, the second simulated strand by
    strand: each gets its own points back, and a bake resumed from a checkpoint (the solver state and the first
    object's last drawing) gives the uninterrupted frames bit for bit."""
    first = _scene(guide_count=2)["objects"][0]
    second = _scene()["objects"][0]
    second["id"] = "Other"
    second["points"] = second["points"] + [0.0, 0.0, -0.02]
    scene = {"gravity": [0.0, 0.0, -9.81], "time": {"fps": 24, "frame_start": 1, "frame_end": 10, "substeps": 2},
             "objects": [first, second]}

    def drive(frame):
        return {**_drive(frame), "Other": _drive(frame)["Hair"]}

    whole = Simulation(scene, get_backend("cpu"))
    group = whole.groups[0]
    assert len(group.solvers) == 1 and group.solvers[0].objects[0].guides is not None
    assert group.solvers[0].objects[1].guides is None
    frames = [whole.initial_frame()]
    checkpoint = None
    for frame in range(2, 11):
        frames.append(whole.advance(drive(frame)))
        if frame == 5:
            checkpoint = whole.checkpoint()
    assert frames[-1][1]["Hair"].shape == (48, 3) and frames[-1][1]["Other"].shape == (48, 3)
    assert "object0_drawn" in checkpoint["groups"][next(iter(checkpoint["groups"]))]
    resumed = Simulation(scene, get_backend("cpu"))
    resumed.restore(checkpoint)
    for frame in range(6, 11):
        _, positions, _ = resumed.advance(drive(frame))
        for name in ("Hair", "Other"):
            np.testing.assert_array_equal(positions[name], frames[frame - 1][1][name])

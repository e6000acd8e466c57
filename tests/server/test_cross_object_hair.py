"""Two DER hair objects over the wire (real server loop, real Simulation): one shared solver, so the strands
of the two objects touch; frames carry each object under its own id with its own point count; a checkpoint
taken in contact resumes bit-identically; a bad ``collide_with_other_hair`` is a bad_scene naming the object."""

from __future__ import annotations

import numpy as np
import pytest

from protocol.client import SolverClient, SolverError
from solver_server.simulation import Simulation


def _strands(xs, tip_gap):
    """Vertical strands (8 points, 0.1 → 0.04 m) whose roots are at ``xs`` and whose tips are moved together so
    neighbouring tips are ``tip_gap`` [m] apart (the roots 3 mm apart)."""
    squeeze = np.linspace(1.0, tip_gap / 3e-3, 8)
    return [np.stack((x * squeeze, np.zeros(8), np.linspace(0.1, 0.04, 8)), axis=1) for x in xs]


def _scene(collide="default"):
    """"Hair" (2 clamped strands, carried along y by its animated matrix) and "Beard" (1 clamped strand whose tip
    hangs 0.2 mm from Hair's nearest tip: radii 0.5 mm, contact distance 1 mm)."""
    hair_points = np.concatenate(_strands([-3e-3, 0.0], 1.2e-3))
    beard_points = _strands([3e-3], 1.2e-3)[0]
    params = {"model": "der", "radius": 5e-4, "young_modulus": 1e8, "damping": 0.5}
    beard_params = dict(params) if collide == "default" else dict(params, collide_with_other_hair=collide)
    objects = [{"id": "Hair", "kind": "hair", "points": hair_points, "strand_offsets": np.array([0, 8, 16], np.int32),
                "animated": True, "matrix_world": np.eye(4), "params": params},
               {"id": "Beard", "kind": "hair", "points": beard_points, "strand_offsets": np.array([0, 8], np.int32),
                "params": beard_params}]
    return {"gravity": [0.0, 0.0, -9.81], "time": {"fps": 24, "frame_start": 1, "frame_end": 4, "substeps": 4},
            "objects": objects}


def _drive(frame):
    matrix = np.eye(4)
    matrix[1, 3] = 0.002 * (frame - 1)      # Hair moves sideways past Beard (the tips drag along each other)
    return {"Hair": {"matrix_world": matrix}}


def _bake(address, scene, **options):
    with SolverClient(address, timeout=30.0) as client:
        return {result.frame: result for result in client.submit(scene, drive=_drive, **options).frames()}


def test_two_hair_objects_stream_per_object_frames_and_resume_from_a_checkpoint(inprocess_server):
    server = inprocess_server(Simulation)
    frames = _bake(server.address, _scene(), checkpoint_every=1)
    assert sorted(frames) == [1, 2, 3, 4]
    for result in frames.values():
        assert list(result.positions) == ["Hair", "Beard"]
        assert result.positions["Hair"].shape == (16, 3) and result.positions["Beard"].shape == (8, 3)
        assert result.positions["Hair"].dtype == np.float32
    assert max(result.stats["contacts"] for result in frames.values()) > 0
    checkpoint = frames[2].checkpoint
    assert set(checkpoint["groups"]) == {"hair:der", "kinematic"}
    assert checkpoint["groups"]["hair:der"]["object1_positions"].shape == (8, 3)
    resumed = _bake(server.address, _scene(), resume=checkpoint)
    assert sorted(resumed) == [3, 4]
    for frame, result in resumed.items():
        for object_id, positions in result.positions.items():
            assert np.array_equal(positions, frames[frame].positions[object_id]), \
                f"frame {frame} {object_id}: solver state missing from the checkpoint? (der/group.py state_arrays)"


def test_collide_with_other_hair_must_be_a_bool(inprocess_server):
    server = inprocess_server(Simulation)
    with pytest.raises(SolverError) as error:
        _bake(server.address, _scene(collide="yes"))
    assert error.value.code == "bad_scene" and error.value.object == "Beard"
    assert "collide_with_other_hair" in str(error.value)

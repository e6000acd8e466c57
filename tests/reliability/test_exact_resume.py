"""Resume is exact: a simulation restored from a checkpoint (through its byte form, on a fresh Simulation)
yields every later frame bit-identical to the uninterrupted bake, on contact-heavy scenes of every solver
(self-collision, deforming and animated mesh colliders, soft bodies on cloth, each hair model, guide hair)."""

from __future__ import annotations

import numpy as np
import pytest

from protocol.checkpoint_files import decode_checkpoint, encode_checkpoint
from solver_server.backend import get_backend
from solver_server.simulation import Simulation

from .resume_scenes import RESUME_SCENES
from .scenes import bake_frames


@pytest.mark.parametrize("name", sorted(RESUME_SCENES))
def test_every_frame_after_a_resume_equals_the_uninterrupted_bake(name):
    scene, drive, checkpoint_frame = RESUME_SCENES[name]()
    backend = get_backend("cpu")
    reference_simulation = Simulation(scene, backend)
    last = reference_simulation.frame_end
    reference, checkpoint = bake_frames(reference_simulation, drive, last, checkpoint_at=checkpoint_frame)
    resumed = Simulation(scene, backend)
    resumed.restore(decode_checkpoint(encode_checkpoint(checkpoint)))
    frames, _ = bake_frames(resumed, drive, last)
    assert sorted(frames) == list(range(checkpoint_frame + 1, last + 1))
    moved = 0.0
    for frame in sorted(frames):
        for object_id, positions in frames[frame].items():
            np.testing.assert_array_equal(positions, reference[frame][object_id],
                                          err_msg=f"{name}: object {object_id} differs at frame {frame}")
            moved = max(moved, float(np.abs(positions - reference[checkpoint_frame][object_id]).max()))
    assert moved > 1e-2, f"{name}: the scene should move after the checkpoint"

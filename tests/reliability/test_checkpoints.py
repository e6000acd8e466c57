"""Simulation.checkpoint()/restore() (ARCHITECTURE §3): a restored simulation continues exactly like
the uninterrupted one, for every solver kind; a checkpoint that does not fit the scene is a SceneError."""

from __future__ import annotations

import numpy as np
import pytest

from protocol.checkpoint_files import decode_checkpoint, encode_checkpoint
from solver_server.backend import get_backend
from solver_server.sim.errors import SceneError
from solver_server.simulation import Simulation

from .scenes import SOLVER_SCENES, bake_frames, pd_scene

FRAMES = {"pd": 10, "der": 6, "particles": 10, "cosserat": 10}


@pytest.mark.parametrize("kind", sorted(SOLVER_SCENES))
def test_restored_simulation_continues_exactly(kind):
    last = FRAMES[kind]
    scene, drive = SOLVER_SCENES[kind](frame_end=last)
    backend = get_backend("cpu")
    reference, checkpoint = bake_frames(Simulation(scene, backend), drive, last, checkpoint_at=last // 2)
    assert checkpoint["frame"] == last // 2
    for group in checkpoint["groups"].values():
        for name, array in group.items():
            assert isinstance(array, np.ndarray) and array.dtype.kind in "fiub" and "/" not in name
    # through the on-disk / in-.blend byte format, as a resumed bake would get it back
    checkpoint = decode_checkpoint(encode_checkpoint(checkpoint))
    resumed = Simulation(scene, backend)
    resumed.restore(checkpoint)
    frames, _ = bake_frames(resumed, drive, last)
    assert sorted(frames) == list(range(last // 2 + 1, last + 1))
    moved = 0.0
    for frame, positions in frames.items():
        for object_id, points in positions.items():
            np.testing.assert_allclose(points, reference[frame][object_id], rtol=0, atol=1e-9,
                                       err_msg=f"{kind}: object {object_id} frame {frame}")
            moved = max(moved, float(np.abs(points - reference[1][object_id]).max()))
    assert moved > 1e-3, "the scene should actually move after the checkpoint"


def test_a_cosserat_checkpoint_on_a_device_continues_exactly():
    """On a device the strand interaction's candidate list lives in a buffer sized at the first step: a checkpoint
    carries the list in use (its filled rows) and the restored run builds its buffer from it at its first step,
    so it sums the same pairs in the same order as the uninterrupted run."""
    from solver_server.emulated_device import emulated_cuda_backend

    last = FRAMES["cosserat"]
    scene, drive = SOLVER_SCENES["cosserat"](frame_end=last)
    backend = emulated_cuda_backend()
    reference, checkpoint = bake_frames(Simulation(scene, backend), drive, last, checkpoint_at=last // 2)
    assert any(name.endswith("_pairs") and len(array) for group in checkpoint["groups"].values()
               for name, array in group.items())
    resumed = Simulation(scene, backend)
    resumed.restore(decode_checkpoint(encode_checkpoint(checkpoint)))
    frames, _ = bake_frames(resumed, drive, last)
    for frame, positions in frames.items():
        for object_id, points in positions.items():
            np.testing.assert_array_equal(points, reference[frame][object_id], err_msg=f"frame {frame}")


def test_checkpoint_at_frame_start_equals_a_fresh_start():
    scene, drive = pd_scene(frame_end=4)
    backend = get_backend("cpu")
    reference, checkpoint = bake_frames(Simulation(scene, backend), drive, 4, checkpoint_at=1)
    resumed = Simulation(scene, backend)
    resumed.restore(checkpoint)
    frames, _ = bake_frames(resumed, drive, 4)
    for frame in (2, 3, 4):
        np.testing.assert_array_equal(frames[frame]["Cloth"], reference[frame]["Cloth"])


@pytest.fixture(scope="module")
def pd_checkpoint():
    scene, drive = pd_scene(frame_end=4)
    simulation = Simulation(scene, get_backend("cpu"))
    bake_frames(simulation, drive, 2)
    return scene, simulation.checkpoint()


def _copy(checkpoint):
    return {"frame": checkpoint["frame"],
            "groups": {key: {name: np.array(a) for name, a in group.items()}
                       for key, group in checkpoint["groups"].items()}}


@pytest.mark.parametrize("mutate, fragment", [
    (lambda cp: cp.update(frame=99), "outside this scene's frames 1..4"),
    (lambda cp: cp.update(frame="2"), "must be a map"),
    (lambda cp: cp["groups"].pop("cloth+softbody"), "this scene has"),
    (lambda cp: cp["groups"].update({"hair:der": {}}), "different scene"),
    (lambda cp: cp["groups"]["cloth+softbody"].pop("velocities"), "no state array 'velocities'"),
    (lambda cp: cp["groups"]["cloth+softbody"].update(positions=np.zeros((3, 3))), "has shape (3, 3)"),
    (lambda cp: cp["groups"]["cloth+softbody"]["positions"].__setitem__((0, 0), np.nan), "NaN or Inf"),
    (lambda cp: cp["groups"]["kinematic"].update(pose0_matrix=np.eye(3)), "this scene needs (4, 4)"),
    (lambda cp: cp["groups"]["kinematic"].update(collider2_vertices=np.zeros((5, 3))), "has shape (5, 3)"),
    (lambda cp: cp["groups"]["cloth+softbody"].update(positions=np.zeros((82, 3), np.int32).astype("U1")), "dtype"),
])
def test_a_checkpoint_that_does_not_fit_is_a_scene_error(pd_checkpoint, mutate, fragment):
    scene, checkpoint = pd_checkpoint
    checkpoint = _copy(checkpoint)
    mutate(checkpoint)
    with pytest.raises(SceneError) as error:
        Simulation(scene, get_backend("cpu")).restore(checkpoint)
    assert fragment in str(error.value)


def test_a_checkpoint_of_another_scene_is_refused_naming_the_object(pd_checkpoint):
    _, checkpoint = pd_checkpoint
    other, _ = pd_scene(frame_end=4, cloth_n=5)
    with pytest.raises(SceneError) as error:
        Simulation(other, get_backend("cpu")).restore(_copy(checkpoint))
    assert "different scene" in str(error.value) and error.value.object == "Cloth"


def test_a_scene_without_kinematics_round_trips_through_bytes():
    """Nothing animated and no collider: the "kinematic" group is empty, in bytes or left out."""
    scene, _ = pd_scene(frame_end=5)
    scene["objects"] = [obj for obj in scene["objects"] if obj["kind"] == "cloth"]
    backend = get_backend("cpu")
    reference, checkpoint = bake_frames(Simulation(scene, backend), lambda frame: None, 5, checkpoint_at=3)
    assert checkpoint["groups"]["kinematic"] == {}
    for restored in (decode_checkpoint(encode_checkpoint(checkpoint)),
                     {"frame": 3, "groups": {"cloth": checkpoint["groups"]["cloth"]}}):
        resumed = Simulation(scene, backend)
        resumed.restore(restored)
        frames, _ = bake_frames(resumed, lambda frame: None, 5)
        np.testing.assert_array_equal(frames[5]["Cloth"], reference[5]["Cloth"])

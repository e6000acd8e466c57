"""Checkpoints over the wire (ARCHITECTURE §3): ``submit(checkpoint_every=N)`` attaches checkpoints
to every N-th frame and the last one; ``submit(resume=checkpoint)`` continues bit-exactly; a
checkpoint that does not fit is ``bad_scene``; ``--checkpoint-dir`` keeps the newest ones on disk."""

from __future__ import annotations

import numpy as np
import pytest

from protocol.checkpoint_files import CheckpointDirectory
from protocol.client import SolverClient, SolverError

from tests.server_process import ServerProcess

from .resume_scenes import RESUME_SCENES
from .scenes import light_cloth_scene


def _bake(address, scene, drive, **options):
    frames, drive_calls = {}, []

    def recording_drive(frame):
        drive_calls.append(frame)
        return drive(frame)

    with SolverClient(address, timeout=20.0) as client:
        job = client.submit(scene, drive=recording_drive, **options)
        for result in job.frames():
            assert result.frame not in frames, f"frame {result.frame} arrived twice"
            frames[result.frame] = result
        return job, frames, drive_calls


def test_checkpoints_ride_on_every_nth_and_the_last_frame_and_resume_exactly(real_server):
    server = real_server()
    scene, drive = light_cloth_scene(frame_end=12)
    job, frames, _ = _bake(server.address, scene, drive, checkpoint_every=3)
    assert sorted(frames) == list(range(1, 13))
    with_checkpoint = sorted(f for f, result in frames.items() if result.checkpoint is not None)
    assert with_checkpoint == [4, 7, 10, 12]
    assert all(frames[f].checkpoint["frame"] == f for f in with_checkpoint)

    resumed_job, resumed, drive_calls = _bake(server.address, scene, drive, resume=frames[7].checkpoint)
    assert resumed_job.frame_start == 1 and resumed_job.frame_end == 12
    assert sorted(resumed) == list(range(8, 13)), "a resumed job streams checkpoint.frame + 1 .. frame_end"
    assert min(drive_calls) == 8, "drive data is needed only after the checkpoint"
    for frame in range(8, 13):
        np.testing.assert_array_equal(resumed[frame].positions["Cloth"], frames[frame].positions["Cloth"])
        assert resumed[frame].checkpoint is None


def test_a_checkpoint_for_another_scene_is_bad_scene(real_server):
    server = real_server()
    scene, drive = light_cloth_scene(frame_end=4)
    _, frames, _ = _bake(server.address, scene, drive, checkpoint_every=2)
    other, _ = light_cloth_scene(frame_end=4, cloth_n=5)
    with pytest.raises(SolverError) as error:
        _bake(server.address, other, drive, resume=frames[3].checkpoint)
    assert error.value.code == "bad_scene" and error.value.object == "Cloth"
    assert "different scene" in error.value.message
    late = dict(frames[3].checkpoint, frame=9)
    with pytest.raises(SolverError) as error:
        _bake(server.address, scene, drive, resume=late)
    assert error.value.code == "bad_scene" and "outside this scene's frames 1..4" in error.value.message


def test_client_refuses_bad_checkpoint_options_before_sending(real_server):
    server = real_server()
    scene, drive = light_cloth_scene(frame_end=3)
    with SolverClient(server.address, timeout=10.0) as client:
        for bad in (0, -2, 1.5, True):
            with pytest.raises(ValueError, match="checkpoint_every"):
                client.submit(scene, drive=drive, checkpoint_every=bad)
        with pytest.raises(ValueError, match="resume"):
            client.submit(scene, drive=drive, resume={"groups": {}})


def test_server_checkpoint_directory_keeps_the_newest_checkpoints(real_server, tmp_path):
    server = real_server(checkpoint_dir=tmp_path, checkpoint_every=4)
    scene, drive = light_cloth_scene(frame_end=10)
    job, frames, _ = _bake(server.address, scene, drive, checkpoint_every=100)
    store = CheckpointDirectory(tmp_path)
    assert store.frames(job.id) == [9, 10], "frames 5 and 9, then the last frame 10; the newest 2 are kept"
    latest = store.latest(job.id)
    wire = frames[10].checkpoint
    assert latest["frame"] == wire["frame"] == 10
    for key, group in wire["groups"].items():
        for name, array in group.items():
            np.testing.assert_array_equal(latest["groups"][key][name], array)
    assert not list(tmp_path.glob("*/.*partial")), "no half-written files are left"


def test_cli_refuses_bad_checkpoint_options(tmp_path, capsys):
    from solver_server.__main__ import main

    assert main(["--checkpoint-every", "0", "--checkpoint-dir", str(tmp_path)]) == 2
    assert main(["--client-silence", "0"]) == 2
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    assert main(["--bind", "tcp://127.0.0.1:*", "--checkpoint-dir", str(blocker / "sub")]) == 1
    assert "tangle-solver:" in capsys.readouterr().err


def test_resuming_from_the_last_frame_streams_nothing_and_ends_cleanly(real_server):
    server = real_server()
    scene, drive = light_cloth_scene(frame_end=4)
    _, frames, _ = _bake(server.address, scene, drive, checkpoint_every=10)
    assert [f for f, r in frames.items() if r.checkpoint is not None] == [4], "the last frame always has one"
    job, resumed, drive_calls = _bake(server.address, scene, drive, resume=frames[4].checkpoint)
    assert resumed == {} and drive_calls == []
    assert job.done_info["cancelled"] is False and job.done_info["last_frame"] == 4


@pytest.mark.parametrize("body_extra, fragment", [
    ({"checkpoint_every": 0}, "checkpoint_every must be at least 1"),
    ({"resume": {"frame": 2}}, "resume must be {'checkpoint'"),
    ({"resume": {"checkpoint": [1, 2]}}, "resume must be {'checkpoint'"),
    ({"checkpoint_every": "3"}, "'checkpoint_every' must be int"),
])
def test_server_refuses_malformed_checkpoint_requests(real_server, body_extra, fragment):
    import zmq

    from protocol import messages
    from protocol.wire import decode, encode

    server = real_server()
    scene, _ = light_cloth_scene(frame_end=3)
    message = messages.submit(scene, job="raw")
    message.body.update(body_extra)
    context = zmq.Context()
    peer = context.socket(zmq.DEALER)
    peer.setsockopt(zmq.LINGER, 0)
    try:
        peer.connect(server.address)
        peer.send_multipart(encode(message))
        assert peer.poll(10_000), "no answer"
        reply = decode(peer.recv_multipart())
    finally:
        peer.close(linger=0)
        context.term()
    assert reply.type == "error" and reply.body["code"] == "bad_message" and fragment in reply.body["message"]
    assert not server.server._jobs


@pytest.mark.parametrize("name", ["cloth_self_collision_suzanne", "der_hair_on_suzanne"])
def test_a_fresh_server_process_resumes_a_contact_shot_bit_for_bit(name):
    """The bake runs on one server process, which is then killed; a new process resumes from the checkpoint
    the first one sent, and every frame after it equals the uninterrupted bake."""
    scene, drive, checkpoint_frame = RESUME_SCENES[name]()
    first = ServerProcess()
    try:
        _, frames, _ = _bake(first.address, scene, drive, checkpoint_every=checkpoint_frame - 1)
    finally:
        first.stop()
    checkpoint = frames[checkpoint_frame].checkpoint
    assert checkpoint is not None and checkpoint["frame"] == checkpoint_frame
    second = ServerProcess()
    try:
        _, resumed, _ = _bake(second.address, scene, drive, resume=checkpoint)
    finally:
        second.stop()
    last = max(frames)
    assert sorted(resumed) == list(range(checkpoint_frame + 1, last + 1))
    for frame in sorted(resumed):
        for object_id, positions in resumed[frame].positions.items():
            np.testing.assert_array_equal(positions, frames[frame].positions[object_id],
                                          err_msg=f"{name}: object {object_id} differs at frame {frame}")

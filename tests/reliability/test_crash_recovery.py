"""The server process dies (kill -9) mid-bake; a restarted server resumes the bake
from the last checkpoint the client received (the add-on's path) or from the checkpoint the server
wrote to ``--checkpoint-dir`` (plain-Python alternative): the merged bake equals an uninterrupted
one, with no missing and no duplicate frames."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from protocol.checkpoint_files import CheckpointDirectory
from protocol.client import SolverClient, SolverError
from solver_server.backend import get_backend
from solver_server.simulation import Simulation

from .scenes import light_cloth_scene

FRAME_END = 48
KILL_AT = 20


def _reference(scene, drive):
    simulation = Simulation(scene, get_backend("cpu"))
    frames = {simulation.frame_start: simulation.initial_frame()[1]["Cloth"]}
    for frame in range(simulation.frame_start + 1, simulation.frame_end + 1):
        frames[frame] = simulation.advance(drive(frame))[1]["Cloth"]
    return frames


def _collect(job, frames, on_frame=None):
    for result in job.frames():
        assert result.frame not in frames, f"duplicate frame {result.frame}"
        frames[result.frame] = result
        if on_frame is not None:
            on_frame(result)


def test_kill_9_mid_bake_then_resume_on_a_restarted_server(start_solver_server, tmp_path):
    scene, drive = light_cloth_scene(frame_end=FRAME_END)
    reference = _reference(scene, drive)
    store_dir = str(tmp_path / "checkpoints")
    first_server = start_solver_server("--checkpoint-dir", store_dir, "--checkpoint-every", "8")

    first_run: dict = {}

    def kill_at_frame(result):
        if result.frame == KILL_AT:
            os.kill(first_server.process.pid, signal.SIGKILL)
            first_server.process.wait(10)

    with SolverClient(first_server.address, timeout=3.0) as client:
        job = client.submit(scene, drive=drive, checkpoint_every=4)
        with pytest.raises(SolverError) as error:
            _collect(job, first_run, kill_at_frame)
        assert error.value.code == "timeout", "the client notices the dead server"
        job_id = job.id
    assert first_server.process.returncode == -signal.SIGKILL
    assert sorted(first_run) == list(range(1, KILL_AT + 1))
    received = [f for f, result in first_run.items() if result.checkpoint is not None]
    assert received == [5, 9, 13, 17]
    last_checkpoint = first_run[max(received)].checkpoint

    second_server = start_solver_server("--checkpoint-dir", store_dir)
    with SolverClient(second_server.address, timeout=20.0) as client:
        resumed: dict = {}
        _collect(client.submit(scene, drive=drive, resume=last_checkpoint), resumed)
        disk_checkpoint = CheckpointDirectory(store_dir).latest(job_id)
        assert disk_checkpoint is not None and disk_checkpoint["frame"] >= 17
        from_disk: dict = {}
        _collect(client.submit(scene, drive=drive, resume=disk_checkpoint), from_disk)

    # the add-on's merge: frames up to the checkpoint from the first run, the rest recomputed
    assert sorted(resumed) == list(range(18, FRAME_END + 1))
    merged = {f: r.positions["Cloth"] for f, r in first_run.items() if f <= 17}
    merged.update({f: r.positions["Cloth"] for f, r in resumed.items()})
    assert sorted(merged) == list(range(1, FRAME_END + 1)), "0 missing, 0 duplicate frames"
    worst = max(float(np.abs(merged[f] - reference[f]).max()) for f in merged)
    assert worst <= 1e-5, f"resumed bake differs from the uninterrupted one by {worst} m"
    for frame in range(18, KILL_AT + 1):  # recomputed frames equal what the dead server had sent
        np.testing.assert_array_equal(resumed[frame].positions["Cloth"], first_run[frame].positions["Cloth"])
    assert sorted(from_disk) == list(range(disk_checkpoint["frame"] + 1, FRAME_END + 1))
    for frame, result in from_disk.items():
        np.testing.assert_allclose(result.positions["Cloth"], reference[frame], rtol=0, atol=1e-5)

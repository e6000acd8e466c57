"""A client that is connected but silent for longer than the server's
``client_silence_s`` loses its running jobs; a live client (it pings while waiting, and whenever it
has sent nothing for a heartbeat interval, even while reading slowly) keeps them."""

from __future__ import annotations

import logging
import time

import pytest

from protocol.client import SolverClient, SolverError

from .scenes import light_cloth_scene


def _wait_until(condition, limit_s=10.0):
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_silent_client_loses_its_job(real_server, caplog):
    caplog.set_level(logging.INFO, logger="tangle.server")
    server = real_server(client_silence_s=1.0)
    scene, drive = light_cloth_scene(frame_end=400)
    with SolverClient(server.address, timeout=20.0) as client:
        job = client.submit(scene, drive=drive)   # accepted, then the caller goes quiet (a hung script)
        assert _wait_until(lambda: not server.server._jobs), "the silent client's job was not freed"
        assert any("has been silent" in record.message for record in caplog.records)
        with pytest.raises(SolverError) as error:
            for _ in job.frames():
                pass
    assert error.value.code == "unknown_job"


def test_a_slow_but_live_reader_keeps_its_job(real_server):
    server = real_server(client_silence_s=1.0)
    scene, _ = light_cloth_scene(frame_end=12)
    scene["objects"] = [obj for obj in scene["objects"] if obj["id"] == "Cloth"]  # nothing animated: no drives
    frames = []
    with SolverClient(server.address, timeout=0.9) as client:   # heartbeat every 0.3 s
        for result in client.submit(scene).frames():
            frames.append(result.frame)
            time.sleep(0.25)   # the caller's own work between frames, 3 s in all
    assert frames == list(range(1, 13))

"""The real ``python -m solver_server`` process with the real cloth solver (shared
``solver_server_address`` fixture): malformed traffic, a full bake, cancel, bad scenes, client
isolation, timeouts and signals."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest
import zmq

from protocol import messages
from protocol.client import SolverClient
from protocol.errors import SolverError
from protocol.wire import VERSION_FRAME, decode, encode

from scenes import grid_cloth

REPO_ROOT = Path(__file__).resolve().parents[2]


class RawPeer:
    """A bare DEALER for sending arbitrary multipart messages."""

    def __init__(self, address):
        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.connect(address)

    def send(self, frames):
        self.socket.send_multipart(frames)

    def send_message(self, message):
        self.socket.send_multipart(encode(message))

    def receive(self, timeout=10.0):
        assert self.socket.poll(int(timeout * 1000)), "server did not answer"
        return messages.validate(decode(self.socket.recv_multipart()), "s2c")

    def close(self):
        self.socket.close(linger=0)
        self.context.term()


@pytest.fixture
def raw_peer(solver_server_address):
    peer = RawPeer(solver_server_address)
    yield peer
    peer.close()


def header(type_="ping", body=None, job=None):
    return msgpack.packb({"type": type_, "seq": 1, "job": job, "body": body or {}})


MALFORMED = [
    ([b"garbage"], "malformed"),
    ([b"TANGLE/2", header()], "version_mismatch"),
    ([VERSION_FRAME, b"\xc1\xc1"], "malformed"),
    ([VERSION_FRAME, header(), b"extra frame"], "malformed"),
    ([VERSION_FRAME, header(body={"a": {"$nd": 0, "dtype": "|O", "shape": [1]}}), b"12345678"], "malformed"),
    ([VERSION_FRAME, header(body={"a": {"$nd": 0, "dtype": "<f4", "shape": [10**9, 10**9]}}), b"1234"], "malformed"),
    ([VERSION_FRAME, msgpack.packb({"type": "ping", "seq": 1, "job": None, "body": {"x": msgpack.ExtType(1, b"")}})],
     "malformed"),
    ([VERSION_FRAME, header("teleport")], "bad_message"),
    ([VERSION_FRAME, header("hello", {"client": "x", "protocol": 2})], "version_mismatch"),
    ([VERSION_FRAME, header("submit", {"scene": 5})], "bad_message"),
    ([VERSION_FRAME, header("cancel", job="nope")], "unknown_job"),
]


def test_malformed_messages_get_an_error_and_the_server_keeps_serving(raw_peer, solver_server_address):
    for frames, code in MALFORMED:
        raw_peer.send(frames)
        reply = raw_peer.receive()
        assert reply.type == "error", frames
        assert reply.body["code"] == code, (frames, reply.body)
        assert reply.body["message"]
    raw_peer.send_message(messages.ping())
    assert raw_peer.receive().type == "pong"
    with SolverClient(solver_server_address, timeout=10) as client:
        info = client.hello()
    assert info["backend"] == "cpu" and info["protocol"] == 1
    assert info["limits"]["max_message_bytes"] == 1 << 30


def test_cloth_bake_streams_every_frame_in_order(solver_server_address):
    scene = grid_cloth(n=5, frame_end=5)
    start = scene["objects"][0]["vertices"]
    with SolverClient(solver_server_address, timeout=30) as client:
        job = client.submit(scene)
        assert (job.frame_start, job.frame_end, job.animated) == (1, 5, [])
        results = list(job.frames())
    assert [r.frame for r in results] == [1, 2, 3, 4, 5]
    for result in results:
        positions = result.positions["Cloth"]
        assert positions.shape == (25, 3) and positions.dtype == np.float32
        assert np.all(np.isfinite(positions))
    np.testing.assert_allclose(results[0].positions["Cloth"], start, atol=1e-6)  # frame_start is the input
    last = results[-1].positions["Cloth"]
    np.testing.assert_allclose(last[[0, 4]], start[[0, 4]], atol=1e-6)  # pins hold
    assert np.all(last[5:, 2] < 1.0 - 1e-3)  # everything else fell under gravity
    assert job.done_info == {**job.done_info, "frames_done": 5, "last_frame": 5, "cancelled": False}


def test_a_server_on_the_emulated_cuda_device_bakes_the_cpu_frames(start_solver_server, solver_server_address):
    """``--device cuda-emulated``: the CUDA code paths (device arrays, launch layouts, no download inside a
    substep) behind the real protocol, on a machine without a GPU."""
    scene = grid_cloth(n=5, frame_end=4)
    emulated = start_solver_server("--device", "cuda-emulated")
    baked = {}
    for address in (solver_server_address, emulated.address):
        with SolverClient(address, timeout=60) as client:
            backend = client.hello()["backend"]
            baked[backend] = [result.positions["Cloth"] for result in client.submit(scene).frames()]
    assert set(baked) == {"cpu", "cuda-emulated"}
    assert len(baked["cuda-emulated"]) == 4
    for cpu, device in zip(baked["cpu"], baked["cuda-emulated"]):
        np.testing.assert_allclose(device, cpu, atol=1e-5)
    assert float(np.abs(baked["cpu"][-1] - baked["cpu"][0]).max()) > 1e-2


def test_cancel_mid_job(solver_server_address):
    received = []
    with SolverClient(solver_server_address, timeout=30) as client:
        job = client.submit(grid_cloth(n=5, frame_end=2000))
        for result in job.frames():
            received.append(result.frame)
            if len(received) == 2:
                job.cancel()
    assert job.done_info["cancelled"] is True
    assert received == list(range(1, len(received) + 1)) and len(received) < 2000


def test_bad_scene_raises_solver_error_naming_the_object(solver_server_address):
    scene = grid_cloth(object_id="Shirt")
    scene["objects"][0]["triangles"][0, 0] = 999
    with SolverClient(solver_server_address, timeout=30) as client:
        with pytest.raises(SolverError) as info:
            client.submit(scene)
    assert info.value.code == "bad_scene"
    assert info.value.object == "Shirt"
    assert "Shirt" in str(info.value)


def test_a_client_cannot_touch_another_clients_job(solver_server_address, raw_peer):
    with SolverClient(solver_server_address, timeout=30) as owner:
        job = owner.submit(grid_cloth(n=5, frame_end=150), job_id="shared-name")
        raw_peer.send_message(messages.cancel("shared-name"))
        reply = raw_peer.receive()
        assert (reply.type, reply.body["code"], reply.job) == ("error", "unknown_job", "shared-name")
        raw_peer.send_message(messages.drive("shared-name", 3, {"Cloth": {"matrix_world": np.eye(4)}}))
        assert raw_peer.receive().body["code"] == "unknown_job"
        raw_peer.send_message(messages.resume("shared-name", 1))  # cannot read its frames either
        assert raw_peer.receive().body["code"] == "unknown_job"
        raw_peer.send_message(messages.ping("shared-name"))
        assert raw_peer.receive().body["code"] == "unknown_job"
        frames = [r.frame for r in job.frames()]
    assert frames == list(range(1, 151))
    assert job.done_info["cancelled"] is False


def unused_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_dead_server_address_times_out_instead_of_hanging():
    timeout = 1.5
    started = time.monotonic()
    with SolverClient(f"tcp://127.0.0.1:{unused_port()}", timeout=timeout) as client:
        with pytest.raises(SolverError) as info:
            client.submit(grid_cloth())
    elapsed = time.monotonic() - started
    assert info.value.code == "timeout"
    assert "did not answer within 1.5 s" in str(info.value)
    assert elapsed < timeout + 5.0  # a generous bound: the point is that it returns at all


def test_sigterm_stops_a_busy_server_promptly_with_exit_code_0(start_solver_server):
    server = start_solver_server()
    with SolverClient(server.address, timeout=30) as client:
        job = client.submit(grid_cloth(n=5, frame_end=100000))
        next(iter(job.frames()))
        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=15) == 0
    assert any("SIGTERM" in line for line in server.stderr_lines)


def test_sigint_also_exits_cleanly(start_solver_server):
    server = start_solver_server()
    server.process.send_signal(signal.SIGINT)
    assert server.process.wait(timeout=15) == 0


def test_non_loopback_bind_is_refused_without_insecure():
    result = subprocess.run(
        [sys.executable, "-m", "solver_server", "--bind", "tcp://0.0.0.0:5599"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert "refusing to bind tcp://0.0.0.0:5599" in result.stderr


def test_a_frozen_server_is_detected_within_the_timeout(start_solver_server):
    server = start_solver_server()
    with SolverClient(server.address, timeout=1.5) as client:
        job = client.submit(grid_cloth(n=5, frame_end=100000))
        frames = job.frames()
        next(frames)
        server.process.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(SolverError) as info:
                for _ in frames:  # frames already buffered in the client are still delivered
                    pass
        finally:
            server.process.send_signal(signal.SIGCONT)
    assert info.value.code == "timeout"


def test_cli_refuses_an_unusable_device_and_bad_job_limit():
    try:
        import cupy  # noqa: F401

        has_cupy = True
    except ImportError:
        has_cupy = False
    if not has_cupy:
        cuda = subprocess.run([sys.executable, "-m", "solver_server", "--bind", "tcp://127.0.0.1:*", "--device", "cuda"],
                              cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
        assert cuda.returncode == 2 and "cuda" in cuda.stderr.lower()
    jobs = subprocess.run([sys.executable, "-m", "solver_server", "--max-jobs", "0"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert jobs.returncode == 2 and "--max-jobs" in jobs.stderr

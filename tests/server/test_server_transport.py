"""Job streaming, drive data, cancel, failures and flow control, against the real server loop
running in-process with FakeSimulation (tests/server/fake_simulation.py)."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from protocol.client import DRIVE_WINDOW, SolverClient
from protocol.errors import SolverError


def scene(frame_end=10, frame_start=1, objects=None, **timing):
    objects = objects or [{"id": "A", "vertices": np.zeros((4, 3))}]
    return {"time": {"frame_start": frame_start, "frame_end": frame_end, **timing}, "objects": objects}


def wait_until(predicate, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_frames_stream_in_order_with_progress_and_done(inprocess_server):
    server = inprocess_server()
    with SolverClient(server.address, timeout=10) as client:
        job = client.submit(scene(frame_start=3, frame_end=12))
        results = list(job.frames())
    assert [r.frame for r in results] == list(range(3, 13))
    for k, result in enumerate(results):  # FakeSimulation moves -0.01 m per frame
        np.testing.assert_allclose(result.positions["A"][:, 2], -0.01 * k, atol=1e-7)
        assert result.positions["A"].dtype == np.float32
    assert results[1].stats["iterations"] == 3 and "compute_s" in results[1].stats
    assert job.done_info["frames_done"] == 10 and job.done_info["last_frame"] == 12
    assert job.done_info["cancelled"] is False
    assert job.progress["frames_done"] == job.progress["frames_total"] == 10


def test_drive_data_reaches_the_frame_it_belongs_to(inprocess_server):
    server = inprocess_server()
    calls = []

    def drive(frame):
        calls.append(frame)
        matrix = np.eye(4)
        matrix[:3, 3] = [frame, 2 * frame, 0]
        return {"Mover": {"matrix_world": matrix}}

    objects = [{"id": "Mover", "vertices": np.ones((2, 3)), "animated": True}]
    with SolverClient(server.address, timeout=10) as client:
        job = client.submit(scene(frame_end=20, objects=objects), drive=drive)
        assert job.animated == ["Mover"]
        results = list(job.frames())
    assert calls == list(range(1, 21))  # frame_start .. frame_end, each exactly once, in order
    for result in results[1:]:
        np.testing.assert_allclose(result.positions["Mover"][0], [1 + result.frame, 1 + 2 * result.frame, 1])


def test_drive_is_sent_only_a_bounded_window_ahead(inprocess_server):
    server = inprocess_server()
    high_water = []
    received = []

    def drive(frame):
        high_water.append(frame - (received[-1] if received else 0))
        return {"Mover": {"matrix_world": np.eye(4)}}

    objects = [{"id": "Mover", "vertices": np.ones((2, 3)), "animated": True}]
    with SolverClient(server.address, timeout=10) as client:
        job = client.submit(scene(frame_end=30, objects=objects), drive=drive)
        for result in job.frames():
            received.append(result.frame)
    assert max(high_water) <= DRIVE_WINDOW + 1


def test_animated_scene_without_drive_callable_is_refused(inprocess_server):
    server = inprocess_server()
    objects = [{"id": "Mover", "vertices": np.ones((2, 3)), "animated": True}]
    with SolverClient(server.address, timeout=10) as client:
        with pytest.raises(SolverError) as info:
            client.submit(scene(objects=objects))
        assert info.value.code == "no_drive"
        assert wait_until(lambda: not server.server._jobs)  # the server-side job was cancelled


def test_bad_scene_names_the_object(inprocess_server):
    server = inprocess_server()
    objects = [{"id": "Good", "vertices": np.zeros((1, 3))}, {"id": "Broken", "vertices": np.zeros((1, 3)), "invalid": "no faces"}]
    with SolverClient(server.address, timeout=10) as client:
        with pytest.raises(SolverError) as info:
            client.submit(scene(objects=objects))
        assert (info.value.code, info.value.object, info.value.message) == ("bad_scene", "Broken", "no faces")
        job = client.submit(scene(frame_end=2))  # the connection still works
        assert [r.frame for r in job.frames()] == [1, 2]


def test_simulation_failure_keeps_earlier_frames_and_names_object_and_frame(inprocess_server):
    server = inprocess_server()
    objects = [{"id": "A", "vertices": np.zeros((1, 3))}, {"id": "B", "vertices": np.zeros((1, 3)), "fail_at_frame": 4}]
    frames = []
    with SolverClient(server.address, timeout=10) as client:
        job = client.submit(scene(frame_end=10, objects=objects))
        with pytest.raises(SolverError) as info:
            for result in job.frames():
                frames.append(result.frame)
    assert frames == [1, 2, 3]
    assert (info.value.code, info.value.object, info.value.frame) == ("simulation_failed", "B", 4)
    assert job.finished


def test_cancel_from_the_iterating_thread(inprocess_server):
    server = inprocess_server()
    frames = []
    with SolverClient(server.address, timeout=10) as client:
        job = client.submit(scene(frame_end=5000, sleep_s=0.002))
        for result in job.frames():
            frames.append(result.frame)
            if len(frames) == 3:
                done = job.cancel()
                assert done["cancelled"] is True
    assert frames == list(range(1, len(frames) + 1))  # in order, nothing lost, stops early
    assert len(frames) < 5000
    assert job.done_info["last_frame"] == frames[-1]
    assert wait_until(lambda: not server.server._jobs)


def test_cancel_from_another_thread(inprocess_server):
    server = inprocess_server()
    with SolverClient(server.address, timeout=10) as client:
        job = client.submit(scene(frame_end=100000, sleep_s=0.01))
        timer = threading.Timer(0.3, job.cancel)
        timer.start()
        frames = [r.frame for r in job.frames()]
        timer.join()
    assert job.done_info["cancelled"] is True
    assert 1 <= len(frames) < 100000


def test_a_pre_roll_runs_before_the_first_frame_and_outputs_none_of_its_frames(inprocess_server):
    server = inprocess_server()
    with SolverClient(server.address, timeout=10) as client:
        job = client.submit(scene(frame_end=4, preroll=5))
        results = list(job.frames())
    assert [result.frame for result in results] == [1, 2, 3, 4]
    assert results[0].stats["prerolled"] == 5
    assert job.done_info["frames_done"] == 4 and job.done_info["cancelled"] is False


def test_a_cancel_during_a_long_pre_roll_ends_the_job_without_frames(inprocess_server):
    server = inprocess_server()
    with SolverClient(server.address, timeout=10) as client:
        job = client.submit(scene(frame_end=10, preroll=100000, sleep_s=0.002))
        timer = threading.Timer(0.3, job.cancel)
        timer.start()
        frames = [result.frame for result in job.frames()]
        timer.join()
    assert frames == []
    assert job.done_info["cancelled"] is True and job.done_info["frames_done"] == 0
    assert job.done_info["last_frame"] == 0
    assert wait_until(lambda: not server.server._jobs)


def test_busy_server_refuses_extra_jobs(inprocess_server):
    server = inprocess_server(max_jobs=1)
    with SolverClient(server.address, timeout=10) as first, SolverClient(server.address, timeout=10) as second:
        job = first.submit(scene(frame_end=100000, sleep_s=0.01))
        with pytest.raises(SolverError) as info:
            second.submit(scene(frame_end=2))
        assert info.value.code == "server_busy"
        job.cancel()


def test_slow_reader_bounds_how_far_the_server_runs_ahead(inprocess_server):
    server = inprocess_server()
    big = [{"id": "A", "vertices": np.zeros((50_000, 3))}]  # 600 kB per frame message
    with SolverClient(server.address, timeout=10) as client:
        job = client.submit(scene(frame_end=400, objects=big))
        time.sleep(1.0)  # the client reads nothing meanwhile
        simulated = server.created[0].frame
        print("frames simulated while the client read nothing:", simulated)
        assert simulated < 200, f"server ran {simulated} frames ahead of a client that read none"
        assert [r.frame for r in job.frames()] == list(range(1, 401))


def test_vanished_client_frees_its_job_after_the_grace_period(inprocess_server):
    server = inprocess_server(peer_grace_s=0.3)
    client = SolverClient(server.address, timeout=10)
    job = client.submit(scene(frame_end=100000, sleep_s=0.002))
    frames = job.frames()
    next(frames)
    client.close()  # gone without a cancel
    assert wait_until(lambda: not server.server._jobs), "the job of a closed client kept running"
    frames.close()


def test_slow_frames_do_not_time_out_because_pings_are_answered(inprocess_server):
    server = inprocess_server()
    with SolverClient(server.address, timeout=1.0) as client:  # each frame takes 2.5x the timeout
        job = client.submit(scene(frame_end=2, sleep_s=2.5))
        assert [r.frame for r in job.frames()] == [1, 2]


def test_breaking_out_of_the_loop_cancels_the_job(inprocess_server):
    server = inprocess_server()
    with SolverClient(server.address, timeout=10) as client:
        job = client.submit(scene(frame_end=100000, sleep_s=0.002))
        for result in job.frames():
            if result.frame == 3:
                break
        assert wait_until(lambda: not server.server._jobs), "job kept running after the loop was left"
        assert [r.frame for r in client.submit(scene(frame_end=3)).frames()] == [1, 2, 3]


def test_cancel_from_a_thread_that_does_not_own_the_socket_only_flags(inprocess_server):
    server = inprocess_server()
    with SolverClient(server.address, timeout=10) as client:
        job = client.submit(scene(frame_end=100000, sleep_s=0.002))
        outcome = []
        worker = threading.Thread(target=lambda: outcome.append(job.cancel()))
        worker.start()
        worker.join(5)
        assert outcome == [None]  # flagged, socket untouched
        frames = [r.frame for r in job.frames()]  # the owner's loop sends the cancel
    assert job.done_info["cancelled"] is True and len(frames) < 100000


def test_unencodable_scene_raises_protocol_error_naming_the_value(inprocess_server):
    from protocol.errors import ProtocolError

    server = inprocess_server()
    bad = [{"id": "A", "vertices": np.zeros((4, 3), np.float16)}]
    with SolverClient(server.address, timeout=10) as client:
        with pytest.raises(ProtocolError, match=r"body.scene.objects\[0\].vertices: array dtype '<f2'"):
            client.submit(scene(objects=bad))
        assert [r.frame for r in client.submit(scene(frame_end=2)).frames()] == [1, 2]


def test_failing_drive_callable_cancels_the_job(inprocess_server):
    server = inprocess_server()

    def drive(frame):
        if frame == 5:
            raise KeyError("no data prepared for frame 5")
        return {"Mover": {"matrix_world": np.eye(4)}}

    objects = [{"id": "Mover", "vertices": np.ones((2, 3)), "animated": True}]
    with SolverClient(server.address, timeout=10) as client:
        job = client.submit(scene(frame_end=50, objects=objects), drive=drive)
        with pytest.raises(KeyError, match="frame 5"):
            list(job.frames())
        assert wait_until(lambda: not server.server._jobs)


def test_frames_lost_on_a_dropped_connection_are_sent_again(inprocess_server, caplog):
    from tcp_proxy import DroppingProxy

    caplog.set_level("INFO", logger="tangle.server")
    server = inprocess_server()
    proxy = DroppingProxy("127.0.0.1", int(server.address.rsplit(":", 1)[1]))
    objects = [{"id": "A", "vertices": np.zeros((20_000, 3))}]  # 240 kB frames: several in flight
    frame_bytes = 20_000 * 3 * 4
    received = []
    try:
        with SolverClient(f"tcp://127.0.0.1:{proxy.port}", timeout=10) as client:
            job = client.submit(scene(frame_end=150, objects=objects, sleep_s=0.002))
            for result in job.frames():
                received.append(result.frame)
                np.testing.assert_allclose(result.positions["A"][0, 2], -0.01 * (result.frame - 1), atol=1e-6)
                if result.frame in (10, 60):
                    # what the server sends from now on is lost in transit (a fixed pause before the
                    # drop lost nothing when a loaded machine slowed the server down) ...
                    proxy.blackhole()
                    assert wait_until(lambda: proxy.discarded_bytes >= 2 * frame_bytes)
                    proxy.drop_all()  # ... and the connection breaks
    finally:
        proxy.close()
    assert proxy.drops == 2
    assert received == list(range(1, 151))  # every frame exactly once, in order
    assert job.done_info["frames_done"] == 150 and not job.done_info["cancelled"]
    assert "resume from frame" in caplog.text  # frames really were lost and sent again


class RawClient:
    """A bare DEALER with a chosen routing id, speaking the protocol message by message."""

    def __init__(self, address, routing_id):
        import zmq

        self.context = zmq.Context()
        self.socket = self.context.socket(zmq.DEALER)
        self.socket.setsockopt(zmq.LINGER, 0)
        self.socket.setsockopt(zmq.ROUTING_ID, routing_id)
        self.socket.connect(address)

    def send(self, message):
        from protocol.wire import encode

        self.socket.send_multipart(encode(message))

    def receive(self, timeout=10.0):
        from protocol import messages
        from protocol.wire import decode

        assert self.socket.poll(int(timeout * 1000)), "server did not answer"
        return messages.validate(decode(self.socket.recv_multipart()), "s2c")

    def receive_until(self, kind):
        seen = []
        while not seen or seen[-1].type != kind:
            seen.append(self.receive())
        return seen

    def close(self):
        self.socket.close(linger=0)
        self.context.term()


def test_a_reconnecting_client_recovers_frames_and_done_it_never_read(inprocess_server):
    from protocol import messages

    server = inprocess_server()
    first = RawClient(server.address, b"Tsame-client-id")
    first.send(messages.submit(scene(frame_end=5), job="J"))
    assert wait_until(lambda: ("J" in [k[1] for k in server.server._ended]))  # finished, nothing read
    first.close()  # everything it was sent is lost with it
    second = RawClient(server.address, b"Tsame-client-id")
    try:
        second.send(messages.ping("J"))
        pong = second.receive()
        assert (pong.type, pong.job, pong.body) == ("pong", "J", {"frames_sent": 5, "ended": True})
        second.send(messages.resume("J", 2))
        replies = second.receive_until("done")
        assert [m.body["frame"] for m in replies if m.type == "frame"] == [2, 3, 4, 5]
        assert replies[-1].body["last_frame"] == 5
    finally:
        second.close()


def test_resume_beyond_the_kept_frames_is_refused(inprocess_server):
    from protocol import messages
    from solver_server.jobs import RETAIN_FRAMES

    server = inprocess_server()
    peer = RawClient(server.address, b"Tretention")
    try:
        peer.send(messages.submit(scene(frame_end=RETAIN_FRAMES + 20), job="long"))
        peer.receive_until("done")
        peer.send(messages.resume("long", 1))
        refused = peer.receive()
        assert (refused.type, refused.body["code"]) == ("error", "frames_unavailable")
        assert "resubmit" in refused.body["message"]
        peer.send(messages.resume("long", RETAIN_FRAMES + 20))
        assert [m.type for m in peer.receive_until("done")] == ["frame", "done"]
        peer.send(messages.resume("other", 1))
        assert peer.receive().body["code"] == "unknown_job"
    finally:
        peer.close()

"""blender_addon.core.worker: the bake thread around a SolverClient, with a scripted fake client."""

import threading

import numpy as np

from blender_addon._protocol import SolverError
from blender_addon.core.worker import BakeWorker

from worker_events import drain


class FakeJob:
    """Streams frames frame_start..frame_end; honours cancel like protocol.client.Job."""

    def __init__(self, scene, drive, fail_at=None, gate=None):
        self.scene, self.drive, self.fail_at, self.gate = scene, drive, fail_at, gate
        self.cancel_requested = threading.Event()
        self.done_info = None
        self.drives_seen = []

    @property
    def finished(self):
        return self.done_info is not None

    def frames(self):
        time = self.scene["time"]
        for frame in range(time["frame_start"], time["frame_end"] + 1):
            if self.cancel_requested.is_set():
                self.done_info = {"cancelled": True}
                return
            if self.gate is not None:
                assert self.gate.acquire(timeout=5.0)
            if frame == self.fail_at:
                raise SolverError("simulation_failed", "cloth exploded", object="Sheet", frame=frame)
            if self.drive is not None and frame > time["frame_start"]:
                self.drives_seen.append((frame, self.drive(frame)))
            yield type("FrameResult", (), {"frame": frame, "stats": {"iterations": frame},
                                           "positions": {"Sheet": np.full((2, 3), frame, np.float32)}})()
        self.done_info = {"cancelled": False}

    def cancel(self):
        self.cancel_requested.set()


class FakeClient:
    def __init__(self, **job_options):
        self.job_options = job_options
        self.job = None
        self.closed = False

    def __call__(self, address, timeout):
        self.address, self.timeout = address, timeout
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.closed = True

    def submit(self, scene, drive=None):
        self.job = FakeJob(scene, drive, **self.job_options)
        return self.job


SCENE = {"time": {"fps": 24.0, "frame_start": 1, "frame_end": 5, "substeps": 2}, "objects": []}


def test_streams_every_frame_in_order_then_done():
    fake = FakeClient()
    worker = BakeWorker("tcp://127.0.0.1:1", SCENE, timeout=7.0, client_factory=fake).start()
    events = drain(worker)
    assert [event.kind for event in events] == ["accepted"] + ["frame"] * 5 + ["done"]
    assert [event.frame for event in events if event.kind == "frame"] == [1, 2, 3, 4, 5]
    assert events[-1].cancelled is False
    np.testing.assert_array_equal(events[3].positions["Sheet"], np.full((2, 3), 3.0))
    assert fake.closed and fake.timeout == 7.0 and fake.job.drive is None


def test_drive_callable_serves_the_precomputed_frames():
    drive = {frame: {"Ball": {"matrix_world": np.eye(4) * frame}} for frame in range(1, 6)}
    fake = FakeClient()
    drain(BakeWorker("addr", SCENE, drive_frames=drive, client_factory=fake).start())
    assert [frame for frame, _ in fake.job.drives_seen] == [2, 3, 4, 5]
    assert all(data is drive[frame] for frame, data in fake.job.drives_seen)


def test_missing_drive_frame_becomes_an_error_event():
    drive = {1: {}, 2: {}}
    events = drain(BakeWorker("addr", SCENE, drive_frames=drive, client_factory=FakeClient()).start())
    assert events[-1].kind == "error" and events[-1].code == "internal"
    assert "frame 3" in events[-1].message
    assert [event.frame for event in events if event.kind == "frame"] == [1, 2]


def test_cancel_keeps_the_frames_so_far_and_reports_cancelled():
    gate = threading.Semaphore(1)  # lets frame 1 through; frame 2 waits until after the cancel
    fake = FakeClient(gate=gate)
    worker = BakeWorker("addr", SCENE, client_factory=fake).start()
    first = [worker.wait_event(5.0) for _ in range(2)]
    assert [event.kind for event in first] == ["accepted", "frame"]
    worker.cancel()
    for _ in range(5):
        gate.release()
    events = first + drain(worker)
    assert events[-1].kind == "done" and events[-1].cancelled is True
    frames = [event.frame for event in events if event.kind == "frame"]
    assert frames[0] == 1 and len(frames) < 5


def test_server_error_names_object_and_frame():
    events = drain(BakeWorker("addr", SCENE, client_factory=FakeClient(fail_at=3)).start())
    error = events[-1]
    assert (error.kind, error.code, error.object, error.frame) == ("error", "simulation_failed", "Sheet", 3)
    assert error.describe() == "simulation_failed: object 'Sheet' frame 3: cloth exploded"
    assert [event.frame for event in events if event.kind == "frame"] == [1, 2]


def test_connection_failure_is_reported_not_raised():
    def refuse(address, timeout):
        raise SolverError("timeout", f"the solver server at {address} did not answer within {timeout:g} s")

    events = drain(BakeWorker("tcp://127.0.0.1:9", SCENE, timeout=2.0, client_factory=refuse).start())
    assert [event.kind for event in events] == ["error"]
    assert events[0].code == "timeout" and "tcp://127.0.0.1:9" in events[0].message


def test_poll_is_non_blocking():
    worker = BakeWorker("addr", SCENE, client_factory=FakeClient())
    assert worker.poll() == []
    worker.start()
    worker.join(5.0)
    assert [event.kind for event in worker.poll()][-1] == "done"


def test_server_messages_name_the_panel_setting_not_the_scene_field():
    from blender_addon.core.worker import WorkerEvent, in_panel_terms

    message = "runaway: ... (raise time.substeps), or a collider or pin forcing the object through itself"
    assert in_panel_terms(message) == ("runaway: ... (raise Substeps (Tangle Bake panel)), or a collider or pin "
                                       "forcing the object through itself")
    event = WorkerEvent("error", code="simulation_failed", message=message, object="Cape", frame=31)
    assert "time.substeps" not in event.describe() and "Substeps (Tangle Bake panel)" in event.describe()

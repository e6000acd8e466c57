"""BakeWorker checkpoint options: passed to clients that know them, left out for older clients, and a
resume such a client cannot do is a clear error event; checkpoints ride on the frame events."""

import numpy as np

from blender_addon.core.connection import ServerConnection
from blender_addon.core.worker import BakeWorker

from worker_events import drain

SCENE = {"time": {"fps": 24.0, "frame_start": 1, "frame_end": 4, "substeps": 2}, "objects": []}


class Job:
    def __init__(self, first, checkpoint_every):
        self.first, self.checkpoint_every, self.done_info, self.finished = first, checkpoint_every, None, False

    def frames(self):
        for frame in range(self.first, 5):
            checkpoint = ({"frame": frame, "groups": {"pd": {"x": np.full(3, float(frame))}}}
                          if self.checkpoint_every and frame % self.checkpoint_every == 0 else None)
            yield type("FrameResult", (), {"frame": frame, "positions": {}, "stats": {}, "checkpoint": checkpoint})()
        self.done_info, self.finished = {"cancelled": False}, True

    def cancel(self):
        pass


class CheckpointClient:
    """A client whose submit() takes the checkpoint options (ARCHITECTURE §3)."""

    def __init__(self):
        self.calls = []

    def __call__(self, connection, timeout):
        self.connection = connection
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def submit(self, scene, drive=None, job_id=None, checkpoint_every=None, resume=None):
        self.calls.append({"checkpoint_every": checkpoint_every, "resume": resume})
        return Job(resume["frame"] + 1 if resume else 1, checkpoint_every)


class OldClient(CheckpointClient):
    def submit(self, scene, drive=None, job_id=None):
        self.calls.append({})
        return Job(1, None)


def test_checkpoint_options_reach_the_client_and_checkpoints_ride_on_frames():
    client = CheckpointClient()
    resume = {"frame": 2, "groups": {"pd": {"x": np.zeros(3)}}}
    connection = ServerConnection("tcp://127.0.0.1:1", profile="P")
    events = drain(BakeWorker(connection, SCENE, client_factory=client, checkpoint_every=2, resume=resume).start())
    assert client.connection is connection
    assert client.calls == [{"checkpoint_every": 2, "resume": resume}]
    frames = [event for event in events if event.kind == "frame"]
    assert [event.frame for event in frames] == [3, 4]
    assert frames[0].checkpoint is None and frames[1].checkpoint["frame"] == 4


def test_older_client_bakes_without_checkpoints_but_cannot_resume():
    client = OldClient()
    events = drain(BakeWorker("addr", SCENE, client_factory=client, checkpoint_every=2).start())
    assert client.calls == [{}] and events[-1].kind == "done"
    assert all(event.checkpoint is None for event in events)
    events = drain(BakeWorker("addr", SCENE, client_factory=OldClient(), resume={"frame": 2, "groups": {}}).start())
    assert [event.kind for event in events] == ["error"]
    assert events[0].code == "unsupported" and "resume" in events[0].message

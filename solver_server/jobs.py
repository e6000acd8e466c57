"""One Job per accepted ``submit``: runs a Simulation on a worker thread.

The worker never touches a ZeroMQ socket: it puts :class:`Outgoing` items on the server's
``queue.Queue`` and the server loop (main thread) sends them. Memory stays bounded: the worker
waits while more than ``window`` of its frames are queued but not yet sent, and a client may
keep at most ``max_pending_drives`` drive messages ahead of the frame being computed.

Message order for one job: ``accepted``, then ``frame`` + ``progress`` for every frame
frame_start .. frame_end (frame_start is the submitted state), then ``done``. Any failure ends
the job with one ``error`` instead (frames already sent stay valid); an ``error`` carrying a
job id always means that job has ended.

Checkpoints (ARCHITECTURE §3): a job resumed from a checkpoint of frame c streams c + 1 ..
frame_end; with ``checkpoint_every`` N the ``frame`` messages of frames frame_start + kN and of
frame_end carry the simulation's checkpoint; a server started with ``--checkpoint-dir`` also
writes one to disk every ``store_every`` frames (and at frame_end) for crash recovery.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from protocol import messages
from protocol.checkpoint_files import CheckpointDirectory
from protocol.errors import ProtocolError
from protocol.wire import Message

from .faults import MotionGuard
from .sim.errors import SceneError, SimulationError

log = logging.getLogger("tangle.jobs")

FRAME_WINDOW = 8  # frames a worker may run ahead of what the server loop has sent
MAX_PENDING_DRIVES = 64  # drive messages a client may send ahead of the frame being computed
RETAIN_FRAMES = 96  # sent frames kept per job for `resume` (covers what zmq can hold in flight)
RETAIN_BYTES = 256 * 1024 * 1024  # ... but never more than this many bytes of them
_WAIT_SLICE_S = 0.05  # how often blocked workers re-check for cancellation

SimulationFactory = Callable[[dict, Any], Any]
JobKey = tuple[bytes, str]  # (peer routing id, job id): a client can only reach its own jobs


def default_simulation_factory(scene: dict, backend: Any) -> Any:
    """Build the real :class:`solver_server.simulation.Simulation` (imported on first use)."""
    from .simulation import Simulation

    return Simulation(scene, backend)


@dataclass
class Outgoing:
    """A message from a job to its client. ``final`` marks the job's last message (done/error);
    ``frame`` is set for ``frame`` messages so the server can report them sent. ``job`` is
    attached by the server loop; ``resend`` marks a copy sent again for ``resume``."""

    key: JobKey
    message: Message
    frame: int | None = None
    final: bool = False
    job: "Job | None" = None
    resend: bool = False


class Outbox(queue.Queue):
    """The queue from job threads to the server loop. ``put`` also writes one byte to a pipe the
    loop polls (``wake_fd``), so a queued message is sent at once instead of at the next poll
    timeout. Only the loop reads; it calls :meth:`clear_wakeups` before draining."""

    def __init__(self) -> None:
        super().__init__()
        self.wake_fd, self._wake_write_fd = os.pipe()
        os.set_blocking(self.wake_fd, False)
        os.set_blocking(self._wake_write_fd, False)
        self._fd_lock = threading.Lock()
        self._closed = False

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        super().put(item, block, timeout)
        with self._fd_lock:  # never write to a closed (and possibly reused) descriptor
            if self._closed:
                return
            try:
                os.write(self._wake_write_fd, b"\0")
            except BlockingIOError:
                pass  # the pipe is full: the loop is awake anyway

    def clear_wakeups(self) -> None:
        try:
            while os.read(self.wake_fd, 4096):
                pass
        except (BlockingIOError, OSError):
            pass

    def close(self) -> None:
        with self._fd_lock:
            if not self._closed:
                self._closed = True
                os.close(self.wake_fd)
                os.close(self._wake_write_fd)


class SentFrames:
    """The newest frame messages already handed to zmq, kept so a client that lost some on a
    broken connection can ask for them again. At most ``max_frames`` and ``max_bytes`` (the
    newest frame is always kept). Used by the server loop only."""

    def __init__(self, max_frames: int = RETAIN_FRAMES, max_bytes: int = RETAIN_BYTES):
        self._frames: deque[tuple[int, Message, int]] = deque()
        self._bytes = 0
        self._max_frames = max_frames
        self._max_bytes = max_bytes
        self.last_frame: int | None = None

    def add(self, frame: int, message: Message, nbytes: int) -> None:
        self._frames.append((frame, message, nbytes))
        self._bytes += nbytes
        self.last_frame = frame
        while len(self._frames) > 1 and (len(self._frames) > self._max_frames or self._bytes > self._max_bytes):
            self._bytes -= self._frames.popleft()[2]

    def since(self, from_frame: int) -> list[tuple[int, Message]]:
        """Kept frames >= ``from_frame`` in order; ProtocolError("frames_unavailable") if some
        sent frame in that range is no longer kept."""
        if self.last_frame is None or from_frame > self.last_frame:
            return []
        oldest = self._frames[0][0]
        if from_frame < oldest:
            raise ProtocolError(
                "frames_unavailable",
                f"frames {from_frame}..{oldest - 1} were sent and are no longer kept (the server keeps "
                f"the last {self._max_frames} frames); resubmit the job",
            )
        return [(frame, message) for frame, message, _ in self._frames if frame >= from_frame]


class Job:
    """The server side of one submitted job (state shared between the loop and the worker)."""

    def __init__(
        self,
        key: JobKey,
        scene: dict,
        backend: Any,
        outbox: Outbox,
        simulation_factory: SimulationFactory = default_simulation_factory,
        window: int = FRAME_WINDOW,
        max_pending_drives: int = MAX_PENDING_DRIVES,
        checkpoint_every: int | None = None,
        resume: dict | None = None,
        store: CheckpointDirectory | None = None,
        store_every: int = 10,
    ):
        self.key = key
        self.id = key[1]
        self._scene = scene
        self._checkpoint_every = checkpoint_every
        self._resume = resume
        self._store = store
        self._store_every = store_every
        self._backend = backend
        self._outbox = outbox
        self._factory = simulation_factory
        self._window = window
        self._max_pending_drives = max_pending_drives
        self._lock = threading.Condition()
        self._cancelled = threading.Event()
        self._drives: dict[int, dict] = {}
        self._frames_queued = 0
        self._frames_sent = 0
        self._frame_range: tuple[int, int] | None = None
        self._computing_frame: int | None = None
        self._thread = threading.Thread(target=self._run, name=f"tangle-job-{self.id}", daemon=True)
        # server-loop bookkeeping (never touched by the worker thread)
        self.sent = SentFrames()
        self.final_message: Message | None = None
        self.final_sent = False

    # -- called by the server loop (main thread) --------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def cancel(self) -> None:
        """Stop between frames; the worker then queues ``done`` with cancelled=True."""
        self._cancelled.set()
        with self._lock:
            self._lock.notify_all()

    def note_frame_sent(self) -> None:
        with self._lock:
            self._frames_sent += 1
            self._lock.notify_all()

    def add_drive(self, frame: int, objects: dict) -> None:
        """Store the drive data of ``frame``; raises ProtocolError("bad_message") if it is out
        of the job's frame range, already computed, or too far ahead."""
        with self._lock:
            if self._frame_range is not None:
                first, last = self._frame_range
                if not first <= frame <= last:
                    raise ProtocolError(
                        "bad_message", f"drive for frame {frame} is outside the job's frames {first}..{last}"
                    )
            if self._computing_frame is not None and frame < self._computing_frame:
                return  # late data for a frame already simulated (e.g. frame_start): nothing to do
            if len(self._drives) >= self._max_pending_drives and frame not in self._drives:
                raise ProtocolError(
                    "bad_message",
                    f"drive for frame {frame}: more than {self._max_pending_drives} drive messages pending",
                )
            self._drives[frame] = objects
            self._lock.notify_all()

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    # -- worker thread --------------------------------------------------------------------------

    def _put(self, message: Message, frame: int | None = None, final: bool = False) -> None:
        self._outbox.put(Outgoing(self.key, message, frame=frame, final=final))

    def _wait_for_window(self) -> None:
        with self._lock:
            while self._frames_queued - self._frames_sent >= self._window and not self._cancelled.is_set():
                self._lock.wait(_WAIT_SLICE_S)

    def _wait_for_drive(self, frame: int) -> dict | None:
        """Block until the drive data of ``frame`` arrived; None if the job was cancelled."""
        with self._lock:
            self._computing_frame = frame
            for stale in [f for f in self._drives if f < frame]:
                del self._drives[stale]
            while frame not in self._drives:
                if self._cancelled.is_set():
                    return None
                self._lock.wait(_WAIT_SLICE_S)
            return self._drives.pop(frame)

    def _checkpoint_for(self, simulation: Any, frame: int, frame_start: int, frame_end: int) -> dict | None:
        """The checkpoint to attach to ``frame`` (None when not due); also writes the disk copy."""

        def due(every: int | None) -> bool:
            return bool(every) and frame > frame_start and ((frame - frame_start) % every == 0 or frame == frame_end)

        on_wire, on_disk = due(self._checkpoint_every), self._store is not None and due(self._store_every)
        if not (on_wire or on_disk):
            return None
        checkpoint = simulation.checkpoint()
        if on_disk:
            try:
                self._store.write(self.id, checkpoint)
            except OSError as exc:  # a full disk must not kill the bake; the client still gets its frames
                log.error("job %s: cannot write the checkpoint of frame %d to %s: %s", self.id, frame,
                          self._store.root, exc)
        return checkpoint if on_wire else None

    def _emit_frame(self, output: tuple, started: float, frame_start: int, frames_total: int, compute_s: float,
                    checkpoint: dict | None = None):
        frame_number, positions, stats = output
        frame_number = int(frame_number)
        arrays = {}
        for object_id, points in positions.items():
            array = np.array(points, dtype=np.float32, order="C")  # a copy: the solver reuses its buffers
            if array.ndim != 2 or array.shape[1] != 3:
                raise SimulationError(
                    f"solver returned positions of shape {array.shape}, expected (N, 3)",
                    object=object_id,
                    frame=frame_number,
                )
            arrays[object_id] = array
        stats = dict(stats or {})
        stats.setdefault("compute_s", compute_s)
        self._put(messages.frame(self.id, frame_number, arrays, stats, checkpoint), frame=frame_number)
        with self._lock:
            self._frames_queued += 1
            frames_done = self._frames_queued
        elapsed = time.monotonic() - started
        eta = elapsed / frames_done * (frames_total - frames_done)
        self._put(messages.progress(self.id, frame_number, frames_done, frames_total, elapsed, eta))

    def _run(self) -> None:
        started = time.monotonic()
        frame = None
        last_frame = None
        try:
            try:
                simulation = self._factory(self._scene, self._backend)
                if self._resume is not None:
                    simulation.restore(self._resume)
            except SceneError as exc:
                self._put(messages.error("bad_scene", exc.message, job=self.id, object=exc.object), final=True)
                return
            resumed = self._resume is not None
            frame_start, frame_end = int(simulation.frame_start), int(simulation.frame_end)
            guard = MotionGuard.from_scene(self._scene, frame_start, frame_end)
            self._scene = self._resume = None  # the simulation holds what it needs
            animated = [str(object_id) for object_id in simulation.animated_ids]
            with self._lock:
                self._frame_range = (frame_start, frame_end)
            self._put(messages.accepted(self.id, frame_start, frame_end, animated))
            frame = last_frame = int(simulation.frame) if resumed else frame_start  # resumed: the checkpoint's frame
            frames_total = frame_end - frame + (0 if resumed else 1)
            if not resumed:
                tick = time.monotonic()
                while simulation.preroll_left > 0 and not self._cancelled.is_set():
                    simulation.preroll_frame()   # one frame at a time: a cancel ends a long pre-roll
                if self._cancelled.is_set():
                    last_frame = frame_start - 1     # cancelled in the pre-roll: no frame was made
                else:
                    output = simulation.initial_frame()
                    guard.check(frame_start, output[1])
                    self._emit_frame(output, started, frame_start, frames_total, time.monotonic() - tick)
            for frame in range(last_frame + 1, frame_end + 1):
                self._wait_for_window()
                if self._cancelled.is_set():
                    break
                drive = None
                if animated:
                    drive = self._wait_for_drive(frame)
                    if drive is None:
                        break  # cancelled while waiting; the simulation validates the drive data
                tick = time.monotonic()
                output = simulation.advance(drive)
                guard.check(frame, output[1])  # before a checkpoint of an exploded state can be made
                checkpoint = self._checkpoint_for(simulation, frame, frame_start, frame_end)
                self._emit_frame(output, started, frame_start, frames_total, time.monotonic() - tick, checkpoint)
                last_frame = frame
            with self._lock:
                frames_done = self._frames_queued
            cancelled = self._cancelled.is_set() and last_frame != frame_end
            self._put(
                messages.done(
                    self.id,
                    frames_done,
                    last_frame if last_frame is not None else frame_start - 1,
                    cancelled,
                    time.monotonic() - started,
                ),
                final=True,
            )
        except SimulationError as exc:
            failed_frame = exc.frame if exc.frame is not None else frame
            log.warning("job %s failed at frame %s: %s", self.id, failed_frame, exc)
            self._put(
                messages.error("simulation_failed", exc.message, job=self.id, object=exc.object, frame=failed_frame),
                final=True,
            )
        except Exception as exc:  # a bug or a device failure: report it and keep the server alive
            log.exception("job %s crashed at frame %s", self.id, frame)
            self._put(
                messages.error("internal", f"{type(exc).__name__}: {exc}", job=self.id, frame=frame),
                final=True,
            )

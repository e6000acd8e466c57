"""A worker thread that owns the SolverClient and does all socket I/O of one bake. Blender-free.

The main thread (a Blender timer, a modal operator or the blocking headless loop) reads
:class:`WorkerEvent` objects from the worker's queue and applies them; it never touches the socket.
Cancelling sets a flag the worker checks after every frame, then it sends ``cancel`` to the server.
"""

from __future__ import annotations

import inspect
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from .connection import ServerConnection, open_client


@dataclass(frozen=True)
class WorkerEvent:
    """One thing that happened in the worker.

    kind: "accepted" | "frame" | "done" | "error".
    frame events carry ``frame``, ``positions`` ({object id: float32 (N, 3) world-space metres}),
    ``stats`` and, when the server attached one, ``checkpoint`` (ARCHITECTURE §3: {"frame": int,
    "groups": {key: {name: ndarray}}}); done events carry ``cancelled``; error events carry ``code``,
    ``message`` and, where the server knows them, ``object`` and ``frame``.
    """

    kind: str
    frame: int | None = None
    positions: Mapping[str, np.ndarray] = field(default_factory=dict)
    stats: Mapping[str, object] = field(default_factory=dict)
    cancelled: bool = False
    code: str | None = None
    message: str | None = None
    object: str | None = None
    checkpoint: Mapping[str, object] | None = None

    def describe(self) -> str:
        """A one-line human message for error events, naming the object and frame where known, in the
        panel's words (``in_panel_terms``)."""
        where = " ".join(part for part in (
            f"object '{self.object}'" if self.object else "",
            f"frame {self.frame}" if self.frame is not None else "") if part)
        return f"{self.code}: {where + ': ' if where else ''}{in_panel_terms(self.message)}"


# Scene fields the server's messages name, and what the Tangle panels call them
PANEL_TERMS = (("time.substeps", "Substeps (Tangle Bake panel)"), ("time.preroll", "Pre-roll (Tangle Bake panel)"))


def in_panel_terms(message: str) -> str:
    """A server message with the scene's field names replaced by the panel settings an artist changes."""
    for field, label in PANEL_TERMS:
        message = message.replace(field, label)
    return message


DriveFrames = Mapping[int, Mapping[str, Mapping[str, np.ndarray]]]


def _default_client_factory(connection: ServerConnection, timeout: float):
    return open_client(connection, timeout)


def _solver_error_type():
    from .._protocol import SolverError

    return SolverError


class BakeWorker:
    """Runs one bake job on a background thread.

    connection: a :class:`ServerConnection` (address + CURVE key files) or a bare address string,
    e.g. "tcp://127.0.0.1:5555". scene: the submit scene dict.
    drive_frames: {frame: {object id: {"matrix_world": f8(4, 4), ...}}} precomputed on the main
    thread for every animated object, or None when nothing is animated.
    client_factory(connection, timeout) -> a context manager with ``submit(scene, drive=...)``
    (``protocol.client.SolverClient`` by default; tests pass a fake).
    checkpoint_every: ask the server for a checkpoint every N frames (and with the last frame).
    resume: a checkpoint dict to continue from (the server streams ``checkpoint["frame"] + 1 ..``).
    """

    def __init__(
        self,
        connection: ServerConnection | str,
        scene: dict,
        drive_frames: DriveFrames | None = None,
        timeout: float = 30.0,
        client_factory: Callable[[ServerConnection, float], object] | None = None,
        checkpoint_every: int | None = None,
        resume: Mapping[str, object] | None = None,
    ):
        self.connection = connection if isinstance(connection, ServerConnection) else ServerConnection(connection)
        self.address = self.connection.address
        self.checkpoint_every = checkpoint_every
        self.resume = resume
        self.scene = scene
        self.drive_frames = drive_frames
        self.timeout = timeout
        self._client_factory = client_factory or _default_client_factory
        self._events: queue.Queue[WorkerEvent] = queue.Queue()
        self._cancel_requested = threading.Event()
        self._lock = threading.Lock()
        self._streaming_job = None  # set while job.frames() is suspended in this worker's thread
        self._thread = threading.Thread(target=self._run, name="tangle-bake-worker", daemon=True)

    # ---- main-thread API -------------------------------------------------------------------
    def start(self) -> "BakeWorker":
        self._thread.start()
        return self

    def cancel(self) -> None:
        """Ask the server to stop the job; a final "done" event (cancelled) follows.

        Once frames are streaming this uses the client's cross-thread ``Job.cancel`` (it only sets a
        flag that the worker's receive loop acts on within ~0.1 s); before that, the worker checks
        the request itself as soon as the first frame arrives.
        """
        self._cancel_requested.set()
        with self._lock:
            if self._streaming_job is not None:
                self._streaming_job.cancel()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def poll(self) -> list[WorkerEvent]:
        """All events queued so far, without blocking."""
        events = []
        while True:
            try:
                events.append(self._events.get_nowait())
            except queue.Empty:
                return events

    def wait_event(self, timeout: float) -> WorkerEvent | None:
        """The next event, blocking up to ``timeout`` seconds (None when nothing came)."""
        try:
            return self._events.get(timeout=timeout)
        except queue.Empty:
            return None

    def join(self, timeout: float | None = None) -> None:
        self._thread.join(timeout)

    # ---- worker thread ---------------------------------------------------------------------
    def _drive(self, frame: int) -> Mapping[str, Mapping[str, np.ndarray]]:
        if self.drive_frames is None:
            return {}
        try:
            return self.drive_frames[frame]
        except KeyError:
            raise KeyError(f"no drive data was prepared for frame {frame}") from None

    def _submit_options(self, client) -> dict:
        """Checkpoint options for ``client.submit``: left out when unused or when the client predates
        checkpoints (then the bake works without them); a resume such a client cannot do is an error."""
        accepted = inspect.signature(client.submit).parameters
        options = {}
        if self.checkpoint_every and "checkpoint_every" in accepted:
            options["checkpoint_every"] = int(self.checkpoint_every)
        if self.resume is not None:
            if "resume" not in accepted:
                raise _solver_error_type()("unsupported", "this version of the protocol client cannot resume "
                                                          "from a checkpoint; bake from the start")
            options["resume"] = self.resume
        return options

    def _run(self) -> None:
        solver_error = _solver_error_type()
        put = self._events.put
        try:
            with self._client_factory(self.connection, self.timeout) as client:
                job = client.submit(self.scene, drive=self._drive if self.drive_frames is not None else None,
                                    **self._submit_options(client))
                put(WorkerEvent("accepted"))
                try:
                    for result in job.frames():
                        put(WorkerEvent("frame", frame=result.frame, positions=result.positions,
                                        stats=result.stats, checkpoint=getattr(result, "checkpoint", None)))
                        with self._lock:
                            self._streaming_job = job
                        if self._cancel_requested.is_set() and not job.finished:
                            job.cancel()
                finally:
                    with self._lock:
                        self._streaming_job = None
                done = job.done_info or {}
            put(WorkerEvent("done", cancelled=bool(done.get("cancelled", self._cancel_requested.is_set()))))
        except solver_error as error:
            put(WorkerEvent("error", code=error.code, message=error.message,
                            object=getattr(error, "object", None), frame=getattr(error, "frame", None)))
        except Exception as error:  # the main thread must always learn why the bake stopped
            put(WorkerEvent("error", code="internal", message=f"{type(error).__name__}: {error}"))

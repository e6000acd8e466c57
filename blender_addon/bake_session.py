"""One bake from start to finish on the main thread, shared by the modal operators and the headless path.

``BakeSession.start`` exports the scene (and precomputes drive data for animated colliders), checks the
output route and, for a continuation, the stored bake, then starts a :class:`core.worker.BakeWorker`.
``handle`` applies worker events: once the server accepted the job the previous frames are removed
(all of them for a full bake, only frames >= the continuation frame otherwise), then frames go to the
output route as they arrive (so frames baked so far are kept on cancel or failure) and the server's
checkpoints are stored with the bake. Status and progress are mirrored into ``Scene.tangle`` for the panel.

A continuation (``from_frame``: *Resume* = the frame after the last baked one, *Re-bake from current
frame* = the current frame) keeps every frame before ``from_frame`` untouched and asks the server to
restore the latest stored checkpoint before it (ARCHITECTURE §3); frames the server recomputes between
that checkpoint and ``from_frame`` are discarded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import bpy

from . import bake_output, export
from .core.bake_state import (BakeProgress, BakeRecord, BakeRefused, bake_route, outcome_status, plan_continuation,
                              stats_line)
from .core.checkpoints import CheckpointError, decode_checkpoint, encode_checkpoint
from .core.connection import ConnectionSettingsError, ServerConnection
from .core.pc2 import Pc2Error
from .core.scene_export import ExportError
from .core.worker import BakeWorker, WorkerEvent

# Longest the modal timer spends applying frames per tick [s]; the rest waits for the next tick (0.1 s).
TICK_BUDGET_S = 0.05

# After this long without a new frame the status line says the add-on is waiting for the server [s].
WAITING_NOTICE_S = 2.0

# Everything BakeSession.start raises before anything is sent, each with a message naming the problem.
START_ERRORS = (ExportError, BakeRefused, ConnectionSettingsError, CheckpointError, Pc2Error)


def _topologies(targets: dict) -> dict[str, str]:
    """{object name: topology hash} of the bake targets (hair targets without one count as "")."""
    return {name: str(getattr(target, "topology", "")) for name, target in targets.items()}


@dataclass
class BakeOutcome:
    """How a bake ended: ``state`` is "finished", "cancelled" or "failed"."""

    state: str
    frames_baked: int
    frames_total: int
    message: str
    elapsed_s: float


class BakeSession:
    """scene: the scene to bake. address: overrides the scene's server (no keys); connection: a full
    :class:`ServerConnection` (default: the scene's profile or address). from_frame: None for a full
    bake, else continue the stored bake from this frame (frames before it are kept)."""

    def __init__(self, scene: bpy.types.Scene, address: str | None = None, timeout: float | None = None,
                 client_factory=None, from_frame: int | None = None, connection: ServerConnection | None = None):
        self.scene_name = scene.name
        settings = scene.tangle
        self.connection = connection or (ServerConnection(address) if address else None)
        self.timeout = timeout if timeout is not None else settings.timeout
        self.client_factory = client_factory
        self.from_frame = from_frame
        self.worker: BakeWorker | None = None
        self.progress: BakeProgress | None = None
        self.targets: dict[str, object] = {}  # bake_io targets by object name
        self.outputs: dict[str, object] = {}
        self.keep_before: int | None = None  # frames before it are kept (continuations)
        self.outcome: BakeOutcome | None = None
        self.last_event_at = time.monotonic()
        self.written: tuple[int, int] | None = None   # (first, last) frame written by this run
        self.previous_last: int | None = None          # last frame of the stored bake before this run

    @property
    def scene(self) -> bpy.types.Scene:
        return bpy.data.scenes[self.scene_name]

    @property
    def address(self) -> str:
        return self.connection.address if self.connection else self.scene.tangle.server_address

    def start(self) -> "BakeSession":
        """Check and export, then connect (a ``local`` server starts only now) and submit. Raises one of
        ``START_ERRORS`` (naming the object / setting) before anything is sent."""
        from .scene_connection import scene_connection

        scene = self.scene
        settings = scene.tangle
        if self.connection is not None:
            self.connection.validate()      # a given connection's settings (key files) cost nothing to check
        scene_dict, drive, self.targets = export.export_scene(scene)   # before the scene's connection: a
        connection = self.connection or scene_connection(scene)         # blocked bake starts no local solver
        connection.validate()
        first, last = scene_dict["time"]["frame_start"], scene_dict["time"]["frame_end"]
        route = bake_route(settings.output_route, settings.hair_cache)
        resume = None
        first_streamed = first
        if self.from_frame is not None:
            record = bake_output.load_record(scene)
            topologies = _topologies(self.targets)
            plan = plan_continuation(record, self.from_frame, first, last, route, topologies)
            self.keep_before = plan.first_new_frame
            if plan.resume_frame is not None:
                resume = decode_checkpoint(record.checkpoints[plan.resume_frame])
                first_streamed = plan.resume_frame + 1
        self.outputs = {name: bake_output.output_for(route, scene, target, first)
                        for name, target in self.targets.items()}
        for output in self.outputs.values():
            output.check(self.keep_before)
        self.route, self.first, self.last = route, first, last
        self.progress = BakeProgress(first_streamed, last)
        settings.is_baking, settings.progress, settings.last_error, settings.live_stats = True, 0.0, "", ""
        what = "Connecting" if self.keep_before is None else f"Continuing from frame {self.keep_before}: connecting"
        settings.status = f"{what} to {connection.describe()}"
        self.connection = connection
        self.last_event_at = time.monotonic()
        self.worker = BakeWorker(connection, scene_dict, drive, self.timeout, self.client_factory,
                                 checkpoint_every=settings.checkpoint_every, resume=resume).start()
        return self

    def cancel(self) -> None:
        """Ask the worker to stop after the current frame (nothing to do once the bake has ended: the
        status line then says how it ended)."""
        if self.worker is not None and not self.finished:
            self.worker.cancel()
            self.scene.tangle.status = "Cancelling..."

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    def _accepted(self) -> None:
        """The server took the job: only now remove the frames this bake replaces (a refused scene
        leaves the existing bake untouched) and reset the record."""
        scene = self.scene
        previous = bake_output.load_record(scene)
        self.previous_last = None if previous is None else previous.last_frame
        for output in self.outputs.values():
            output.begin(self.keep_before)
        topologies = _topologies(self.targets)
        if self.keep_before is None:
            record = BakeRecord(self.first, self.last, self.route, topologies)
        else:
            record = bake_output.load_record(scene)
            record.frame_end = self.last
            record.last_frame = self.keep_before - 1
            record.checkpoints = {frame: blob for frame, blob in record.checkpoints.items()
                                  if frame < self.keep_before}
        bake_output.save_record(scene, record)

    def handle(self, event: WorkerEvent) -> None:
        """Apply one worker event on the main thread."""
        self.last_event_at = time.monotonic()
        settings = self.scene.tangle
        if event.kind == "accepted":
            self._accepted()
            preroll = settings.preroll if self.keep_before is None else 0      # a resumed bake does not pre-roll
            settings.status = f"Baking: a pre-roll of {preroll} frames, then the first frame" if preroll \
                else "Baking: waiting for the first frame"
        elif event.kind == "frame":
            if self.keep_before is None or event.frame >= self.keep_before:
                for name, positions in event.positions.items():
                    output = self.outputs.get(name)
                    if output is not None:
                        output.write(event.frame, positions)
                blob = encode_checkpoint(event.checkpoint) if event.checkpoint is not None else None
                bake_output.record_frame(self.scene, event.frame, blob)
                self.written = (event.frame if self.written is None else self.written[0], event.frame)
            self.progress.record(event.frame, dict(event.stats))
            settings.progress = self.progress.fraction
            settings.status = f"Baking {self.progress.status_line()}"
            settings.live_stats = stats_line(event.stats)
        elif event.kind == "done":
            self._finish("cancelled" if event.cancelled else "finished", "")
        elif event.kind == "error":
            self._finish("failed", event.describe())

    def handle_pending(self, budget_s: float = TICK_BUDGET_S) -> None:
        """Apply queued events for at most about ``budget_s`` seconds (called from the modal timer, so
        the UI stays responsive however many frames are queued); failures end the bake."""
        deadline = time.monotonic() + budget_s
        try:
            while not self.finished:
                event = self.worker.wait_event(0.0)
                if event is None:
                    if self.worker.alive:
                        self._show_waiting()
                        return
                    event = self.worker.wait_event(0.0)  # the worker may have queued its last event and exited
                    if event is None:
                        self._finish("failed", "the bake worker stopped without reporting why")
                        return
                self.handle(event)
                if time.monotonic() >= deadline:
                    return
        except Exception as error:  # a failure while applying must stop the worker and keep the frames so far
            self.worker.cancel()
            self._finish("failed", f"{type(error).__name__}: {error}")

    def _show_waiting(self) -> None:
        """Say in the status line how long no new frame came (the server may be computing a slow frame
        or be unreachable: the client fails the bake after ``timeout`` seconds of real silence)."""
        waiting = time.monotonic() - self.last_event_at
        if waiting >= WAITING_NOTICE_S:
            base = f"Baking {self.progress.status_line()}" if self.progress.frames_done else "Baking"
            self.scene.tangle.status = f"{base} · no new frame for {waiting:.0f} s"

    def run_blocking(self, poll_interval: float = 0.1, on_frame=None) -> BakeOutcome:
        """Wait for the worker on this thread, applying events as they come (headless path).
        on_frame(progress, frame, stats): called after each frame is applied (progress output)."""
        try:
            while not self.finished:
                event = self.worker.wait_event(poll_interval)
                if event is not None:
                    self.handle(event)
                    if on_frame is not None and event.kind == "frame":
                        on_frame(self.progress, event.frame, event.stats)
                elif not self.worker.alive:
                    self.handle_pending()
                    if not self.finished:
                        self._finish("failed", "the bake worker stopped without reporting why")
        except BaseException as error:
            self.worker.cancel()
            if not self.finished:
                self._finish("failed", f"{type(error).__name__}: {error}")
            if not isinstance(error, Exception):
                raise
        return self.outcome

    def _finish(self, state: str, message: str) -> None:
        for output in self.outputs.values():  # queued frames (Curves hair keys) are written now
            try:
                output.flush()
            except Exception as error:  # frames that could not be written end the bake as a failure
                state, message = "failed", message or f"{type(error).__name__}: {error}"
        progress = self.progress
        elapsed = time.monotonic() - progress.started_at
        settings = self.scene.tangle
        settings.is_baking = False
        replaced = 0
        if self.written is not None and self.previous_last is not None:
            replaced = max(0, min(self.written[1], self.previous_last) - self.written[0] + 1)
        settings.status = outcome_status(state, self.written, replaced, elapsed, bake_output.load_record(self.scene))
        settings.last_error = message
        self.outcome = BakeOutcome(state, progress.frames_done, progress.frames_total, message, elapsed)
        if self.worker is not None and state != "failed":
            self.worker.join(timeout=5.0)


def continuation_frames(scene: bpy.types.Scene) -> tuple[int | None, int | None]:
    """(resume frame, last baked frame) of the scene's stored bake: Resume continues at the first
    frame; (None, None) without a bake."""
    record = bake_output.load_record(scene)
    if record is None or record.last_frame is None:
        return None, None
    return record.last_frame + 1, record.last_frame


def bake_headless(scene: bpy.types.Scene | None = None, address: str | None = None,
                  timeout: float | None = None, from_frame: int | None = None,
                  connection: ServerConnection | None = None) -> BakeOutcome:
    """Bake ``scene`` (default: the context scene) against ``address`` / ``connection`` and block until done.

    For ``blender --background`` and the ``bpy`` module, where timers and modal operators never run.
    Raises one of ``START_ERRORS`` on bad input before contacting the server; server errors end up in
    the returned outcome (state "failed", message naming the object and frame). ``from_frame``
    continues the stored bake (see :class:`BakeSession`).
    """
    session = BakeSession(scene or bpy.context.scene, address, timeout, from_frame=from_frame,
                          connection=connection).start()
    return session.run_blocking()

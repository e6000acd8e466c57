"""One bake from start to finish on the main thread, shared by the modal operator and the headless path.

``BakeSession.start`` exports the scene (and precomputes drive data for animated colliders) and starts
a :class:`core.worker.BakeWorker`. ``handle`` applies worker events: once the server accepted the job
the previous bake of the cloth objects is freed, then frames become shape keys as they arrive, so
frames baked so far are kept on cancel or failure. Status and progress are mirrored into ``Scene.tangle`` for the panel.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import bpy

from . import bake_io
from .core.bake_state import BakeProgress, stats_line
from .core.worker import BakeWorker, WorkerEvent


@dataclass
class BakeOutcome:
    """How a bake ended: ``state`` is "finished", "cancelled" or "failed"."""

    state: str
    frames_baked: int
    frames_total: int
    message: str
    elapsed_s: float


class BakeSession:
    def __init__(self, scene: bpy.types.Scene, address: str | None = None, timeout: float | None = None,
                 client_factory=None):
        self.scene_name = scene.name
        settings = scene.tangle
        self.address = address or settings.server_address
        self.timeout = timeout if timeout is not None else settings.timeout
        self.client_factory = client_factory
        self.worker: BakeWorker | None = None
        self.progress: BakeProgress | None = None
        self.targets: dict[str, bake_io.ClothTarget] = {}
        self.outcome: BakeOutcome | None = None

    @property
    def scene(self) -> bpy.types.Scene:
        return bpy.data.scenes[self.scene_name]

    def start(self) -> "BakeSession":
        """Export and submit. Raises ``ExportError`` (naming the object) before anything is sent."""
        scene = self.scene
        scene_dict, drive, self.targets = bake_io.export_scene(scene)
        first, last = scene_dict["time"]["frame_start"], scene_dict["time"]["frame_end"]
        self.progress = BakeProgress(first, last)
        settings = scene.tangle
        settings.is_baking, settings.progress, settings.last_error, settings.live_stats = True, 0.0, "", ""
        settings.status = f"Connecting to {self.address}"
        self.worker = BakeWorker(self.address, scene_dict, drive, self.timeout, self.client_factory).start()
        return self

    def cancel(self) -> None:
        if self.worker is not None:
            self.worker.cancel()
            self.scene.tangle.status = "Cancelling..."

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    def handle(self, event: WorkerEvent) -> None:
        """Apply one worker event on the main thread."""
        settings = self.scene.tangle
        if event.kind == "accepted":
            # The previous bake goes only now: a scene the server refuses leaves it untouched.
            for name in self.targets:
                bake_io.free_bake(bpy.data.objects[name])
            settings.status = "Baking: waiting for the first frame"
        elif event.kind == "frame":
            for name, positions in event.positions.items():
                target = self.targets.get(name)
                if target is not None:
                    bake_io.write_frame(target, event.frame, self.progress.frame_start, positions)
            self.progress.record(event.frame, dict(event.stats))
            settings.progress = self.progress.fraction
            settings.status = f"Baking {self.progress.status_line()}"
            settings.live_stats = stats_line(event.stats)
        elif event.kind == "done":
            self._finish("cancelled" if event.cancelled else "finished", "")
        elif event.kind == "error":
            self._finish("failed", event.describe())

    def handle_pending(self) -> None:
        """Apply every queued event (called from the modal timer); failures end the bake."""
        try:
            for event in self.worker.poll():
                self.handle(event)
                if self.finished:
                    break
            if not self.finished and not self.worker.alive:
                for event in self.worker.poll():
                    self.handle(event)
        except Exception as error:  # a failure while applying must stop the worker and keep the frames so far
            self.worker.cancel()
            self._finish("failed", f"{type(error).__name__}: {error}")

    def run_blocking(self, poll_interval: float = 0.1) -> BakeOutcome:
        """Wait for the worker on this thread, applying events as they come (headless path)."""
        try:
            while not self.finished:
                event = self.worker.wait_event(poll_interval)
                if event is not None:
                    self.handle(event)
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
        progress = self.progress
        elapsed = time.monotonic() - progress.started_at
        settings = self.scene.tangle
        settings.is_baking = False
        summary = f"{progress.frames_done}/{progress.frames_total} frames in {elapsed:.1f} s"
        settings.status = {"finished": f"Baked {summary}", "cancelled": f"Cancelled: kept {summary}",
                           "failed": f"Failed: kept {summary}"}[state]
        settings.last_error = message
        self.outcome = BakeOutcome(state, progress.frames_done, progress.frames_total, message, elapsed)
        if self.worker is not None and state != "failed":
            self.worker.join(timeout=5.0)


def bake_headless(scene: bpy.types.Scene | None = None, address: str | None = None,
                  timeout: float | None = None) -> BakeOutcome:
    """Bake ``scene`` (default: the context scene) against ``address`` and block until done.

    For ``blender --background`` and the ``bpy`` module, where timers and modal operators never run.
    Raises ``ExportError`` on bad input before contacting the server; server errors end up in the
    returned outcome (state "failed", message naming the object and frame).
    """
    session = BakeSession(scene or bpy.context.scene, address, timeout).start()
    return session.run_blocking()

"""TANGLE_OT_bake: bake the scene through the solver server.

Invoked from the UI it is modal: a worker thread does all socket I/O while a window-manager timer
applies the frames on the main thread, the panel shows progress/ETA, and Esc cancels. Executed from a
script or in ``--background`` (no event loop) it blocks until the bake ends.
"""

import bpy

from ..bake_session import BakeSession
from ..core.scene_export import ExportError

# The bake running in this Blender session (at most one); the cancel operator and the panel read it.
_active_session: BakeSession | None = None


def active_session() -> BakeSession | None:
    return _active_session if _active_session is not None and not _active_session.finished else None


def _report_outcome(operator, outcome) -> set[str]:
    if outcome.state == "failed":
        operator.report({"ERROR"}, f"Tangle bake failed after {outcome.frames_baked} frame(s): {outcome.message}")
        return {"CANCELLED"}
    level = "INFO" if outcome.state == "finished" else "WARNING"
    operator.report({level}, f"Tangle bake {outcome.state}: {outcome.frames_baked}/{outcome.frames_total} frames "
                             f"in {outcome.elapsed_s:.1f} s")
    return {"FINISHED"}


class TANGLE_OT_bake(bpy.types.Operator):
    """Bake Tangle cloth of this scene through the solver server (Esc cancels, baked frames are kept)"""

    bl_idname = "tangle.bake"
    bl_label = "Bake"
    bl_options = {"REGISTER"}

    _timer = None

    @classmethod
    def poll(cls, context):
        if active_session() is not None:
            cls.poll_message_set("A Tangle bake is already running")
            return False
        if not any(obj.tangle.role == "CLOTH" for obj in context.scene.objects):
            cls.poll_message_set("Mark at least one mesh as Cloth in the Tangle physics panel")
            return False
        return True

    def _start(self, context) -> BakeSession | None:
        global _active_session
        try:
            _active_session = BakeSession(context.scene).start()
        except ExportError as error:
            self.report({"ERROR"}, f"Tangle bake not started: {error}")
            context.scene.tangle.last_error = str(error)
            return None
        return _active_session

    def execute(self, context):
        session = self._start(context)
        if session is None:
            return {"CANCELLED"}
        return _report_outcome(self, session.run_blocking())

    def invoke(self, context, event):
        if context.window is None:
            return self.execute(context)
        if self._start(context) is None:
            return {"CANCELLED"}
        window_manager = context.window_manager
        self._timer = window_manager.event_timer_add(0.1, window=context.window)
        window_manager.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        session = _active_session
        if event.type == "ESC" and event.value == "PRESS":
            session.cancel()
        elif event.type == "TIMER":
            session.handle_pending()
            for area in context.screen.areas if context.screen else ():
                if area.type in {"PROPERTIES", "VIEW_3D"}:
                    area.tag_redraw()
            if session.finished:
                context.window_manager.event_timer_remove(self._timer)
                return _report_outcome(self, session.outcome)
        return {"PASS_THROUGH"}


class TANGLE_OT_cancel_bake(bpy.types.Operator):
    """Stop the running Tangle bake after the current frame; frames baked so far are kept"""

    bl_idname = "tangle.cancel_bake"
    bl_label = "Cancel Bake"

    @classmethod
    def poll(cls, context):
        return active_session() is not None

    def execute(self, context):
        active_session().cancel()
        return {"FINISHED"}

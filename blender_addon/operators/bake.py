"""Bake operators: bake, resume, re-bake from the current frame, cancel.

Invoked from the UI they are modal: a worker thread does all socket I/O while a window-manager timer
applies the frames on the main thread, the panel shows progress/ETA/live stats, and Esc cancels.
Executed from a script or in ``--background`` (no event loop) they block until the bake ends.
"""

import bpy

from ..bake_session import START_ERRORS, BakeSession, continuation_frames
from ..session import active_session, last_session, set_active_session
from .guards import no_bake_running, refuse

SIMULATED_ROLES = frozenset({"CLOTH", "SOFTBODY", "HAIR"})


def _report_outcome(operator, outcome) -> set[str]:
    if outcome.state == "failed":
        operator.report({"ERROR"}, f"Tangle bake failed after {outcome.frames_baked} frame(s): {outcome.message}")
        return {"CANCELLED"}
    level = "INFO" if outcome.state == "finished" else "WARNING"
    operator.report({level}, f"Tangle bake {outcome.state}: {outcome.frames_baked}/{outcome.frames_total} frames "
                             f"in {outcome.elapsed_s:.1f} s")
    return {"FINISHED"}


class _ModalBake:
    """Shared modal / blocking driver; subclasses say where the bake starts (``_from_frame``)."""

    bl_options = {"REGISTER"}
    _timer = None

    @classmethod
    def _can_bake(cls, context) -> bool:
        if not no_bake_running(cls):
            return False
        if not any(obj.tangle.role in SIMULATED_ROLES for obj in context.scene.objects):
            return refuse(cls, "Mark at least one object as Cloth, Soft Body or Hair in the Tangle physics panel")
        return True


    def _from_frame(self, context) -> int | None:
        return None

    def _start(self, context) -> BakeSession | None:
        try:
            set_active_session(BakeSession(context.scene, from_frame=self._from_frame(context)).start())
        except START_ERRORS as error:
            context.scene.tangle.is_baking = False
            self.report({"ERROR"}, f"Tangle bake not started: {error}")
            context.scene.tangle.last_error = str(error)
            return None
        warnings = [problem for problem in context.scene.tangle.problems if not problem.blocking]
        if warnings:
            self.report({"WARNING"}, f"Baking with {len(warnings)} warning(s) (listed in the Tangle Bake panel): "
                                     f"{warnings[0].object_name}: {warnings[0].message}")
        return last_session()

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
        session = last_session()
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


class _ContinueBake(_ModalBake):
    """Operators that continue the stored bake; refused with ``nothing_stored`` when there is none."""

    nothing_stored = "There is no bake to continue"

    @classmethod
    def poll(cls, context):
        if not cls._can_bake(context):
            return False
        return continuation_frames(context.scene)[0] is not None or refuse(cls, cls.nothing_stored)


class TANGLE_OT_bake(_ModalBake, bpy.types.Operator):
    """Bake the Tangle cloth, soft bodies and hair of this scene through the solver server (Esc cancels, baked frames are kept)"""

    bl_idname = "tangle.bake"
    bl_label = "Bake"

    @classmethod
    def poll(cls, context):
        return cls._can_bake(context)


class TANGLE_OT_resume_bake(_ContinueBake, bpy.types.Operator):
    """Continue the stored bake after its last baked frame (from the saved solver checkpoint; earlier frames are kept)"""

    bl_idname = "tangle.resume_bake"
    bl_label = "Resume"
    nothing_stored = "There is no bake to resume"

    def _from_frame(self, context):
        return continuation_frames(context.scene)[0]


class TANGLE_OT_rebake_from_frame(_ContinueBake, bpy.types.Operator):
    """Bake again from the current frame on; frames before it stay exactly as they are"""

    bl_idname = "tangle.rebake_from_frame"
    bl_label = "Re-bake from Current Frame"

    def _from_frame(self, context):
        return context.scene.frame_current


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

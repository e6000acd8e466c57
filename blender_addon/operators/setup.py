"""Preferences > Set Up Local Solver: one click makes a private Python environment in the add-on's user folder,
installs the solver's packages into it and points *Server Python* at it (core/solver_setup.py does the work).

In the UI the set-up runs in a worker thread and the operator is modal (a timer reads its progress; Esc or
*Cancel Set-Up* stops it); in background mode (scripts, tests) timers do not run, so it blocks and prints
its progress. A local server already running is stopped afterwards, so the next Bake starts the new one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

import bpy

from ..core.solver_setup import SolverSetup, SolverSetupError, solver_source
from ..preferences import ADDON_PACKAGE, addon_preferences
from ..session import running_local_server, running_setup, set_running_setup, stop_local_server

ENVIRONMENT_FOLDER = "solver_env"
ADDON_FOLDER = Path(__file__).resolve().parents[1]


@dataclass
class _Progress:
    """What the worker thread reports, read by the timer (and the preferences panel)."""

    fraction: float = 0.0
    text: str = ""
    error: str = ""
    python: str = ""
    finished: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def update(self, fraction: float, text: str) -> None:
        with self.lock:
            self.fraction, self.text = fraction, text


def environment_folder() -> Path:
    """Where the private environment lives: the extension's user folder (kept across updates), or for an
    add-on loaded outside the extension system a 'tangle' folder in Blender's user data files."""
    try:
        return Path(bpy.utils.extension_path_user(ADDON_PACKAGE, path=ENVIRONMENT_FOLDER, create=False))
    except (ValueError, AttributeError, RuntimeError):
        return Path(bpy.utils.user_resource("DATAFILES", path="tangle", create=True)) / ENVIRONMENT_FOLDER


def _new_setup(prefs) -> SolverSetup:
    wheel_folder = bpy.path.abspath(prefs.wheel_folder) if prefs.wheel_folder else ""
    if not wheel_folder and not getattr(bpy.app, "online_access", True):
        raise SolverSetupError("Blender's online access is off, so the solver's packages cannot be downloaded: "
                               "allow it (Preferences > System > Network) or set a Wheel Folder")
    source = solver_source(ADDON_FOLDER, gpu=prefs.local_device == "cuda")
    folder = environment_folder()
    folder.parent.mkdir(parents=True, exist_ok=True)
    return SolverSetup(folder, source, wheel_folder=wheel_folder)


def _finish(prefs, setup: SolverSetup, progress: _Progress) -> str:
    """Store the outcome in the preferences; returns the status line."""
    if progress.error:
        prefs.setup_status = f"Set-up failed: {progress.error.splitlines()[0]}"
        prefs.setup_log = progress.error
        return prefs.setup_status
    prefs.python_path = progress.python
    prefs.solver_path = setup.source.on_path
    if running_local_server() is not None:
        stop_local_server()                     # the next Bake starts the solver from the new environment
    prefs.setup_status = f"Local solver ready: {progress.python}"
    prefs.setup_log = ""
    return prefs.setup_status


def _work(setup: SolverSetup, progress: _Progress, echo: bool) -> None:
    def report(fraction, text):
        progress.update(fraction, text)
        if echo:
            print(f"Tangle set-up {fraction:4.0%}  {text}", flush=True)

    try:
        progress.python = str(setup.run(report))
    except SolverSetupError as error:
        progress.error = str(error)
    except Exception as error:  # noqa: BLE001 (a worker thread must always report back)
        progress.error = f"unexpected {type(error).__name__}: {error}"
    progress.finished = True


class TANGLE_OT_setup_local_solver(bpy.types.Operator):
    """Make a private Python environment for the local solver and install its packages into it (from the
    internet, or from the Wheel Folder when set); the local server then runs from it"""

    bl_idname = "tangle.setup_local_solver"
    bl_label = "Set Up Local Solver"

    _timer = None

    @classmethod
    def poll(cls, context):
        if running_setup() is not None:
            cls.poll_message_set("The local solver is being set up")
            return False
        return addon_preferences(context) is not None

    def execute(self, context):
        prefs = addon_preferences(context)
        try:
            setup = _new_setup(prefs)
        except SolverSetupError as error:
            prefs.setup_status = f"Set-up failed: {error}"
            self.report({"ERROR"}, f"Tangle: {error}")
            return {"CANCELLED"}
        progress = _Progress()
        prefs.setup_status = "Setting up the local solver..."
        if bpy.app.background:
            _work(setup, progress, echo=True)
            status = _finish(prefs, setup, progress)
            self.report({"ERROR" if progress.error else "INFO"}, f"Tangle: {status}")
            return {"CANCELLED" if progress.error else "FINISHED"}
        set_running_setup((setup, progress))
        threading.Thread(target=_work, args=(setup, progress, False), name="tangle-solver-setup", daemon=True).start()
        self._timer = context.window_manager.event_timer_add(0.25, window=context.window)
        context.window_manager.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context, event):
        setup, progress = running_setup()
        if event.type == "ESC":
            setup.cancel()
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        for area in context.screen.areas if context.screen else ():
            if area.type == "PREFERENCES":
                area.tag_redraw()
        if not progress.finished:
            return {"PASS_THROUGH"}
        context.window_manager.event_timer_remove(self._timer)
        set_running_setup(None)
        status = _finish(addon_preferences(context), setup, progress)
        self.report({"ERROR" if progress.error else "INFO"}, f"Tangle: {status}")
        return {"CANCELLED" if progress.error else "FINISHED"}


class TANGLE_OT_cancel_solver_setup(bpy.types.Operator):
    """Stop the local solver set-up (running it again continues where it stopped)"""

    bl_idname = "tangle.cancel_solver_setup"
    bl_label = "Cancel Set-Up"

    @classmethod
    def poll(cls, context):
        return running_setup() is not None

    def execute(self, context):
        running_setup()[0].cancel()
        return {"FINISHED"}


classes = (TANGLE_OT_setup_local_solver, TANGLE_OT_cancel_solver_setup)

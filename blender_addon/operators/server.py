"""Start / stop a solver server on 127.0.0.1 from Blender (``python -m solver_server``).

The interpreter comes from the add-on preferences (*Server Python*, default Blender's own Python when
it can run the solver server); it is checked first so a wrong one gets a clear message instead of a
silent failure. The server runs until *Stop Local Server*, the add-on is disabled, or Blender quits.
Once it listens, the scene's server address points at it (and the scene's server profile is cleared).
"""

import atexit

import bpy

from ..core.local_server import LocalServer, LocalServerError, check_interpreter
from ..preferences import local_server_python
from .bake import CANCEL_BAKE_FIRST, no_bake_running, refuse

STARTUP_TIMEOUT_S = 180.0   # [s] the first start on a machine compiles the kernels before listening (~26 s idle)
_local_server: LocalServer | None = None


def running_local_server() -> LocalServer | None:
    return _local_server if _local_server is not None and _local_server.running else None


def stop_local_server() -> int | None:
    """Stop the server this Blender session started (no-op when none); returns its exit code."""
    global _local_server
    server, _local_server = _local_server, None
    return server.stop() if server is not None else None


atexit.register(stop_local_server)


class TANGLE_OT_start_local_server(bpy.types.Operator):
    """Start a Tangle solver server on this machine (127.0.0.1) and point the scene at it"""

    bl_idname = "tangle.start_local_server"
    bl_label = "Start Local Server"

    @classmethod
    def poll(cls, context):
        return running_local_server() is None or refuse(cls, "A local solver server is already running")

    def execute(self, context):
        global _local_server
        python, extra_paths, device = local_server_python(context)
        settings = context.scene.tangle
        try:
            check_interpreter(python, extra_paths)
            server = LocalServer(python=python, startup_timeout=STARTUP_TIMEOUT_S, device=device,
                                 extra_paths=extra_paths)
            address = server.start()
        except LocalServerError as error:
            settings.last_error = f"Local server: {error}"
            self.report({"ERROR"}, f"Tangle local server not started: {error}")
            return {"CANCELLED"}
        _local_server = server
        settings.server_profile = ""
        settings.server_address = address
        settings.last_error = ""
        settings.server_info = f"local server at {address} ({device})"
        self.report({"INFO"}, f"Tangle solver server listening on {address}")
        return {"FINISHED"}


class TANGLE_OT_stop_local_server(bpy.types.Operator):
    """Stop the solver server started from this Blender session"""

    bl_idname = "tangle.stop_local_server"
    bl_label = "Stop Local Server"

    @classmethod
    def poll(cls, context):
        return no_bake_running(cls, CANCEL_BAKE_FIRST) and running_local_server() is not None

    def execute(self, context):
        code = stop_local_server()
        context.scene.tangle.server_info = ""
        self.report({"INFO"}, f"Tangle local server stopped (exit code {code})")
        return {"FINISHED"}

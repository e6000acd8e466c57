"""Start / stop a solver server on 127.0.0.1 from Blender (``python -m solver_server``).

The interpreter comes from the add-on preferences (*Server Python*, default Blender's own Python when
it can run the solver server); it is checked first so a wrong one gets a clear message instead of a
silent failure. The server runs until *Stop Local Server*, the add-on is disabled, or Blender quits.
A scene whose server address is ``local`` (the default) bakes on it: the first Bake starts it
(:func:`ensure_local_server`), later bakes reuse it, and no port is written into the file. *Start Local
Server* starts it ahead of time and sets the scene to ``local`` (clearing its server profile).
"""

import bpy

from ..core.connection import LOCAL
from ..core.local_server import LocalServer, LocalServerError
from ..preferences import local_server_python
from ..session import running_local_server, stop_local_server
from .. import session
from .guards import CANCEL_BAKE_FIRST, no_bake_running, refuse


class TANGLE_OT_start_local_server(bpy.types.Operator):
    """Start a Tangle solver server on this machine (127.0.0.1) and point the scene at it"""

    bl_idname = "tangle.start_local_server"
    bl_label = "Start Local Server"

    @classmethod
    def poll(cls, context):
        return running_local_server() is None or refuse(cls, "A local solver server is already running")

    def execute(self, context):
        settings = context.scene.tangle
        try:
            server = ensure_local_server(context)
        except LocalServerError as error:
            settings.last_error = f"Local server: {error}"
            self.report({"ERROR"}, f"Tangle local server not started: {error}")
            return {"CANCELLED"}
        settings.server_profile = ""
        settings.server_address = LOCAL
        settings.last_error = ""
        settings.server_info = f"local server at {server.address} ({server.device})"
        self.report({"INFO"}, f"Tangle solver server listening on {server.address}")
        return {"FINISHED"}


def ensure_local_server(context=None) -> LocalServer:
    """The local solver server of this Blender session, started now if none runs (Server Python and
    device from the add-on preferences). Raises LocalServerError when it cannot start."""
    return session.ensure_local_server(*local_server_python(context))


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

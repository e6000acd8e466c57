"""TANGLE_OT_test_connection: ask the scene's server who it is (version, backend, device)."""

import bpy

from .._protocol import SolverError
from ..core.bake_state import server_line
from ..core.connection import ConnectionSettingsError, open_client
from ..scene_connection import scene_connection
from ..session import active_session

TEST_TIMEOUT_S = 5.0


class TANGLE_OT_test_connection(bpy.types.Operator):
    """Connect to the Tangle solver server and show its version, backend (cpu/cuda) and device"""

    bl_idname = "tangle.test_connection"
    bl_label = "Test Connection"

    @classmethod
    def poll(cls, context):
        return active_session() is None

    def execute(self, context):
        settings = context.scene.tangle
        where = settings.server_address
        try:
            connection = scene_connection(context.scene, context)
            where = connection.describe()
            with open_client(connection, min(settings.timeout, TEST_TIMEOUT_S)) as client:
                settings.server_info = server_line(client.hello())
        except (SolverError, ConnectionSettingsError) as error:
            settings.server_info = ""
            settings.last_error = f"{where}: {error}"
            self.report({"ERROR"}, f"Tangle server at {where}: {error}")
            return {"CANCELLED"}
        settings.last_error = ""
        self.report({"INFO"}, f"Tangle server at {where}: {settings.server_info}")
        return {"FINISHED"}

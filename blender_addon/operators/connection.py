"""TANGLE_OT_test_connection: ask the configured server who it is (version, backend, device)."""

import bpy

from .._protocol import SolverError, solver_client_class
from ..core.bake_state import server_line
from .bake import active_session

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
        address = settings.server_address
        try:
            with solver_client_class()(address, timeout=min(settings.timeout, TEST_TIMEOUT_S)) as client:
                settings.server_info = server_line(client.hello())
        except SolverError as error:
            settings.server_info = ""
            settings.last_error = f"{address}: {error}"
            self.report({"ERROR"}, f"Tangle server at {address}: {error}")
            return {"CANCELLED"}
        settings.last_error = ""
        self.report({"INFO"}, f"Tangle server at {address}: {settings.server_info}")
        return {"FINISHED"}

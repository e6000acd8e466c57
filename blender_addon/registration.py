"""The ``classes`` tuple and (un)registration of the Tangle extension (needs bpy)."""

import bpy

from . import checks, preferences, presets, properties
from .operators.bake import TANGLE_OT_bake, TANGLE_OT_cancel_bake, TANGLE_OT_rebake_from_frame, TANGLE_OT_resume_bake
from .operators.connection import TANGLE_OT_test_connection
from .operators.farm import TANGLE_OT_farm_bake
from .operators.free import TANGLE_OT_free_bake
from .operators.server import TANGLE_OT_start_local_server, TANGLE_OT_stop_local_server, stop_local_server
from .panels import TANGLE_PT_bake, TANGLE_PT_bake_workflow, TANGLE_PT_object

classes = properties.classes + preferences.classes + checks.classes + presets.classes + (
    TANGLE_OT_bake,
    TANGLE_OT_resume_bake,
    TANGLE_OT_rebake_from_frame,
    TANGLE_OT_start_local_server,
    TANGLE_OT_stop_local_server,
    TANGLE_OT_cancel_bake,
    TANGLE_OT_free_bake,
    TANGLE_OT_farm_bake,
    TANGLE_OT_test_connection,
    TANGLE_PT_object,
    TANGLE_PT_bake,
    TANGLE_PT_bake_workflow,
)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)
    properties.attach()


def unregister() -> None:
    stop_local_server()
    properties.detach()
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)

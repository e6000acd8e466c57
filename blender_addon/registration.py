"""The ``classes`` tuple and (un)registration of the Tangle extension (needs bpy)."""

import bpy

from . import preferences, presets, properties
from .operators import setup
from .operators.check import TANGLE_OT_check_scene
from .operators.bake import TANGLE_OT_bake, TANGLE_OT_cancel_bake, TANGLE_OT_rebake_from_frame, TANGLE_OT_resume_bake
from .operators.connection import TANGLE_OT_test_connection
from .operators.farm import TANGLE_OT_farm_bake
from .operators.free import TANGLE_OT_free_bake
from .operators.server import TANGLE_OT_start_local_server, TANGLE_OT_stop_local_server
from .session import cancel_running_setup, stop_local_server
from .panels import TANGLE_PT_bake, TANGLE_PT_bake_workflow, TANGLE_PT_object, TANGLE_PT_object_maps

classes = properties.classes + preferences.classes + presets.classes + setup.classes + (
    TANGLE_OT_check_scene,
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
    TANGLE_PT_object_maps,
    TANGLE_PT_bake,
    TANGLE_PT_bake_workflow,
)


@bpy.app.handlers.persistent
def clear_session_state(_file=None) -> None:
    """After a file loads: the live bake fields describe this Blender session (a connection test, a bake
    in progress), not the session that saved the file, so they start empty (a saved file showed the
    previous session's server line and could hold a bake marked running)."""
    for scene in bpy.data.scenes:
        settings = scene.tangle
        settings.server_info, settings.live_stats, settings.is_baking, settings.progress = "", "", False, 0.0


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)
    properties.attach()
    bpy.app.handlers.load_post.append(clear_session_state)


def unregister() -> None:
    if clear_session_state in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(clear_session_state)
    stop_local_server()
    cancel_running_setup()
    properties.detach()
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)

"""TANGLE_OT_free_bake: remove the baked shape keys and their animation."""

import bpy

from ..bake_io import free_bake
from .bake import active_session


def _baked_objects(context):
    return [obj for obj in context.scene.objects if obj.tangle.role == "CLOTH" and obj.tangle.baked_topology]


class TANGLE_OT_free_bake(bpy.types.Operator):
    """Remove the Tangle bake (shape keys tangle_f#### and their keyframes) from the scene's cloth objects"""

    bl_idname = "tangle.free_bake"
    bl_label = "Free Bake"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        if active_session() is not None:
            cls.poll_message_set("Cancel the running bake first")
            return False
        return bool(_baked_objects(context))

    def execute(self, context):
        objects = _baked_objects(context)
        removed = sum(free_bake(obj) for obj in objects)
        context.scene.tangle.status = ""
        context.scene.tangle.progress = 0.0
        self.report({"INFO"}, f"Removed {removed} baked shape key(s) from {len(objects)} object(s)")
        return {"FINISHED"}

"""TANGLE_OT_free_bake: remove the baked frames (shape keys or PC2 cache), their animation and the
stored checkpoints."""

import bpy

from ..bake_output import RECORD_PROPERTY, clear_record, free_outputs, mesh_cache_modifier
from .bake import SIMULATED_ROLES
from .guards import CANCEL_BAKE_FIRST, no_bake_running, refuse

NOTHING_TO_FREE = ("Nothing to free: no cloth, soft body or hair in this scene has a Tangle bake "
                   "(shape keys tangle_f#### or a Tangle Mesh Cache)")


def _baked_objects(context):
    return [obj for obj in context.scene.objects if obj.tangle.role in SIMULATED_ROLES and
            (obj.tangle.baked_topology or mesh_cache_modifier(obj) is not None)]


class TANGLE_OT_free_bake(bpy.types.Operator):
    """Remove the Tangle bake from the scene's simulated objects: shape keys tangle_f#### and their keyframes,
    or the Mesh Cache modifier and its PC2 file, plus the stored solver checkpoints"""

    bl_idname = "tangle.free_bake"
    bl_label = "Free Bake"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def poll(cls, context):
        if not no_bake_running(cls, CANCEL_BAKE_FIRST):
            return False
        return bool(_baked_objects(context)) or RECORD_PROPERTY in context.scene or refuse(cls, NOTHING_TO_FREE)

    def execute(self, context):
        objects = _baked_objects(context)
        removed = sum(free_outputs(obj) for obj in objects)
        clear_record(context.scene)
        context.scene.tangle.status = ""
        context.scene.tangle.progress = 0.0
        self.report({"INFO"}, f"Removed {removed} baked frame(s) from {len(objects)} object(s)")
        return {"FINISHED"}

"""Check Scene: the pre-bake checks from the Tangle Bake panel, listed in the panel (``export.check_scene``)."""

import bpy

from ..core import validation
from ..export import check_scene


class TANGLE_OT_check_scene(bpy.types.Operator):
    """Check every object marked for Tangle and list what must be fixed before baking"""

    bl_idname = "tangle.check_scene"
    bl_label = "Check Scene"
    bl_options = {"REGISTER"}

    def execute(self, context):
        problems = check_scene(context.scene)
        stopping = validation.blocking(problems)
        if stopping:
            self.report({"WARNING"}, validation.summary(stopping))
        elif problems:
            self.report({"WARNING"}, f"Ready to bake, with {len(problems)} warning(s): {validation.summary(problems)}")
        else:
            self.report({"INFO"}, "Ready to bake: no problems found")
        return {"FINISHED"}

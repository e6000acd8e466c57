"""TANGLE_OT_farm_bake: the headless farm bake as an operator, for a real Blender binary:

    blender -b shot.blend --python-exit-code 1 --python-expr \\
        "import bpy; bpy.ops.tangle.farm_bake(address='tcp://gpu-box:5555', resume=True)"

It bakes the open file blocking (no timers run in --background), saves it (also after a failure, so
the frames baked so far are kept and a retry with ``resume=True`` continues), and reports an ERROR on
any failure; in --background Blender turns that into a Python exception, which ``--python-exit-code 1``
turns into exit code 1.
"""

from pathlib import Path

import bpy
from bpy.props import BoolProperty, FloatProperty, StringProperty

from .guards import no_bake_running


class TANGLE_OT_farm_bake(bpy.types.Operator):
    """Bake the open .blend headless and save it (render-farm entry; fails with an ERROR report)"""

    bl_idname = "tangle.farm_bake"
    bl_label = "Farm Bake"

    address: StringProperty(name="Address", default="",
                            description="Solver server address (empty: the scene's profile or address)")
    server_key: StringProperty(name="Server Key", default="", description="The server's public CURVE key file")
    client_key: StringProperty(name="Client Key", default="", description="This client's CURVE secret key file")
    timeout: FloatProperty(name="Timeout", default=0.0, min=0.0,
                           description="Seconds of server silence before failing (0: the scene's setting) [s]")
    resume: BoolProperty(name="Resume", default=False,
                         description="Continue an incomplete stored bake after its last baked frame")
    output: StringProperty(name="Output", default="", subtype="FILE_PATH",
                           description="Save the baked file here (empty: overwrite the open file)")

    @classmethod
    def poll(cls, context):
        return no_bake_running(cls)

    def execute(self, context):
        from ..cli import bake_scene, save_blend

        target = bpy.path.abspath(self.output) if self.output else bpy.data.filepath
        if not target:
            self.report({"ERROR"}, "Tangle farm bake: the file was never saved and no output path was given")
            return {"CANCELLED"}
        code, message = bake_scene(context.scene, self.address or None, self.timeout or None, self.resume,
                                   self.server_key, self.client_key)
        code = save_blend(bpy, Path(target), code)
        if code != 0:
            self.report({"ERROR"}, f"Tangle farm bake failed: {message}")
            return {"CANCELLED"}
        self.report({"INFO"}, message)
        return {"FINISHED"}

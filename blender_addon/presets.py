"""Material presets in the Tangle panel: ``TANGLE_OT_apply_preset`` and the ``TANGLE_MT_presets`` menu
listing the presets of the active object's role (values in ``core/presets.py``)."""

from __future__ import annotations

import bpy

from .core.presets import PRESETS, SETTINGS_GROUP, preset_values


class TANGLE_OT_apply_preset(bpy.types.Operator):
    """Set the material parameters of the active object's Tangle role from a preset"""

    bl_idname = "tangle.apply_preset"
    bl_label = "Apply Tangle Preset"
    bl_options = {"REGISTER", "UNDO"}

    preset: bpy.props.StringProperty(name="Preset", description="Name of the preset, e.g. Denim")

    @classmethod
    def poll(cls, context):
        obj = context.object
        if obj is None or obj.tangle.role not in PRESETS:
            cls.poll_message_set("The active object needs the Cloth, Soft Body or Hair role")
            return False
        return True

    def execute(self, context):
        obj = context.object
        role = obj.tangle.role
        try:
            values = preset_values(role, self.preset)
        except KeyError as error:
            self.report({"ERROR"}, f"{obj.name}: {error.args[0]}")
            return {"CANCELLED"}
        settings = getattr(obj.tangle, SETTINGS_GROUP[role])
        for name, value in values.items():
            setattr(settings, name, value)
        self.report({"INFO"}, f"{obj.name}: {self.preset} {role.lower().replace('softbody', 'soft body')} preset")
        return {"FINISHED"}


class TANGLE_MT_presets(bpy.types.Menu):
    bl_label = "Presets"
    bl_idname = "TANGLE_MT_presets"

    def draw(self, context):
        obj = context.object
        for name in PRESETS.get(obj.tangle.role, {}) if obj is not None else ():
            self.layout.operator(TANGLE_OT_apply_preset.bl_idname, text=name).preset = name


classes = (TANGLE_OT_apply_preset, TANGLE_MT_presets)

"""Tangle panels in the Physics properties tab: the object's role and parameters, and the scene bake."""

import bpy

from .bake_io import deforms, is_animated, wind_fields
from .core.connection import is_local
from .core.painted_maps import AT_ZERO_SUFFIX, MAP_SUFFIX, paintable
from .core.param_table import CLOTH_PARAMS, COLLIDER_PARAMS, HAIR_PARAMS, SOFTBODY_PARAMS
from .session import active_session, running_local_server

FAST_HAIR_SHARED = ("gravity_scale",)


def _hair_params_for(model: str) -> list[str]:
    """Hair parameter names shown for ``model``: the common ones (wind and guides included), then the fast models'
    own."""
    common = [spec.name for spec in HAIR_PARAMS if spec.name != "model" and spec.name not in FAST_HAIR_SHARED
              and not spec.name.startswith(("particle_", "cosserat_", "interaction_"))]
    if model == "der":
        return common
    own = ("particle_",) if model == "particles" else ("cosserat_", "interaction_")
    return common + list(FAST_HAIR_SHARED) + [spec.name for spec in HAIR_PARAMS if spec.name.startswith(own)]


def _draw_scene_wind(layout, settings, scene) -> None:
    """The Scene Wind toggle and how many force fields feed it."""
    layout.prop(settings, "use_scene_wind")
    fields = len(wind_fields(scene))
    if settings.use_scene_wind and fields:
        layout.label(text=f"Wind from {fields} force field(s)", icon="FORCE_WIND")


def _draw_params(layout, settings, names) -> None:
    column = layout.column(align=True)
    for name in names:
        column.prop(settings, name)


class _PhysicsTab:
    """Mixin of every Tangle panel: they live in the Physics tab of the Properties editor."""

    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "physics"


class TANGLE_PT_object(_PhysicsTab, bpy.types.Panel):
    bl_label = "Tangle"

    @classmethod
    def poll(cls, context):
        return context.object is not None

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        obj = context.object
        settings = obj.tangle
        layout.prop(settings, "role")
        role = settings.role
        if role in {"CLOTH", "SOFTBODY", "HAIR"}:
            layout.menu("TANGLE_MT_presets", icon="PRESET")
        if role in {"CLOTH", "SOFTBODY"}:
            if obj.type != "MESH":
                layout.label(text=f"{role.title().replace('body', ' Body')} needs a mesh object", icon="ERROR")
                return
            layout.prop_search(settings, "pin_group", obj, "vertex_groups")
            group, table = (settings.cloth, CLOTH_PARAMS) if role == "CLOTH" else (settings.softbody, SOFTBODY_PARAMS)
            if role == "CLOTH":
                _draw_scene_wind(layout, settings, context.scene)
            _draw_params(layout, group, [spec.name for spec in table])
        elif role == "HAIR":
            if obj.type not in {"CURVES", "CURVE"}:
                layout.label(text="Hair needs a Curves (hair) or Curve object", icon="ERROR")
                return
            if obj.type == "CURVES":
                layout.prop(settings, "bind_to_surface")
                if settings.bind_to_surface:
                    surface = obj.data.surface
                    layout.label(text=f"Emitter: {surface.name}" if surface else "Emitter: none set (Curves data)",
                                 icon="CHECKMARK" if surface else "ERROR")
            layout.prop(settings.hair, "model")
            _draw_scene_wind(layout, settings, context.scene)
            _draw_params(layout, settings.hair, _hair_params_for(settings.hair.model))
        elif role == "COLLIDER":
            layout.prop(settings, "collider_shape")
            _draw_params(layout, settings.collider, [spec.name for spec in COLLIDER_PARAMS])
            if settings.collider_shape == "MESH" and is_animated(obj) and deforms(obj):
                layout.label(text="Deforming: vertices sent every frame", icon="MOD_ARMATURE")
            else:
                layout.label(text="Animated: sent every frame" if is_animated(obj) else "Static",
                             icon="ANIM" if is_animated(obj) else "OBJECT_DATA")
        if role != "NONE" and settings.baked_topology:
            layout.label(text="Baked", icon="CHECKMARK")


class TANGLE_PT_bake(_PhysicsTab, bpy.types.Panel):
    bl_label = "Tangle Bake"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        settings = context.scene.tangle
        row = layout.row(align=True)
        row.prop(settings, "server_address")
        row.operator("tangle.test_connection", text="", icon="LINKED")
        if is_local(settings.server_address) and not settings.server_profile:
            server = running_local_server()
            layout.label(text=f"Local solver running at {server.address}" if server is not None
                         else "Local solver: starts on Bake (first start compiles kernels, up to a minute)",
                         icon="CHECKMARK" if server is not None else "INFO")
        if settings.server_info:
            layout.label(text=settings.server_info, icon="CHECKMARK")
        layout.prop(settings, "timeout")
        layout.prop(settings, "substeps")
        layout.prop(settings, "preroll")
        layout.prop(settings, "use_frame_range")
        if settings.use_frame_range:
            row = layout.row(align=True)
            row.prop(settings, "frame_start")
            row.prop(settings, "frame_end")
        row = layout.row(align=True)
        if active_session() is not None:
            layout.progress(factor=settings.progress, type="BAR", text=settings.status)
            row.operator("tangle.cancel_bake", icon="CANCEL")
        else:
            row.operator("tangle.bake", icon="PHYSICS")
            row.operator("tangle.free_bake", icon="TRASH")
            if settings.status:
                layout.label(text=settings.status)
        if settings.live_stats:
            layout.label(text=settings.live_stats, icon="INFO")
        if settings.last_error:
            layout.label(text=settings.last_error, icon="ERROR")
        layout.operator("tangle.check_scene", icon="CHECKMARK")
        for blocking, heading, icon in ((True, "Fix before baking", "ERROR"), (False, "Bakes, but check", "INFO")):
            listed = [problem for problem in settings.problems if problem.blocking == blocking]
            if listed:
                box = layout.box()
                box.label(text=f"{heading} ({len(listed)}):", icon=icon)
                for problem in listed:
                    box.label(text=f"{problem.object_name}: {problem.message}")


class TANGLE_PT_object_maps(_PhysicsTab, bpy.types.Panel):
    """Painted maps: a vertex group (meshes) or a point/curve attribute (Curves hair) per paintable parameter."""

    bl_label = "Painted Maps"
    bl_parent_id = "TANGLE_PT_object"
    bl_options = {"DEFAULT_CLOSED"}

    @classmethod
    def poll(cls, context):
        obj = context.object
        role = obj.tangle.role if obj is not None else "NONE"
        return (role in {"CLOTH", "SOFTBODY"} and obj.type == "MESH") or (role == "HAIR" and obj.type == "CURVES")

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        obj = context.object
        settings = obj.tangle
        if settings.role == "HAIR":
            group, specs, owner, collection = settings.hair, paintable(HAIR_PARAMS, settings.hair.model), obj.data, \
                "attributes"
            layout.label(text="Float attributes: 1 full value, 0 the value × At Weight 0", icon="INFO")
        else:
            group, table = (settings.cloth, CLOTH_PARAMS) if settings.role == "CLOTH" \
                else (settings.softbody, SOFTBODY_PARAMS)
            specs, owner, collection = paintable(table), obj, "vertex_groups"
            layout.label(text="Vertex groups: weight 1 full value, 0 the value × At Weight 0", icon="INFO")
        for spec in specs:
            column = layout.column(align=True)
            column.prop_search(group, spec.name + MAP_SUFFIX, owner, collection)
            if getattr(group, spec.name + MAP_SUFFIX):
                column.prop(group, spec.name + AT_ZERO_SUFFIX)


# ---- bake workflow: connection profile / local server, output route, resume and re-bake (engineer #2) ----

class TANGLE_PT_bake_workflow(_PhysicsTab, bpy.types.Panel):
    bl_label = "Connection, Output, Resume"
    bl_parent_id = "TANGLE_PT_bake"

    def draw(self, context):
        from . import bake_output
        from .core.bake_state import stored_text
        from .preferences import addon_preferences

        layout = self.layout
        layout.use_property_split = True
        settings = context.scene.tangle
        prefs = addon_preferences(context)
        if prefs is not None:
            layout.prop_search(settings, "server_profile", prefs, "profiles")
        server = running_local_server()
        row = layout.row(align=True)
        if server is None:
            row.operator("tangle.start_local_server", icon="PLAY")
        else:
            row.label(text=f"Local server: {server.address}", icon="CHECKMARK")
            row.operator("tangle.stop_local_server", text="", icon="X")
        layout.prop(settings, "output_route")
        layout.prop(settings, "hair_cache")
        layout.prop(settings, "checkpoint_every")
        record = bake_output.load_record(context.scene)
        if record is not None:
            complete = record.last_frame is not None and record.last_frame >= record.frame_end
            layout.label(text=stored_text(record).capitalize(), icon="CHECKMARK" if complete else "TIME")
        row = layout.row(align=True)
        row.operator("tangle.resume_bake", icon="PLAY")
        row.operator("tangle.rebake_from_frame", text=f"Re-bake from Frame {context.scene.frame_current}",
                     icon="FILE_REFRESH")

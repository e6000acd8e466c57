"""Tangle panels in the Physics properties tab: the object's role and parameters, and the scene bake."""

import bpy

from .bake_io import is_animated
from .core.param_table import CLOTH_PARAMS, COLLIDER_PARAMS
from .operators.bake import active_session


class TANGLE_PT_object(bpy.types.Panel):
    bl_label = "Tangle"
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "physics"

    @classmethod
    def poll(cls, context):
        return context.object is not None

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        obj = context.object
        settings = obj.tangle
        layout.prop(settings, "role")
        if settings.role == "CLOTH":
            if obj.type != "MESH":
                layout.label(text="Cloth needs a mesh object", icon="ERROR")
                return
            layout.prop_search(settings, "pin_group", obj, "vertex_groups")
            column = layout.column(align=True)
            for spec in CLOTH_PARAMS:
                column.prop(settings.cloth, spec.name)
            if settings.baked_topology:
                layout.label(text="Baked (shape keys tangle_f####)", icon="CHECKMARK")
        elif settings.role == "COLLIDER":
            layout.prop(settings, "collider_shape")
            column = layout.column(align=True)
            for spec in COLLIDER_PARAMS:
                column.prop(settings.collider, spec.name)
            layout.label(text="Animated: sent every frame" if is_animated(obj) else "Static",
                         icon="ANIM" if is_animated(obj) else "OBJECT_DATA")
        elif settings.role in {"HAIR", "SOFTBODY"}:
            layout.label(text="This role is not baked by this version yet", icon="INFO")


class TANGLE_PT_bake(bpy.types.Panel):
    bl_label = "Tangle Bake"
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "physics"

    def draw(self, context):
        layout = self.layout
        layout.use_property_split = True
        settings = context.scene.tangle
        row = layout.row(align=True)
        row.prop(settings, "server_address")
        row.operator("tangle.test_connection", text="", icon="LINKED")
        if settings.server_info:
            layout.label(text=settings.server_info, icon="CHECKMARK")
        layout.prop(settings, "timeout")
        layout.prop(settings, "substeps")
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


# ---- bake workflow: connection profile / local server, output route, resume and re-bake (engineer #2) ----

class TANGLE_PT_bake_workflow(bpy.types.Panel):
    bl_label = "Connection, Output, Resume"
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "physics"
    bl_parent_id = "TANGLE_PT_bake"

    def draw(self, context):
        from .bake_session import continuation_frames
        from .operators.server import running_local_server
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
        layout.prop(settings, "checkpoint_every")
        resume_frame, last_frame = continuation_frames(context.scene)
        if last_frame is not None:
            layout.label(text=f"Baked up to frame {last_frame}", icon="CHECKMARK")
        row = layout.row(align=True)
        row.operator("tangle.resume_bake", icon="PLAY")
        row.operator("tangle.rebake_from_frame", text=f"Re-bake from Frame {context.scene.frame_current}",
                     icon="FILE_REFRESH")

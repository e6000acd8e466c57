"""Add-on preferences: server profiles (address + CURVE key files) and the local server's interpreter.

Profiles live in the user's preferences (per machine, never in the .blend: key files are local
paths). A scene picks one by name (``Scene.tangle.server_profile``); with none picked, the scene's own
address is used without encryption. :func:`scene_connection` resolves what a bake or a connection
test uses.
"""

from __future__ import annotations

import sys

import bpy
from bpy.props import CollectionProperty, EnumProperty, IntProperty, StringProperty
from bpy.types import AddonPreferences, PropertyGroup, UIList

from .session import setup_in_progress

PROFILE_ADDRESS_EXAMPLE = "tcp://127.0.0.1:5555"   # a new profile's address, to be edited

ADDON_PACKAGE = __package__


class TangleServerProfile(PropertyGroup):
    """One solver server the artist can pick per scene (``name`` is the profile's label)."""

    address: StringProperty(name="Address", default=PROFILE_ADDRESS_EXAMPLE,
                            description="ZeroMQ address of the solver server, e.g. tcp://gpu-box:5555")
    server_public_key_file: StringProperty(
        name="Server Public Key", subtype="FILE_PATH",
        description="The server's public certificate (server.key from --generate-keys); empty = no encryption "
                    "(loopback or SSH tunnel only)")
    client_secret_key_file: StringProperty(
        name="Client Secret Key", subtype="FILE_PATH",
        description="This machine's secret certificate (NAME.key_secret), whose public key the server authorized")


class TANGLE_UL_server_profiles(UIList):
    def draw_item(self, context, layout, data, item, icon, active_data, active_propname, index=0):
        row = layout.row(align=True)
        row.prop(item, "name", text="", emboss=False, icon="LOCKED" if item.server_public_key_file else "UNLOCKED")
        row.label(text=item.address)


class TanglePreferences(AddonPreferences):
    bl_idname = ADDON_PACKAGE

    profiles: CollectionProperty(type=TangleServerProfile, name="Server Profiles")
    active_profile_index: IntProperty(name="Active Profile", default=0, min=0)
    python_path: StringProperty(
        name="Server Python", subtype="FILE_PATH",
        description="Python interpreter that runs 'python -m solver_server' for Start Local Server "
                    "(empty: Blender's own Python, if it has the solver server and its packages)")
    solver_path: StringProperty(
        name="Solver Folder", subtype="DIR_PATH",
        description="Folder containing the solver_server package, added to PYTHONPATH (empty: installed)")
    wheel_folder: StringProperty(
        name="Wheel Folder", subtype="DIR_PATH",
        description="Set Up Local Solver installs the solver's packages from the wheels in this folder only, with "
                    "no network (empty: download them from PyPI)")
    setup_status: StringProperty(name="Set-Up Status", default="",
                                 description="Outcome of the last Set Up Local Solver")
    setup_log: StringProperty(name="Set-Up Log", default="",
                              description="The failing step's last output lines of the last set-up, if it failed")
    local_device: EnumProperty(name="Device", default="cpu",
                               items=(("cpu", "CPU", "numpy/scipy"), ("cuda", "CUDA", "CuPy on the GPU")),
                               description="Backend of the local solver server")

    def draw(self, context):
        layout = self.layout
        layout.label(text="Server Profiles")
        row = layout.row()
        row.template_list("TANGLE_UL_server_profiles", "", self, "profiles", self, "active_profile_index", rows=3)
        column = row.column(align=True)
        column.operator("tangle.profile_add", icon="ADD", text="")
        column.operator("tangle.profile_remove", icon="REMOVE", text="")
        if 0 <= self.active_profile_index < len(self.profiles):
            profile = self.profiles[self.active_profile_index]
            box = layout.box()
            box.use_property_split = True
            box.prop(profile, "name")
            box.prop(profile, "address")
            box.prop(profile, "server_public_key_file")
            box.prop(profile, "client_secret_key_file")
        layout.separator()
        layout.label(text="Local Server")
        progress = setup_in_progress()
        row = layout.row(align=True)
        if progress is None:
            row.operator("tangle.setup_local_solver", icon="IMPORT")
            if self.setup_status:
                layout.label(text=self.setup_status,
                             icon="ERROR" if self.setup_status.startswith("Set-up failed") else "CHECKMARK")
        else:
            row.progress(factor=progress.fraction, type="BAR", text=progress.text or "Setting up...")
            row.operator("tangle.cancel_solver_setup", text="", icon="CANCEL")
        column = layout.column()
        column.use_property_split = True
        column.prop(self, "wheel_folder")
        column.prop(self, "python_path")
        column.prop(self, "solver_path")
        column.prop(self, "local_device")


class TANGLE_OT_profile_add(bpy.types.Operator):
    """Add a server profile"""

    bl_idname = "tangle.profile_add"
    bl_label = "Add Server Profile"

    def execute(self, context):
        prefs = addon_preferences(context)
        if prefs is None:
            self.report({"ERROR"}, "Tangle add-on preferences are not available (add-on not enabled)")
            return {"CANCELLED"}
        profile = prefs.profiles.add()
        profile.name = f"Server {len(prefs.profiles)}"
        prefs.active_profile_index = len(prefs.profiles) - 1
        return {"FINISHED"}


class TANGLE_OT_profile_remove(bpy.types.Operator):
    """Remove the selected server profile"""

    bl_idname = "tangle.profile_remove"
    bl_label = "Remove Server Profile"

    @classmethod
    def poll(cls, context):
        prefs = addon_preferences(context)
        return prefs is not None and 0 <= prefs.active_profile_index < len(prefs.profiles)

    def execute(self, context):
        prefs = addon_preferences(context)
        prefs.profiles.remove(prefs.active_profile_index)
        prefs.active_profile_index = max(0, min(prefs.active_profile_index, len(prefs.profiles) - 1))
        return {"FINISHED"}


classes = (TangleServerProfile, TANGLE_UL_server_profiles, TanglePreferences, TANGLE_OT_profile_add,
           TANGLE_OT_profile_remove)


def addon_preferences(context=None):
    """The add-on's preferences, or None when the add-on was registered without being enabled
    (e.g. ``blender_addon.register()`` from a script): then there are no profiles."""
    context = context or bpy.context
    addon = context.preferences.addons.get(ADDON_PACKAGE)
    return addon.preferences if addon is not None else None


def local_server_python(context=None) -> tuple[str, tuple[str, ...], str]:
    """(interpreter, extra PYTHONPATH folders, device) for Start Local Server."""
    prefs = addon_preferences(context)
    if prefs is None:
        return sys.executable, (), "cpu"
    python = bpy.path.abspath(prefs.python_path) if prefs.python_path else sys.executable
    extra = (bpy.path.abspath(prefs.solver_path),) if prefs.solver_path else ()
    return python, extra, prefs.local_device

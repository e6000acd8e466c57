"""What the real-Blender scenario scripts (scenarios.py, roles_scenarios.py, workflow_scenarios.py) share:
loading the add-on, building objects, reading back baked positions, recording what panels draw, and the
command-line protocol of a scenario script:

    python SCRIPT.py SCENARIO JSON_ARGS   ->  prints one line "RESULT <json>" with measurements

Runs inside the bpy subprocess only (imports bpy).
"""

import importlib
import json
import os
import sys
from pathlib import Path

import bpy
import numpy as np

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


# ---- the add-on --------------------------------------------------------------------------------

def _import_from_repository() -> None:
    """Make the source tree importable (``blender_addon``, ``protocol``), once."""
    if str(REPOSITORY_ROOT) not in sys.path:
        sys.path.insert(0, str(REPOSITORY_ROOT))


def load_addon(mode: str, zip_path: str | None) -> dict:
    """Install the built extension zip ("zip") or register from the source tree ("source")."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    if mode == "zip":
        result = bpy.ops.extensions.package_install_files(filepath=zip_path, repo="user_default",
                                                         enable_on_install=True)
        module = sys.modules.get("bl_ext.user_default.tangle")
        return {"install_result": sorted(result), "enabled": "bl_ext.user_default.tangle" in
                bpy.context.preferences.addons, "module_file": getattr(module, "__file__", None),
                "protocol_module": importlib.import_module("bl_ext.user_default.tangle._protocol").PROTOCOL_PACKAGE}
    _import_from_repository()
    import blender_addon

    blender_addon.register()
    return {"enabled": True, "module_file": blender_addon.__file__}


def enable_addon(keep_file: bool = False) -> None:
    """Enable the add-on from the source tree the way Blender does (so its preferences exist), in
    factory settings or (``keep_file``) on the open file."""
    import addon_utils

    _import_from_repository()
    if not keep_file:
        bpy.ops.wm.read_factory_settings(use_empty=True)
    addon_utils.enable("blender_addon", default_set=True, handle_error=None)


def call(operator) -> dict:
    """Run an operator; bpy raises RuntimeError when it reports an ERROR, which is data here."""
    try:
        return {"result": sorted(operator()), "error": None}
    except RuntimeError as error:
        return {"result": ["RAISED"], "error": str(error)}


def bake_scene(frames: int, substeps: int, address: str | None = None) -> bpy.types.Scene:
    """The current scene set to bake frames 1..``frames`` with ``substeps`` solver steps per frame (on the
    server at ``address`` when given)."""
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frames
    scene.tangle.substeps = substeps
    if address is not None:
        scene.tangle.server_address = address
    return scene


def bake_cancelled_after(scene: bpy.types.Scene, frames: int, package: str = "blender_addon",
                         timeout_s: float = 60.0):
    """A bake of ``scene`` driven the way the modal timer drives it (``BakeSession.handle_pending`` every
    20 ms), cancelled once ``frames`` frames are baked; the finished session (``package``: where the add-on
    is imported from, e.g. an installed extension)."""
    import time

    session = importlib.import_module(f"{package}.bake_session").BakeSession(scene).start()
    deadline = time.monotonic() + timeout_s
    while not session.finished and time.monotonic() < deadline:
        time.sleep(0.02)
        session.handle_pending()
        if session.progress.frames_done >= frames and session.worker is not None:
            session.cancel()
    return session


def bake(scene: bpy.types.Scene) -> dict:
    """Run the bake operator: {"bake_result": call(...), "last_error": the scene's last error}."""
    return {"bake_result": call(bpy.ops.tangle.bake), "last_error": scene.tangle.last_error}


# ---- objects -----------------------------------------------------------------------------------

def linked_object(name: str, data) -> bpy.types.Object:
    """A new object named ``name`` holding ``data`` (None: an empty), linked to the current scene."""
    obj = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def grid_object(name: str, n: int, size: float, height: float) -> bpy.types.Object:
    """n x n vertex grid of side ``size`` [m] (the demo's ``grid_mesh``, vertex i*n + j at row i, column j)
    centred above the origin at ``height`` [m]."""
    _import_from_repository()
    demo = importlib.import_module("blender_addon.demo")
    obj = linked_object(name, demo.grid_mesh(name, n, size))
    obj.location = (0.0, 0.0, height)
    return obj


def mesh_object(name: str, operator, location=(0.0, 0.0, 0.0), **kwargs) -> bpy.types.Object:
    """A mesh primitive made by ``operator`` (e.g. bpy.ops.mesh.primitive_cube_add), object and mesh
    named ``name``."""
    operator(location=location, **kwargs)
    obj = bpy.context.active_object
    obj.name = obj.data.name = name
    return obj


# ---- reading back ------------------------------------------------------------------------------

def evaluated_world_positions(obj, frame: int, subframe: float = 0.0) -> np.ndarray:
    """World positions (N, 3) [m] of the evaluated (shape-key animated) mesh at ``frame`` + ``subframe``."""
    bpy.context.scene.frame_set(frame, subframe=subframe)
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = evaluated.to_mesh()
    local = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", local)
    evaluated.to_mesh_clear()
    matrix = np.array(obj.matrix_world)
    return local.reshape(-1, 3) @ matrix[:3, :3].T + matrix[:3, 3]


def shape_key_summary(obj) -> dict:
    key = obj.data.shape_keys
    if key is None:
        return {"names": [], "fcurves": 0, "has_action": False}
    action = key.animation_data.action if key.animation_data else None
    fcurves = list(action.fcurves) if action else []
    return {
        "names": [block.name for block in key.key_blocks],
        "has_action": action is not None,
        "fcurves": len(fcurves),
        "interpolations": sorted({point.interpolation for fc in fcurves for point in fc.keyframe_points}),
        "keys_of_frame_5": sorted((point.co[0], point.co[1]) for fc in fcurves
                                  if fc.data_path == 'key_blocks["tangle_f0005"].value' for point in fc.keyframe_points),
    }


def entries_by_id(scene_dict: dict) -> dict[str, dict]:
    """The objects of an exported scene dict by their id."""
    return {entry["id"]: entry for entry in scene_dict["objects"]}


# ---- what panels draw --------------------------------------------------------------------------

class LayoutRecorder:
    """Stands in for bpy.types.UILayout (none exists without a window): records what a panel draws as
    ("prop", data, name), ("operator", idname), ("menu", name) and ("label", text) tuples."""

    def __init__(self, calls):
        self.calls = calls
        self.use_property_split = False

    def _container(self, *args, **kwargs):
        return self

    column = row = box = split = _container

    def prop(self, data, name, **kwargs):
        self.calls.append(("prop", data, name))

    def prop_search(self, data, name, search_data, search_name, **kwargs):
        self.calls.append(("prop", data, name))
        self.calls.append(("prop", search_data, search_name))

    def operator(self, idname, **kwargs):
        self.calls.append(("operator", idname))

    def menu(self, menu, **kwargs):
        self.calls.append(("menu", menu))

    def label(self, text="", **kwargs):
        self.calls.append(("label", text))

    def progress(self, **kwargs):
        self.calls.append(("progress", kwargs.get("text", "")))


def draw_panels(panel_classes, **context_members) -> list[tuple]:
    """What the panels draw (LayoutRecorder calls) in a context made of ``context_members``."""
    calls = []
    context = type("Context", (), context_members)()
    for panel in panel_classes:
        panel.draw(type("Panel", (), {"layout": LayoutRecorder(calls)})(), context)
    return calls


def drawn(calls: list[tuple], kind: str) -> list:
    """The argument of every recorded call of ``kind``: operator idnames, menu names, label texts; for
    "prop", the property names."""
    return [rest[-1] for call_kind, *rest in calls if call_kind == kind]


def missing_from_rna(calls: list[tuple]) -> list[str]:
    """Drawn properties, operators and menus that do not exist in Blender's RNA."""
    missing = [f"{type(data).__name__}.{name}" for kind, *rest in calls if kind == "prop"
               for data, name in [rest] if name not in data.bl_rna.properties]
    missing += [idname for idname in drawn(calls, "operator")
                if not hasattr(getattr(bpy.ops, idname.split(".")[0]), idname.split(".")[1])]
    return missing + [menu for menu in drawn(calls, "menu") if not hasattr(bpy.types, menu)]


# ---- command line ------------------------------------------------------------------------------

def run_from_command_line(scenarios: dict) -> None:
    """``python SCRIPT.py NAME JSON_ARGS``: run ``scenarios["scenario_" + NAME](args)`` and print
    "RESULT <json>"; then exit at once, skipping the bpy module's teardown (it can stall at exit, in
    static destructors after the leak detector, and the result is already out)."""
    name, arguments = sys.argv[1], json.loads(sys.argv[2])
    outcome = scenarios[f"scenario_{name}"](arguments)
    print("RESULT " + json.dumps(outcome))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)

"""Real-Blender scenarios, each run in a fresh subprocess by test_*.py (bpy can be imported only once
per process, and its state must not leak between tests).

    python scenarios.py SCENARIO JSON_ARGS   ->  prints one line "RESULT <json>" with measurements

Assertions live in the pytest modules; this file only drives Blender and measures.
"""

import importlib
import json
import os
import sys
from pathlib import Path

import bpy
import numpy as np

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


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
    sys.path.insert(0, str(REPOSITORY_ROOT))
    import blender_addon

    blender_addon.register()
    return {"enabled": True, "module_file": blender_addon.__file__}


def call(operator) -> dict:
    """Run an operator; bpy raises RuntimeError when it reports an ERROR, which is data here."""
    try:
        return {"result": sorted(operator()), "error": None}
    except RuntimeError as error:
        return {"result": ["RAISED"], "error": str(error)}


def grid_object(name: str, n: int, size: float, height: float) -> bpy.types.Object:
    """n x n vertex grid centred above the origin at ``height`` [m]."""
    xs = np.linspace(-size / 2, size / 2, n)
    x, y = np.meshgrid(xs, xs, indexing="xy")
    vertices = np.stack([x.ravel(), y.ravel(), np.zeros(n * n)], axis=1)
    corner = (np.arange(n - 1)[None, :] + n * np.arange(n - 1)[:, None]).ravel()
    quads = np.stack([corner, corner + 1, corner + n + 1, corner + n], axis=1)
    mesh = bpy.data.meshes.new(name)
    mesh.from_pydata(vertices.tolist(), [], quads.tolist())
    obj = bpy.data.objects.new(name, mesh)
    bpy.context.scene.collection.objects.link(obj)
    obj.location = (0.0, 0.0, height)
    return obj


def evaluated_world_positions(obj, frame: int) -> np.ndarray:
    """World positions (N, 3) of the evaluated (shape-key animated) mesh at ``frame``."""
    scene = bpy.context.scene
    scene.frame_set(frame)
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


def scenario_bake_grid(args: dict) -> dict:
    """Pinned cloth grid, 10 frames, bake -> inspect playback -> free bake."""
    result = {"addon": load_addon(args["mode"], args.get("zip"))}
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 10
    scene.tangle.server_address = args["address"]
    scene.tangle.substeps = 4
    n = 8
    sheet = grid_object("Sheet", n, 1.0, 1.0)
    sheet.rotation_euler = (0.0, 0.0, 0.5)  # results come back in world space: the bake must undo this
    pins = sheet.vertex_groups.new(name="pins")
    pinned = [n * (n - 1), n * n - 1]
    pins.add(pinned, 1.0, "REPLACE")
    sheet.tangle.role = "CLOTH"

    # Bad input first: a missing pin group is refused before anything is sent.
    sheet.tangle.pin_group = "no_such_group"
    result["bad_pin_group"] = call(bpy.ops.tangle.bake) | {"last_error": scene.tangle.last_error,
                                                          "shape_keys": sheet.data.shape_keys is not None}
    sheet.tangle.pin_group = "pins"

    # A parameter the server refuses: the bake fails with the server's message naming object and key.
    sheet.tangle.cloth.strain_limits = (1.5, 2.0)
    result["server_refused"] = call(bpy.ops.tangle.bake) | {"last_error": scene.tangle.last_error,
                                                           "shape_keys": sheet.data.shape_keys is not None}
    sheet.tangle.cloth.strain_limits = (1.0, 1.0)

    rest = evaluated_world_positions(sheet, 1)
    result["bake_result"] = call(bpy.ops.tangle.bake)
    result["status"] = scene.tangle.status
    result["live_stats"] = scene.tangle.live_stats
    result["connection"] = call(bpy.ops.tangle.test_connection) | {"server_info": scene.tangle.server_info}
    scene.tangle.server_address, scene.tangle.timeout = "tcp://127.0.0.1:9", 1.0
    result["connection_refused"] = call(bpy.ops.tangle.test_connection) | {
        "server_info": scene.tangle.server_info, "last_error": scene.tangle.last_error}
    scene.tangle.server_address, scene.tangle.last_error = args["address"], ""
    result["last_error"] = scene.tangle.last_error
    result["baked_topology"] = sheet.tangle.baked_topology
    result["shape_keys"] = shape_key_summary(sheet)
    frames = {frame: evaluated_world_positions(sheet, frame) for frame in (1, 5, 10)}
    frame_5_5 = None
    scene.frame_set(5, subframe=0.5)
    evaluated = sheet.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = evaluated.to_mesh()
    local = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", local)
    evaluated.to_mesh_clear()
    frame_5_5 = local.reshape(-1, 3) @ np.array(sheet.matrix_world)[:3, :3].T + np.array(sheet.matrix_world)[:3, 3]
    free_vertices = np.setdiff1d(np.arange(n * n), pinned)
    result["pinned_drift"] = {f: float(np.abs(p[pinned] - rest[pinned]).max()) for f, p in frames.items()}
    result["free_drop"] = {f: float((rest[free_vertices, 2] - p[free_vertices, 2]).min()) for f, p in frames.items()}
    far_edge = np.arange(n)  # the row opposite the pinned corners
    result["far_edge_drop"] = {f: float((rest[far_edge, 2] - p[far_edge, 2]).mean()) for f, p in frames.items()}
    result["first_frame_error"] = float(np.abs(frames[1] - rest).max())
    six = evaluated_world_positions(sheet, 6)
    result["subframe_error"] = float(np.abs(frame_5_5 - 0.5 * (frames[5] + six)).max())
    # A refused re-bake leaves the existing bake untouched.
    sheet.tangle.cloth.strain_limits = (1.5, 2.0)
    result["refused_rebake"] = call(bpy.ops.tangle.bake)["result"]
    result["keys_after_refused_rebake"] = len(sheet.data.shape_keys.key_blocks)
    sheet.tangle.cloth.strain_limits = (1.0, 1.0)
    result["free_result"] = call(bpy.ops.tangle.free_bake)
    result["after_free"] = shape_key_summary(sheet)
    result["after_free_topology"] = sheet.tangle.baked_topology
    result["after_free_matches_rest"] = float(np.abs(evaluated_world_positions(sheet, 10) - rest).max())
    result["free_poll_after"] = bpy.ops.tangle.free_bake.poll()
    return result


def scenario_sphere_collider(args: dict) -> dict:
    """Cloth dropped on a scaled sphere collider that rises (animated): no vertex may enter it."""
    result = {"addon": load_addon("source", None)}
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, args["frames"]
    scene.tangle.server_address = args["address"]
    scene.tangle.substeps = 8
    sheet = grid_object("Sheet", 12, 1.2, 0.9)
    sheet.tangle.role = "CLOTH"
    bpy.ops.mesh.primitive_uv_sphere_add(radius=1.0)
    ball = bpy.context.active_object
    ball.name = "Ball"
    ball.scale = (0.3, 0.3, 0.3)  # the shape is sent in local space (radius 1) with a scaled matrix
    ball.tangle.role, ball.tangle.collider_shape = "COLLIDER", "SPHERE"
    for frame, z in ((1, 0.3), (args["frames"], 0.6)):
        ball.location = (0.0, 0.0, z)
        ball.keyframe_insert("location", frame=frame)
    from importlib import import_module

    bake_io = import_module("blender_addon.bake_io")
    result["ball_animated"] = bake_io.is_animated(ball)
    result["sheet_animated"] = bake_io.is_animated(sheet)
    # Animation reaches objects in other ways too: through a parent, a constraint, a deforming modifier.
    rig = bpy.data.objects.new("Rig", None)
    child = bpy.data.objects.new("Child", None)
    constrained = bpy.data.objects.new("Constrained", None)
    waved = bpy.data.objects.new("Waved", bpy.data.meshes.new("Waved"))
    for obj in (rig, child, constrained, waved):
        scene.collection.objects.link(obj)
    child.parent = rig
    result["child_of_static_parent_animated"] = bake_io.is_animated(child)
    rig.keyframe_insert("location", frame=1)
    constrained.constraints.new("COPY_LOCATION").target = ball
    waved.modifiers.new("Wave", "WAVE")
    result["child_of_animated_parent_animated"] = bake_io.is_animated(child)
    result["constrained_animated"] = bake_io.is_animated(constrained)
    result["deformed_animated"] = bake_io.is_animated(waved)
    for obj in (rig, child, constrained, waved):
        bpy.data.objects.remove(obj)
    result["bake_result"] = call(bpy.ops.tangle.bake)
    result["last_error"] = scene.tangle.last_error
    clearance, lowest = [], []
    for frame in range(1, args["frames"] + 1):
        positions = evaluated_world_positions(sheet, frame)
        center = np.array(ball.matrix_world.translation)
        clearance.append(float(np.linalg.norm(positions - center, axis=1).min()))
        lowest.append(float(positions[:, 2].min()))
    result["clearance"] = clearance
    result["center_z_last"] = float(np.array(ball.matrix_world.translation)[2])
    result["lowest"] = lowest
    return result


def scenario_cancel_and_server_loss(args: dict) -> dict:
    """Drive BakeSession the way the modal timer does (handle_pending), cancel mid-bake; then bake
    again and kill the server mid-bake. Frames baked so far must be kept and the last pose must hold."""
    import time

    result = {"addon": load_addon("source", None)}
    bake_session = importlib.import_module("blender_addon.bake_session")
    local_server = importlib.import_module("blender_addon.core.local_server")
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 400
    scene.tangle.substeps = 2
    scene.tangle.timeout = 2.0
    n = 6
    sheet = grid_object("Sheet", n, 1.0, 1.0)
    sheet.vertex_groups.new(name="pins").add([n * (n - 1), n * n - 1], 1.0, "REPLACE")
    sheet.tangle.role, sheet.tangle.pin_group = "CLOTH", "pins"

    def run(stop_after_frames: int, stop):
        session = bake_session.BakeSession(scene).start()
        deadline = time.monotonic() + 60
        stopped = False
        while not session.finished and time.monotonic() < deadline:
            time.sleep(0.05)  # the modal operator's timer tick
            session.handle_pending()
            if not stopped and session.progress.frames_done >= stop_after_frames:
                stop(session)
                stopped = True
        outcome = session.outcome
        keys = [b.name for b in sheet.data.shape_keys.key_blocks] if sheet.data.shape_keys else []
        last = outcome.frames_baked
        held = float(np.abs(evaluated_world_positions(sheet, last + 7) - evaluated_world_positions(sheet, last)).max())
        moved = float(np.abs(evaluated_world_positions(sheet, last) - evaluated_world_positions(sheet, 1)).max())
        return {"state": outcome.state, "frames_baked": outcome.frames_baked, "message": outcome.message,
                "keys": keys, "status": scene.tangle.status, "last_pose_held": held, "moved": moved}

    with local_server.LocalServer() as address:
        scene.tangle.server_address = address
        result["cancel"] = run(5, lambda session: session.cancel())
    server = local_server.LocalServer()
    scene.tangle.server_address = server.start()
    try:
        result["server_loss"] = run(5, lambda session: server.process.kill())
    finally:
        server.stop()
    return result


class LayoutRecorder:
    """Stands in for bpy.types.UILayout (none exists without a window): records what a panel draws."""

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


def scenario_panels(args: dict) -> dict:
    """Draw both panels for every role; every drawn property and operator must exist in RNA."""
    load_addon("source", None)
    panels = importlib.import_module("blender_addon.panels")
    scene = bpy.context.scene
    sheet = grid_object("Sheet", 3, 1.0, 1.0)
    sheet.vertex_groups.new(name="pins")
    report = {}
    for role in ("NONE", "HAIR", "CLOTH", "SOFTBODY", "COLLIDER"):
        sheet.tangle.role = role
        calls = []
        context = type("Context", (), {"object": sheet, "scene": scene})()
        for panel in (panels.TANGLE_PT_object, panels.TANGLE_PT_bake):
            panel.draw(type("Panel", (), {"layout": LayoutRecorder(calls)})(), context)
        missing = [f"{type(data).__name__}.{name}" for kind, *rest in calls if kind == "prop"
                   for data, name in [rest] if name not in data.bl_rna.properties]
        operators = [rest[0] for kind, *rest in calls if kind == "operator"]
        missing += [idname for idname in operators
                    if not hasattr(getattr(bpy.ops, idname.split(".")[0]), idname.split(".")[1])]
        report[role] = {"props": sum(kind == "prop" for kind, *_ in calls), "operators": operators,
                        "labels": [rest[0] for kind, *rest in calls if kind == "label"], "missing": missing}
    return report


def scenario_save_for_cli(args: dict) -> dict:
    """Write a .blend with a marked cloth grid (for the headless CLI bake test)."""
    load_addon("source", None)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, 6
    sheet = grid_object("Sheet", 6, 1.0, 1.0)
    sheet.vertex_groups.new(name="pins").add([30, 35], 1.0, "REPLACE")
    sheet.tangle.role, sheet.tangle.pin_group = "CLOTH", "pins"
    bpy.ops.wm.save_as_mainfile(filepath=args["path"])
    return {"saved": args["path"]}


def scenario_inspect_without_addon(args: dict) -> dict:
    """Open a baked .blend WITHOUT the add-on and play it back from the keyframes alone."""
    bpy.ops.wm.open_mainfile(filepath=args["path"])
    sheet = bpy.data.objects["Sheet"]
    first = evaluated_world_positions(sheet, 1)
    last = evaluated_world_positions(sheet, 6)
    return {"shape_keys": shape_key_summary(sheet)["names"],
            "pinned_drift": float(np.abs(last[[30, 35]] - first[[30, 35]]).max()),
            "max_drop": float((first[:, 2] - last[:, 2]).max())}


if __name__ == "__main__":
    name, arguments = sys.argv[1], json.loads(sys.argv[2])
    outcome = globals()[f"scenario_{name}"](arguments)
    print("RESULT " + json.dumps(outcome))
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip the bpy module's teardown: it can stall at exit (static destructors after the leak
    # detector), and the result is already out.
    os._exit(0)

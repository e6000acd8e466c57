"""Real-Blender scenarios, each run in a fresh subprocess by test_*.py (bpy can be imported only once
per process, and its state must not leak between tests).

    python scenarios.py SCENARIO JSON_ARGS   ->  prints one line "RESULT <json>" with measurements

Assertions live in the pytest modules; this file only drives Blender and measures.
"""

import importlib

import bpy
import numpy as np

from scenario_helpers import (bake, bake_scene, call, draw_panels, drawn, evaluated_world_positions, grid_object,
                              linked_object, load_addon, mesh_object, missing_from_rna, run_from_command_line, shape_key_summary)


def scenario_bake_grid(args: dict) -> dict:
    """Pinned cloth grid, 10 frames, bake -> inspect playback -> free bake."""
    result = {"addon": load_addon(args["mode"], args.get("zip"))}
    scene = bake_scene(10, 4, args["address"])
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

    # A parameter the server would refuse: Check Scene refuses it first, naming object and setting.
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
    frame_5_5 = evaluated_world_positions(sheet, 5, subframe=0.5)
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
    result["free_again"] = call(bpy.ops.tangle.free_bake)          # greyed button: the reason, not "context"
    return result


def scenario_sphere_collider(args: dict) -> dict:
    """Cloth dropped on a scaled sphere collider that rises (animated): no vertex may enter it."""
    result = {"addon": load_addon("source", None)}
    scene = bake_scene(args["frames"], 8, args["address"])
    sheet = grid_object("Sheet", 12, 1.2, 0.9)
    sheet.tangle.role = "CLOTH"
    ball = mesh_object("Ball", bpy.ops.mesh.primitive_uv_sphere_add, radius=1.0)
    ball.scale = (0.3, 0.3, 0.3)  # the shape is sent in local space (radius 1) with a scaled matrix
    ball.tangle.role, ball.tangle.collider_shape = "COLLIDER", "SPHERE"
    for frame, z in ((1, 0.3), (args["frames"], 0.6)):
        ball.location = (0.0, 0.0, z)
        ball.keyframe_insert("location", frame=frame)
    bake_io = importlib.import_module("blender_addon.bake_io")
    result["ball_animated"] = bake_io.is_animated(ball)
    result["sheet_animated"] = bake_io.is_animated(sheet)
    # Animation reaches objects in other ways too: through a parent, a constraint, a deforming modifier.
    rig, child, constrained = (linked_object(name, None) for name in ("Rig", "Child", "Constrained"))
    waved = linked_object("Waved", bpy.data.meshes.new("Waved"))
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
    result |= bake(scene)
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


def scenario_preroll(args: dict) -> dict:
    """A cloth above a still sphere baked with a pre-roll: the panel's Pre-roll reaches the scene sent, and the
    first baked frame already lies on the sphere instead of being the input state."""
    result = {"addon": load_addon("source", None)}
    scene = bake_scene(args["frames"], 4, args["address"])
    scene.tangle.preroll = args["preroll"]
    sheet = grid_object("Sheet", 10, 1.0, 0.5)
    sheet.tangle.role = "CLOTH"
    ball = mesh_object("Ball", bpy.ops.mesh.primitive_uv_sphere_add, radius=0.3)
    ball.tangle.role, ball.tangle.collider_shape = "COLLIDER", "SPHERE"
    export = importlib.import_module("blender_addon.export")
    result["exported_time"] = export.export_scene(scene)[0]["time"]
    rest = evaluated_world_positions(sheet, 1)
    result |= bake(scene)
    result["status"] = scene.tangle.status
    first = evaluated_world_positions(sheet, 1)
    result["first_frame_drop"] = float((rest[:, 2] - first[:, 2]).max())
    result["first_frame_clearance"] = float(np.linalg.norm(first, axis=1).min())   # the ball's centre: the origin
    result["last_frame_clearance"] = float(np.linalg.norm(evaluated_world_positions(sheet, args["frames"]),
                                                          axis=1).min())
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
        calls = draw_panels((panels.TANGLE_PT_object, panels.TANGLE_PT_bake), object=sheet, scene=scene)
        report[role] = {"props": len(drawn(calls, "prop")), "operators": drawn(calls, "operator"),
                        "labels": drawn(calls, "label"), "missing": missing_from_rna(calls)}
    return report


def scenario_save_for_cli(args: dict) -> dict:
    """Write a .blend with a marked cloth grid (for the headless CLI bake test)."""
    load_addon("source", None)
    bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, args.get("frames", 6)
    side = args.get("grid", 6)
    sheet = grid_object("Sheet", side, 1.0, 1.0)
    sheet.vertex_groups.new(name="pins").add([side * (side - 1), side * side - 1], 1.0, "REPLACE")
    sheet.tangle.role, sheet.tangle.pin_group = "CLOTH", "pins"
    bpy.ops.wm.save_as_mainfile(filepath=args["path"])
    return {"saved": args["path"]}


def scenario_shape_keys(args: dict) -> dict:
    """The shape keys of the Sheet in a saved .blend (opened without the add-on)."""
    bpy.ops.wm.open_mainfile(filepath=args["path"])
    return {"names": shape_key_summary(bpy.data.objects["Sheet"])["names"]}


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
    run_from_command_line(globals())

"""Real-Blender scenarios for the soft body, hair and collider roles, presets and pre-bake checks; each
run in a fresh subprocess by test_roles_in_blender.py (same protocol as scenarios.py: prints one line
"RESULT <json>"). Assertions live in the pytest module; this file only drives Blender and measures.
"""

import importlib

import bpy
import numpy as np

from scenario_helpers import (bake, bake_cancelled_after, bake_scene, call, draw_panels, drawn, entries_by_id,
                              evaluated_world_positions, grid_object, linked_object, load_addon, mesh_object, missing_from_rna,
                              run_from_command_line, shape_key_summary)


def curves_positions(obj, frame: int, subframe: float = 0.0, world: bool = True) -> np.ndarray:
    """World (or object local) positions (N, 3) of the evaluated Curves object at ``frame`` + ``subframe``."""
    bpy.context.scene.frame_set(frame, subframe=subframe)
    evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
    local = np.empty(len(evaluated.data.points) * 3, np.float32)
    evaluated.data.position_data.foreach_get("vector", local)
    if not world:
        return local.reshape(-1, 3).astype(np.float64)
    matrix = np.array(obj.matrix_world)
    return local.reshape(-1, 3).astype(np.float64) @ matrix[:3, :3].T + matrix[:3, 3]


def scenario_softbody_on_floor(args: dict) -> dict:
    """A jelly cube (soft body) drops onto a floor plane; a deforming mesh collider and box/torus
    colliders are exported (scene and drive data inspected)."""
    result = {"addon": load_addon("source", None)}
    scene = bake_scene(args["frames"], 4, args["address"])
    jelly = mesh_object("Jelly", bpy.ops.mesh.primitive_cube_add, (0.0, 0.0, 0.6), size=0.4)
    jelly.tangle.role = "SOFTBODY"
    result["preset"] = call(lambda: bpy.ops.tangle.apply_preset(preset="Rubber"))
    jelly.tangle.softbody.tet_resolution = 3
    floor = mesh_object("Floor", bpy.ops.mesh.primitive_plane_add, size=4.0)
    floor.tangle.role, floor.tangle.collider_shape = "COLLIDER", "PLANE"

    # Export only: a waving mesh collider sends its deformed vertices every frame, box and torus fit.
    waving = grid_object("Waving", 6, 1.0, 3.0)
    waving.location.x = 3.0
    waving.modifiers.new("Wave", "WAVE").height = 0.2
    waving.tangle.role, waving.tangle.collider_shape = "COLLIDER", "MESH"
    crate = mesh_object("Crate", bpy.ops.mesh.primitive_cube_add, (-3.0, 0.0, 0.0), size=1.0)
    crate.scale = (2.0, 1.0, 0.5)
    crate.tangle.role, crate.tangle.collider_shape = "COLLIDER", "BOX"
    ring = mesh_object("Ring", bpy.ops.mesh.primitive_torus_add, (0.0, 3.0, 0.0))
    ring.tangle.role, ring.tangle.collider_shape = "COLLIDER", "TORUS"
    scene_dict, drive, targets = importlib.import_module("blender_addon.export").export_scene(scene)
    entries = entries_by_id(scene_dict)
    result["kinds"] = {name: entry["kind"] for name, entry in entries.items()}
    result["jelly_params"] = entries["Jelly"]["params"]
    result["jelly_triangles"] = len(entries["Jelly"]["triangles"])
    result["crate_shape"] = {key: value for key, value in entries["Crate"]["shape"].items()}
    result["crate_scale"] = np.diag(entries["Crate"]["matrix_world"])[:3].tolist()
    result["ring_shape"] = entries["Ring"]["shape"]
    result["waving_animated"] = entries["Waving"]["animated"]
    result["waving_vertices"] = len(entries["Waving"]["vertices"])
    waves = [drive[frame]["Waving"]["vertices"] for frame in sorted(drive)]
    result["drive_frames"] = sorted(drive)
    result["drive_vertices_shape"] = list(waves[0].shape)
    result["drive_vertices_move"] = float(np.abs(waves[-1] - waves[0]).max())
    result["drive_first_equals_scene"] = float(np.abs(waves[0] - entries["Waving"]["vertices"]).max())
    result["animated_ids"] = sorted(next(iter(drive.values())))
    for obj in (waving, crate, ring):
        bpy.data.objects.remove(obj)

    rest = evaluated_world_positions(jelly, 1)
    result |= bake(scene)
    result["shape_keys"] = shape_key_summary(jelly)["names"]
    frames = {frame: evaluated_world_positions(jelly, frame) for frame in range(1, args["frames"] + 1)}
    result["first_frame_error"] = float(np.abs(frames[1] - rest).max())
    result["lowest"] = [float(p[:, 2].min()) for p in frames.values()]
    result["center_drop"] = float(rest[:, 2].mean() - frames[args["frames"]][:, 2].mean())
    edge = lambda p: float(np.ptp(p[:, 0]))  # noqa: E731 - width along x
    result["width_ratio_last"] = edge(frames[args["frames"]]) / edge(rest)
    result["free_result"] = call(bpy.ops.tangle.free_bake)
    result["after_free"] = shape_key_summary(jelly)["names"]
    return result


def scenario_cloth_on_rising_mesh_collider(args: dict) -> dict:
    """A cloth falls onto a mesh collider that rises by deforming (an animated shape key lifts it 0.3 m,
    its transform never changes): only the deformed vertices sent every frame can hold the cloth up."""
    result = {"addon": load_addon("source", None)}
    frames = args["frames"]
    scene = bake_scene(frames, 6, args["address"])
    platform = grid_object("Platform", 6, 2.0, 0.0)
    platform.tangle.role, platform.tangle.collider_shape = "COLLIDER", "MESH"
    platform.shape_key_add(name="Basis", from_mix=False)
    lifted = platform.shape_key_add(name="Lifted", from_mix=False)
    lifted.data.foreach_set("co", (np.array([tuple(v.co) for v in platform.data.vertices]) + [0, 0, 0.3])
                            .astype(np.float32).ravel())
    for frame, value in ((1, 0.0), (frames, 1.0)):
        lifted.value = value
        lifted.keyframe_insert("value", frame=frame)
    fcurve = platform.data.shape_keys.animation_data.action.fcurves[0]
    for point in fcurve.keyframe_points:
        point.interpolation = "LINEAR"
    sheet = grid_object("Sheet", 8, 0.8, 0.15)
    sheet.tangle.role = "CLOTH"
    bake_io = importlib.import_module("blender_addon.bake_io")
    result["platform_deforms"] = bake_io.deforms(platform)
    result |= bake(scene)
    lowest, surface = [], []
    for frame in range(1, frames + 1):
        lowest.append(float(evaluated_world_positions(sheet, frame)[:, 2].min()))
        surface.append(0.3 * (frame - 1) / (frames - 1))
    result["lowest"], result["surface"] = lowest, surface
    return result


def scenario_cloth_pinned_to_moving_parent(args: dict) -> dict:
    """A cloth parented to an animated empty, pinned at two corners: the pins follow the parent, the
    results are written in the cloth's local space of each frame (no double transform)."""
    result = {"addon": load_addon("source", None)}
    frames = args["frames"]
    scene = bake_scene(frames, 4, args["address"])
    carrier = linked_object("Carrier", None)
    n = 6
    sheet = grid_object("Cape", n, 0.6, 1.0)
    sheet.parent = carrier
    pinned = [n * (n - 1), n * n - 1]
    sheet.vertex_groups.new(name="pins").add(pinned, 1.0, "REPLACE")
    sheet.tangle.role, sheet.tangle.pin_group = "CLOTH", "pins"
    for frame, x in ((1, 0.0), (frames, 0.5)):
        carrier.location.x = x
        carrier.keyframe_insert("location", frame=frame)
    scene.frame_set(1)
    rest = evaluated_world_positions(sheet, 1)
    result |= bake(scene)
    drift, fall = [], []
    for frame in range(1, frames + 1):
        positions = evaluated_world_positions(sheet, frame)
        carried = rest[pinned] + [float(np.array(carrier.matrix_world)[0, 3]), 0.0, 0.0]
        drift.append(float(np.abs(positions[pinned] - carried).max()))
        fall.append(float(rest[:n, 2].mean() - positions[:n, 2].mean()))
    result["pin_drift"], result["far_edge_fall"] = drift, fall
    return result


def bending_rig(bones: tuple[str, str], heights: tuple[float, float, float], keys) -> bpy.types.Object:
    """An armature of two bones along +z, ``bones`` (lower, upper) from heights[0] to heights[1] and on to
    heights[2] [m]; the upper bone takes the XYZ rotations ``keys`` ((frame, (x, y, z)) ...) [rad]."""
    data = bpy.data.armatures.new("Rig")
    rig = linked_object("Rig", data)
    bpy.context.view_layer.objects.active = rig
    bpy.ops.object.mode_set(mode="EDIT")
    lower = data.edit_bones.new(bones[0])
    lower.head, lower.tail = (0.0, 0.0, heights[0]), (0.0, 0.0, heights[1])
    upper = data.edit_bones.new(bones[1])
    upper.head, upper.tail, upper.parent = (0.0, 0.0, heights[1]), (0.0, 0.0, heights[2]), lower
    bpy.ops.object.mode_set(mode="OBJECT")
    bend = rig.pose.bones[bones[1]]
    bend.rotation_mode = "XYZ"
    for frame, angles in keys:
        bend.rotation_euler = angles
        bend.keyframe_insert("rotation_euler", frame=frame)
    return rig


def skin_by_height(obj, rig, bones: tuple[str, str], joint: float) -> None:
    """Skin mesh ``obj`` (not rotated) to ``rig``: its vertices below world height ``joint`` [m] wholly to the
    lower of ``bones``, the others to the upper one, through an Armature modifier."""
    heights = np.array([vertex.co.z for vertex in obj.data.vertices]) + obj.location.z
    obj.vertex_groups.new(name=bones[0]).add([int(i) for i in np.flatnonzero(heights < joint)], 1.0, "REPLACE")
    obj.vertex_groups.new(name=bones[1]).add([int(i) for i in np.flatnonzero(heights >= joint)], 1.0, "REPLACE")
    obj.modifiers.new("Armature", "ARMATURE").object = rig


def skinned_torso_and_cape(frames: int, deform: str = "armature"):
    """A closed torso (cylinder, r 0.2 m, 1 m tall) skinned to a two-bone rig whose Chest bone bends and
    twists over the shot, and a 9 x 9 cape hanging 5 cm behind it, its top row in the pin group, deformed
    either by its own Armature modifier on the same rig (all of it weighted to Chest; ``deform`` "armature")
    or by a Surface Deform modifier bound to the torso ("surface_deform"). Returns (torso, cape, rig)."""
    scene = bpy.context.scene
    rig = bending_rig(("Spine", "Chest"), (0.0, 0.5, 1.0), ((1, (0.0, 0.0, 0.0)), (frames, (0.35, 0.0, 0.6))))
    torso = mesh_object("Torso", bpy.ops.mesh.primitive_cylinder_add, (0.0, 0.0, 0.5), radius=0.2, depth=1.0,
                        vertices=24, end_fill_type="TRIFAN")       # Surface Deform binds to no n-gon caps
    skin_by_height(torso, rig, ("Spine", "Chest"), 0.5)
    torso.tangle.role, torso.tangle.collider_shape = "COLLIDER", "MESH"
    n = 9
    rows, columns = np.meshgrid(np.linspace(0.95, 0.35, n), np.linspace(-0.25, 0.25, n), indexing="ij")
    vertices = np.stack([columns.ravel(), np.full(n * n, 0.25), rows.ravel()], axis=1)
    faces = [(i * n + j, i * n + j + 1, (i + 1) * n + j + 1, (i + 1) * n + j) for i in range(n - 1)
             for j in range(n - 1)]
    mesh = bpy.data.meshes.new("Cape")
    mesh.from_pydata(vertices.tolist(), [], faces)
    cape = linked_object("Cape", mesh)
    cape.vertex_groups.new(name="pins").add(list(range(n)), 1.0, "REPLACE")
    scene.frame_set(1)
    if deform == "armature":
        cape.vertex_groups.new(name="Chest").add(list(range(n * n)), 1.0, "REPLACE")
        cape.modifiers.new("Skin", "ARMATURE").object = rig
    else:
        cape.modifiers.new("Skin", "SURFACE_DEFORM").target = torso
        with bpy.context.temp_override(object=cape, active_object=cape):
            bpy.ops.object.surfacedeform_bind(modifier="Skin")
    cape.tangle.role, cape.tangle.pin_group = "CLOTH", "pins"
    return torso, cape, rig


def scenario_cape_on_skinned_torso(args: dict) -> dict:
    """The cape's pins follow the skin its Armature modifier makes; playback shows the bake once, not
    deformed again by the modifier; Free Bake brings the modifier back."""
    result = {"addon": load_addon("source", None)}
    frames = args["frames"]
    scene = bake_scene(frames, 4, args["address"])
    torso, cape, rig = skinned_torso_and_cape(frames, args["deform"])
    pinned = list(range(9))
    skin = {frame: evaluated_world_positions(cape, frame)[pinned] for frame in range(1, frames + 1)}
    result["skin_moves"] = float(np.abs(skin[frames] - skin[1]).max())
    # the skin itself may stretch the pinned row (a Surface Deform on a twisting chest): the cloth must follow
    result["skin_stretch"] = max(float(np.linalg.norm(np.diff(row, axis=0), axis=1).max() / (0.5 / 8) - 1.0)
                                 for row in skin.values())
    result |= bake(scene)
    armature = cape.modifiers["Skin"]
    result["muted_after_bake"] = not armature.show_viewport and not armature.show_render
    pin_error, inside, stretch = [], [], []
    for frame in range(1, frames + 1):
        positions = evaluated_world_positions(cape, frame)
        pin_error.append(float(np.linalg.norm(positions[pinned] - skin[frame], axis=1).max()))
        inside.append(_inside_skinned_torso(positions, torso, frame))
        grid = positions.reshape(9, 9, 3)
        across = np.linalg.norm(np.diff(grid, axis=1), axis=2) / (0.5 / 8)     # rest spacing along a row
        down = np.linalg.norm(np.diff(grid, axis=0), axis=2) / (0.6 / 8)       # and down a column
        stretch.append(float(max(across.max(), down.max()) - 1.0))
    result["pin_error"], result["inside"], result["stretch"] = pin_error, inside, stretch
    if args.get("render"):
        for frame in (1, frames // 2, frames):
            _render_story(f"{args['render']}/cape_{args['deform']}_f{frame:02d}.png", frame)
    result["freed"] = call(lambda: bpy.ops.tangle.free_bake())
    result["restored_after_free"] = armature.show_viewport and armature.show_render
    checks = importlib.import_module("blender_addon.export")
    result["checked"] = [[p.object, p.message, p.blocking] for p in checks.check_scene(scene)]
    # a shape key animated on the cape is not followed: Check Scene says so
    cape.shape_key_add(name="Basis")
    flutter = cape.shape_key_add(name="Flutter")
    for frame, value in ((1, 0.0), (frames, 1.0)):
        flutter.value = value
        flutter.keyframe_insert("value", frame=frame)
    result["checked_with_shape_key"] = [[p.object, p.message, p.blocking] for p in checks.check_scene(scene)]
    return result


def _render_story(path: str, frame: int) -> None:
    """A Workbench still of the scene as it plays back at ``frame`` (object colours, studio light), from a
    camera behind and to the side of the torso."""
    scene = bpy.context.scene
    scene.frame_set(frame)
    camera = bpy.data.objects.get("StoryCamera")
    if camera is None:
        camera = linked_object("StoryCamera", bpy.data.cameras.new("StoryCamera"))
        camera.location = (1.6, 2.4, 1.4)
        target = linked_object("StoryTarget", None)
        target.location = (0.0, 0.0, 0.6)
        aim = camera.constraints.new("TRACK_TO")
        aim.target, aim.track_axis, aim.up_axis = target, "TRACK_NEGATIVE_Z", "UP_Y"
        for name, colour in (("Torso", (0.75, 0.75, 0.75, 1.0)), ("Cape", (0.7, 0.15, 0.15, 1.0))):
            bpy.data.objects[name].color = colour
    scene.camera = camera
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.display.shading.color_type = "OBJECT"
    scene.display.shading.light = "STUDIO"
    scene.render.resolution_x, scene.render.resolution_y = 480, 480
    scene.render.filepath = path
    bpy.ops.render.render(write_still=True)


def _inside_skinned_torso(points: np.ndarray, torso, frame: int) -> int:
    """Cape points inside the torso's evaluated (bent) surface at ``frame``: generalized winding number."""
    body = evaluated_world_positions(torso, frame)
    evaluated = torso.evaluated_get(bpy.context.evaluated_depsgraph_get())
    mesh = evaluated.to_mesh()
    mesh.calc_loop_triangles()
    triangles = np.empty(len(mesh.loop_triangles) * 3, np.int32)
    mesh.loop_triangles.foreach_get("vertices", triangles)
    evaluated.to_mesh_clear()
    rooted_inside = importlib.import_module("blender_addon.core.rooted_inside")
    winding = rooted_inside.winding_numbers(body, triangles.reshape(-1, 3), points)
    return int((np.abs(winding) > 0.5).sum())


def make_head_and_hair(strand_points: int, length: float):
    """A UV sphere head (with its UV map) and 12 strands grown on its upper triangles by the demo's
    ``grow_hair`` (roots at triangle centroids, bound through the UV map)."""
    head = mesh_object("Head", bpy.ops.mesh.primitive_uv_sphere_add, (0.0, 0.0, 1.0), radius=0.1,
                       segments=12, ring_count=8)
    demo = importlib.import_module("blender_addon.demo")
    hair, chosen, points = demo.grow_hair(head, "Hair", strand_points, length, min_height=0.05, max_strands=12)
    return head, hair, chosen, points


def scenario_hair_on_bent_head_from_a_posed_frame(args: dict) -> dict:
    """Curves hair on a head skinned to a rig whose upper bone bends it (an Armature modifier on the head);
    the bake runs frames 12-20, where the head is already bent: the roots must sit on the bent scalp."""
    result = {"addon": load_addon("source", None)}
    scene = bake_scene(20, 4, args["address"])
    scene.frame_start = 12
    head, hair, chosen, rest_points = make_head_and_hair(4, 0.08)
    rig = bending_rig(("Neck", "Crown"), (0.8, 1.0, 1.2),
                      ((1, (0.0, 0.0, 0.0)), (12, (0.5, 0.0, 0.4)), (20, (0.7, 0.0, 0.9))))
    skin_by_height(head, rig, ("Neck", "Crown"), 1.0)
    scene.tangle.hair_cache = "KEYFRAMES"
    hair.tangle.role = "HAIR"
    hair.tangle.hair.model = args["model"]
    scene.frame_set(1)
    result |= bake(scene)
    rooted_inside = importlib.import_module("blender_addon.core.rooted_inside")
    hair_io = importlib.import_module("blender_addon.hair_io")
    roots = np.arange(0, len(rest_points), 4)
    gaps = []
    for frame in range(12, 21):
        scene.frame_set(frame)
        surface = hair_io.evaluated_surface(head, bpy.context.evaluated_depsgraph_get())
        points = curves_positions(hair, frame)
        gaps.append(float(rooted_inside.distances_to_triangles(surface.vertices, surface.triangles, points[roots])
                          .max()))
    result["root_gap"] = gaps
    return result


def scenario_curves_hair_on_moving_head(args: dict) -> dict:
    """Curves hair bound to a moving head through its UV map: keyframed points play back without the
    server, roots follow the head, Free Bake restores the groom."""
    result = {"addon": load_addon("source", None)}
    frames = args["frames"]
    scene = bake_scene(frames, 4, args["address"])
    head, hair, chosen, rest_points = make_head_and_hair(args["points"], 0.12)
    if args.get("parented"):  # as Blender's hair tools set it up: the Curves object is a child of its surface
        hair.parent = head
        hair.matrix_parent_inverse = head.matrix_world.inverted()
    head.keyframe_insert("location", frame=1)
    head.location.x += 0.2
    head.keyframe_insert("location", frame=frames)
    scene.frame_set(1)
    scene.tangle.hair_cache = "KEYFRAMES"  # this scenario checks the keyframes (the Geometry Nodes cache: below)
    hair.tangle.role = "HAIR"
    hair.tangle.hair.model = args["model"]
    bpy.context.view_layer.objects.active = hair
    # Blender's hair objects carry a Surface Deform modifier (Deform Curves on Surface node); the bake
    # switches it off (the baked points already follow the surface) and Free Bake switches it back on.
    surface_deform = surface_deform_modifier(hair)
    result["preset"] = call(lambda: bpy.ops.tangle.apply_preset(preset="Straight Coarse"))
    hair.tangle.hair.radius = 1.0e-3  # soft wisp-like strands so they bend visibly within a few frames
    hair.tangle.hair.young_modulus = 1.0e6

    if args.get("wind"):  # a Blender Wind force field blowing along +y (its local Z axis turned to world +y)
        bpy.ops.object.effector_add(type="WIND", rotation=(-np.pi / 2, 0.0, 0.0), location=(0.0, -1.0, 1.0))
        field = bpy.context.active_object
        field.field.strength, field.field.noise = args["wind"], 0.5
        bpy.context.view_layer.objects.active = hair
    scene_dict, drive, _ = importlib.import_module("blender_addon.export").export_scene(scene)
    entries = entries_by_id(scene_dict)
    result["wind_params"] = {key: value for key, value in entries["Hair"]["params"].items() if key.startswith("wind")}
    roots = entries["Hair"]["roots"]
    result["roots_surface"] = roots["surface"]
    head_triangles = entries["Head"]["triangles"]
    result["root_binding_error"] = float(np.abs(
        np.einsum("sk,skd->sd", roots["barycentric"], entries["Head"]["vertices"][head_triangles[roots["triangles"]]])
        - rest_points[::args["points"]]).max())
    result["hair_animated"] = entries["Hair"]["animated"]
    result["head_kind"] = entries["Head"]["kind"]
    result["head_animated"] = entries["Head"]["animated"]

    rest_local = curves_positions(hair, 1, world=False)
    scene.frame_set(frames // 2)  # baking from another frame reads the scene at the range's first frame
    result["bake_result"] = call(bpy.ops.tangle.bake)
    result["frame_after_bake"] = scene.frame_current
    result["last_error"] = scene.tangle.last_error
    result["surface_deform_during_bake"] = [surface_deform.show_viewport, surface_deform.show_render]
    action = hair.data.animation_data.action if hair.data.animation_data else None
    result["fcurves"] = len(action.fcurves) if action else 0
    result["interpolations"] = sorted({p.interpolation for fc in list(action.fcurves)[:30] for p in fc.keyframe_points})
    positions, head_shift = {}, {}
    for frame in range(1, frames + 1):
        positions[frame] = curves_positions(hair, frame)
        head_shift[frame] = float(np.array(head.matrix_world)[0, 3])
    roots_index = np.arange(0, len(rest_points), args["points"])
    result["first_frame_error"] = float(np.abs(positions[1] - rest_points).max())
    result["root_follow_error"] = max(
        float(np.abs(p[roots_index] - (rest_points[roots_index] + [head_shift[f], 0.0, 0.0])).max())
        for f, p in positions.items())
    tips = roots_index + args["points"] - 1
    result["tip_drop"] = float((rest_points[tips, 2] - positions[frames][tips, 2]).mean())
    result["tip_shift_y"] = float((positions[frames][tips, 1] - rest_points[tips, 1]).mean())
    # LINEAR keys on the local positions: halfway between two frames is their midpoint (in local space; the
    # object's own transform, e.g. from its parent, interpolates as its animation says)
    mid = curves_positions(hair, 3, 0.5, world=False)
    ends = [curves_positions(hair, frame, world=False) for frame in (3, 4)]
    result["subframe_error"] = float(np.abs(mid - 0.5 * (ends[0] + ends[1])).max())
    result["baked_topology"] = hair.tangle.baked_topology
    if args.get("save"):
        bpy.ops.wm.save_as_mainfile(filepath=args["save"])
        result["saved_positions"] = {str(f): positions[f].tolist() for f in (1, frames)}
    # A continuation removes the frames >= 5 and keeps the earlier ones bit-identical; the last kept pose holds.
    hair_io = importlib.import_module("blender_addon.hair_io")
    local_4 = curves_positions(hair, 4, world=False)
    result["removed_frames"] = hair_io.remove_curves_frames_from(hair, 5)
    result["keys_left"] = sorted({len(fcurve.keyframe_points) for fcurve in hair.data.animation_data.action.fcurves})
    result["kept_frames_error"] = max(float(np.abs(curves_positions(hair, f) - positions[f]).max()) for f in range(1, 5))
    result["held_after_removal"] = float(np.abs(curves_positions(hair, frames, world=False) - local_4).max())
    result["free_result"] = call(bpy.ops.tangle.free_bake)
    result["after_free_animation"] = hair.data.animation_data.action is not None if hair.data.animation_data else False
    result["surface_deform_after_free"] = [surface_deform.show_viewport, surface_deform.show_render]
    result["after_free_attributes"] = sorted(a.name for a in hair.data.attributes if a.name.startswith("tangle"))
    result["after_free_rest_error"] = float(np.abs(curves_positions(hair, frames, world=False) - rest_local).max())
    return result


def sagging_hair(strands: int, points: int) -> bpy.types.Object:
    """A Curves object "Hair" of soft horizontal DER strands (along +x, side by side along y) that sag under
    gravity from the first frame; moved off the origin (results come back in world space, outputs hold
    them in local space)."""
    curves = bpy.data.hair_curves.new("Hair")
    curves.add_curves([points] * strands)
    grid = np.stack(np.meshgrid(np.linspace(-0.2, 0.2, strands), np.linspace(0.0, 0.1, points), indexing="ij"), -1)
    rest = np.column_stack([grid[..., 1].ravel(), grid[..., 0].ravel(), np.ones(strands * points)])
    curves.position_data.foreach_set("vector", rest.astype(np.float32).ravel())
    hair = linked_object("Hair", curves)
    hair.location.x = 0.3
    hair.tangle.role, hair.tangle.bind_to_surface = "HAIR", False
    hair.tangle.hair.model = "der"
    hair.tangle.hair.radius, hair.tangle.hair.young_modulus = 1.0e-3, 1.0e6
    return hair


def capture_writes(output_class) -> dict:
    """{frame: world positions} of every frame the bake hands to ``output_class.write`` from now on (the
    frames as the solver sent them); the output still writes them."""
    sent = {}
    write = output_class.write

    def capture(output, frame, positions_world):
        sent[frame] = np.array(positions_world, np.float64)
        write(output, frame, positions_world)

    output_class.write = capture
    return sent


def scenario_curves_keys_match_solver_frames(args: dict) -> dict:
    """Curves hair baked through a real server: every frame the solver sent (captured on its way to the
    output) plays back from the keys (LINEAR, keyed in batches); then a bake cancelled mid-way keeps
    exactly the frames it reported, each equal to what the solver sent."""
    result = {"addon": load_addon("source", None)}
    frames, strands, points = args["frames"], args["strands"], args["points"]
    scene = bake_scene(frames, 2, args["address"])
    scene.tangle.hair_cache = "KEYFRAMES"
    hair = sagging_hair(strands, points)
    sent = capture_writes(importlib.import_module("blender_addon.bake_output").ShapeKeyOutput)

    def compare(frame_numbers):
        action = hair.data.animation_data.action
        return {"keys": sorted({len(fcurve.keyframe_points) for fcurve in action.fcurves}),
                "fcurves": len(action.fcurves),
                "interpolations": sorted({p.interpolation for fc in list(action.fcurves)[:60] for p in fc.keyframe_points}),
                "max_error": max(float(np.abs(curves_positions(hair, f) - sent[f]).max()) for f in frame_numbers),
                "moved": float(np.abs(sent[max(frame_numbers)] - sent[min(frame_numbers)]).max())}

    result |= bake(scene)
    result["sent_frames"] = sorted(sent)
    result["full"] = compare(range(1, frames + 1))

    # Cancel mid-bake, driven the way the modal timer drives the session.
    sent.clear()
    scene.frame_end = args["long_frames"]
    session = bake_cancelled_after(scene, args["cancel_after"])
    baked = session.outcome.frames_baked
    result["cancelled"] = {"state": session.outcome.state, "frames_baked": baked,
                           "sent_frames": sorted(sent)} | compare(range(1, baked + 1))
    return result


def scenario_curves_keying_timing(args: dict) -> dict:
    """Measurement, not a test: write ``frames`` synthetic frames of a ``strands`` x ``points`` Curves object
    through the bake's own writer (``bake_write.write_frame``, then ``flush_frames`` as a finished bake does)
    and report the seconds it took (wall clock and this process's CPU time) and the largest playback error
    [m] against the frames written. Run:

        python tests/blender/roles_scenarios.py curves_keying_timing '{"strands": 1000, "points": 20, "frames": 48}'
    """
    import time

    load_addon("source", None)
    bake_write = importlib.import_module("blender_addon.bake_write")
    hair_io = importlib.import_module("blender_addon.hair_io")
    strands, points, frames = args["strands"], args["points"], args["frames"]
    curves = bpy.data.hair_curves.new("Hair")
    curves.add_curves([points] * strands)
    roots = np.random.default_rng(0).uniform(-1.0, 1.0, (strands, 1, 2))
    rest = np.concatenate([np.broadcast_to(roots, (strands, points, 2)),
                           np.broadcast_to(np.linspace(0.0, 0.2, points)[None, :, None], (strands, points, 1))], axis=2)
    rest = rest.reshape(-1, 3)
    curves.position_data.foreach_set("vector", rest.astype(np.float32).ravel())
    hair = linked_object("Hair", curves)
    hair.tangle.role, hair.tangle.bind_to_surface = "HAIR", False
    target = hair_io.make_target(hair, hair_io.read_strands(hair), np.eye(4))
    wave = np.sin(0.1 * np.arange(len(rest)))[:, None]
    written = {frame: rest + 1e-3 * (frame - 1) * wave for frame in range(1, frames + 1)}
    started, cpu_started = time.perf_counter(), time.process_time()
    for frame, positions in written.items():
        bake_write.write_frame(target, frame, 1, positions)
    bake_write.flush_frames(target)
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    error = max(float(np.abs(curves_positions(hair, frame) - positions).max()) for frame, positions in written.items())
    return {"seconds": seconds, "cpu_seconds": cpu_seconds, "max_error": error,
            "cpu_us_per_point_frame": 1e6 * cpu_seconds / (len(rest) * frames)}


def scenario_play_saved_hair(args: dict) -> dict:
    """Open a .blend with baked Curves hair WITHOUT the add-on and play it back."""
    bpy.ops.wm.open_mainfile(filepath=args["path"])
    hair = bpy.data.objects["Hair"]
    return {str(frame): curves_positions(hair, frame).tolist() for frame in (1, args["frames"])}


def scenario_legacy_curve_hair(args: dict) -> dict:
    """Hair on a legacy Curve object (poly or Bezier splines): shape keys on the curve, clamped roots."""
    result = {"addon": load_addon("source", None)}
    frames = args["frames"]
    scene = bake_scene(frames, 4, args["address"])
    curve = bpy.data.curves.new("Strands", "CURVE")
    curve.dimensions = "3D"
    count = 6
    for s in range(3):
        spline = curve.splines.new(args["spline"])
        xyz = np.column_stack([np.linspace(0.0, 0.25, count), np.full(count, 0.1 * s), np.full(count, 1.0)])
        if args["spline"] == "BEZIER":
            spline.bezier_points.add(count - 1)
            spline.bezier_points.foreach_set("co", xyz.ravel())
            for point in spline.bezier_points:
                point.handle_left_type = point.handle_right_type = "AUTO"
        else:
            spline.points.add(count - 1)
            spline.points.foreach_set("co", np.column_stack([xyz, np.ones(count)]).ravel())
    obj = linked_object("Strands", curve)
    obj.rotation_euler.z = 0.7  # results come back in world space: the bake must undo this
    obj.tangle.role = "HAIR"
    obj.tangle.hair.model = "der"
    obj.tangle.hair.radius = 1.0e-3
    obj.tangle.hair.young_modulus = 1.0e7

    rest = None  # the control points before the bake, in world space (read below from the Basis key)
    result |= bake(scene)
    result["shape_keys"] = shape_key_summary(obj)["names"]
    # Blender evaluates curve shape keys into the evaluated curve's control points only through the
    # depsgraph's geometry; read them from the key blocks blended the way Blender does (relative keys).
    key = obj.data.shape_keys
    basis = np.array([tuple(point.co) for point in key.key_blocks["Basis"].data])

    def blended(frame):
        scene.frame_set(frame)
        total = basis.copy()
        for block in key.key_blocks[1:]:
            total += block.value * (np.array([tuple(point.co) for point in block.data]) - basis)
        matrix = np.array(obj.matrix_world)
        return total @ matrix[:3, :3].T + matrix[:3, 3]

    matrix = np.array(obj.matrix_world)
    rest = basis @ matrix[:3, :3].T + matrix[:3, 3]
    rest_knots_xyz = np.array([list(p.co) for spline in curve.splines for p in (
        spline.bezier_points if spline.type == "BEZIER" else spline.points)])[:, :3]
    result["basis_is_rest"] = float(np.abs(basis - rest_knots_xyz).max())
    played = {frame: blended(frame) for frame in range(1, frames + 1)}
    roots = np.array([0, 1, count, count + 1, 2 * count, 2 * count + 1])
    tips = np.array([count - 1, 2 * count - 1, 3 * count - 1])
    result["first_frame_error"] = float(np.abs(played[1] - rest).max())
    result["root_drift"] = max(float(np.abs(p[roots] - rest[roots]).max()) for p in played.values())
    result["tip_drop"] = float((rest[tips, 2] - played[frames][tips, 2]).min())
    if args["spline"] == "BEZIER":
        block = key.key_blocks[f"tangle_f{frames:04d}"]
        knots = np.array([tuple(p.co) for p in block.data])
        left = np.array([tuple(p.handle_left) for p in block.data])
        right = np.array([tuple(p.handle_right) for p in block.data])
        basis_left = np.array([tuple(p.handle_left) for p in key.key_blocks["Basis"].data])
        basis_right = np.array([tuple(p.handle_right) for p in key.key_blocks["Basis"].data])
        # Auto handles are symmetric about their knot and turn rigidly with the strand's tangent.
        result["handles_moved"] = float(np.abs(left - basis_left).max())
        result["handle_midpoint_error"] = float(np.abs(0.5 * (left + right) - knots).max())
        result["handle_span_error"] = float(np.abs(np.linalg.norm(right - left, axis=1)
                                                   - np.linalg.norm(basis_right - basis_left, axis=1)).max())
    result["free_result"] = call(bpy.ops.tangle.free_bake)
    result["after_free"] = shape_key_summary(obj)["names"]
    return result


def scenario_checks(args: dict) -> dict:
    """Each broken input is caught before anything is sent, with the object named."""
    load_addon("source", None)
    scene = bpy.context.scene
    scene.tangle.server_address, scene.tangle.timeout = "tcp://127.0.0.1:9", 1.0  # nothing listens there
    checks = importlib.import_module("blender_addon.export")
    report = {}

    def check(case, cleanup):
        problems = checks.check_scene(scene)
        outcome = call(bpy.ops.tangle.bake)
        report[case] = {"problems": [[p.object, p.message] for p in problems],
                        "panel": [[p.object_name, p.message] for p in scene.tangle.problems],
                        "bake": outcome, "last_error": scene.tangle.last_error}
        for obj in cleanup:
            bpy.data.objects.remove(obj)

    def pydata_object(name, vertices, edges, faces):
        mesh = bpy.data.meshes.new(name)
        mesh.from_pydata(vertices, edges, faces)
        return linked_object(name, mesh)

    def one_strand(name, points):
        curves = bpy.data.hair_curves.new(name)
        curves.add_curves([len(points)])
        curves.position_data.foreach_set("vector", np.array(points, np.float32).ravel())
        return linked_object(name, curves)

    empty = pydata_object("EmptyMesh", [], [], [])
    empty.tangle.role = "CLOTH"
    check("empty_mesh", [empty])

    edges_obj = pydata_object("EdgesOnly", [(0, 0, 0), (1, 0, 0), (1, 1, 0)], [(0, 1), (1, 2)], [])
    edges_obj.tangle.role = "CLOTH"
    check("no_faces", [edges_obj])

    flat_obj = pydata_object("Sliver", [(0, 0, 0), (1, 0, 0), (2, 0, 0), (0, 1, 0)], [], [(0, 1, 2), (0, 1, 3)])
    flat_obj.tangle.role = "CLOTH"
    check("zero_area", [flat_obj])

    sheet = grid_object("OpenJelly", 4, 1.0, 1.0)
    sheet.tangle.role = "SOFTBODY"
    check("open_softbody", [sheet])

    box_vertices = [(x, y, z) for x in (0, 1) for y in (0, 1) for z in (0, 1)] + [(0.5, -1.0, 0.5)]
    box_faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3), (0, 1, 8)]
    fin_obj = pydata_object("Fin", box_vertices, [], box_faces)
    fin_obj.tangle.role = "SOFTBODY"
    check("non_manifold_softbody", [fin_obj])

    mirrored = grid_object("Mirrored", 3, 1.0, 1.0)
    mirrored.scale.x = -1.0
    mirrored.tangle.role = "CLOTH"
    check("negative_scale", [mirrored])

    pinned = grid_object("Pinned", 3, 1.0, 1.0)
    pinned.tangle.role, pinned.tangle.pin_group = "CLOTH", "pins"
    check("missing_pin_group", [pinned])

    strained = grid_object("Strained", 3, 1.0, 1.0)
    strained.tangle.role, strained.tangle.cloth.strain_limits = "CLOTH", (1.2, 1.5)
    check("strain_limits", [strained])

    doubled = one_strand("Doubled", [[0, 0, 0], [0, 0, 1], [0, 0, 1], [0, 0, 2]])
    doubled.tangle.role, doubled.tangle.bind_to_surface = "HAIR", False
    check("zero_length_segment", [doubled])

    bald_obj = one_strand("Bald", [[0, 0, 0], [0, 0, 1], [0, 0, 2]])
    bald_obj.tangle.role = "HAIR"  # Bind Roots is on by default, but no surface is set
    check("missing_emitter", [bald_obj])

    good = grid_object("Good", 3, 1.0, 1.0)
    good.tangle.role = "CLOTH"
    problems = checks.check_scene(scene)
    report["good"] = {"problems": [[p.object, p.message] for p in problems], "panel": len(scene.tangle.problems),
                      "operator": call(bpy.ops.tangle.check_scene)}
    return report


def scenario_rooted_inside(args: dict) -> dict:
    """Hair rooted inside a collider, and hair combed partly through one: Check Scene lists a warning for each
    that does not block the bake, for a sphere primitive and for the same sphere as a mesh collider with
    flipped normals."""
    load_addon("source", None)
    scene = bpy.context.scene
    scene.tangle.server_address, scene.tangle.timeout = "tcp://127.0.0.1:9", 1.0  # nothing listens there
    checks = importlib.import_module("blender_addon.export")
    ball = mesh_object("Ball", bpy.ops.mesh.primitive_uv_sphere_add, (0.0, 0.0, 0.0), radius=0.1)
    ball.tangle.role, ball.tangle.collider_shape = "COLLIDER", "SPHERE"
    curves = bpy.data.hair_curves.new("Hair")
    curves.add_curves([4] * 4)
    roots = [(0.0, 0.0, 0.0), (0.02, 0.0, 0.0), (0.0, 0.03, 0.02), (0.0, 0.0, 0.3)]   # three sunk, one above
    points = [(x, y, z + 0.01 * k) for x, y, z in roots for k in range(4)]
    curves.position_data.foreach_set("vector", np.array(points, np.float32).ravel())
    hair = linked_object("Hair", curves)
    hair.tangle.role, hair.tangle.bind_to_surface = "HAIR", False
    # a strand rooted 1 cm above the ball and combed 3 cm down into it: a warning of its own
    combed_curves = bpy.data.hair_curves.new("Combed")
    combed_curves.add_curves([4])
    combed_curves.position_data.foreach_set("vector", np.array([(0.0, 0.0, 0.11 - 0.01 * k) for k in range(4)],
                                                               np.float32).ravel())
    combed = linked_object("Combed", combed_curves)
    combed.tangle.role, combed.tangle.bind_to_surface = "HAIR", False
    report = {}
    for case in ("sphere", "flipped_mesh", "thin_cloth"):
        if case == "flipped_mesh":
            ball.tangle.collider_shape = "MESH"
            ball.data.flip_normals()
        if case == "thin_cloth":
            sheet = grid_object("Sheet", 4, 0.5, 0.5)
            sheet.tangle.role, sheet.tangle.cloth.thickness = "CLOTH", 0.0
        problems = checks.check_scene(scene)
        report[case] = {"problems": [[p.object, p.message, p.blocking] for p in problems],
                        "panel": [[p.object_name, p.message, p.blocking] for p in scene.tangle.problems],
                        "operator": call(bpy.ops.tangle.check_scene), "bake": call(bpy.ops.tangle.bake),
                        "last_error": scene.tangle.last_error}
    # a blocking problem beside the warning, on the 'local' server: both are listed at once, and the refused
    # Bake starts no solver
    server = importlib.import_module("blender_addon.operators.server")
    sheet.tangle.pin_group, scene.tangle.server_address = "no such group", "local"
    problems = checks.check_scene(scene)
    bake = call(bpy.ops.tangle.bake)
    report["blocked"] = {"problems": [[p.object, p.message, p.blocking] for p in problems],
                         "panel": [[p.object_name, p.message, p.blocking] for p in scene.tangle.problems],
                         "bake": bake, "last_error": scene.tangle.last_error,
                         "local_server": server.running_local_server() is not None}
    return report


def scenario_presets(args: dict) -> dict:
    """Each preset sets exactly its values on the active object's role settings."""
    load_addon("source", None)
    presets = importlib.import_module("blender_addon.core.presets")
    sheet = grid_object("Sheet", 3, 1.0, 1.0)
    bpy.context.view_layer.objects.active = sheet
    report = {"no_role": call(lambda: bpy.ops.tangle.apply_preset(preset="Silk")),
              "poll_without_role": bpy.ops.tangle.apply_preset.poll()}
    mismatches = []
    for role, table in presets.PRESETS.items():
        sheet.tangle.role = role
        group = getattr(sheet.tangle, presets.SETTINGS_GROUP[role])
        for name, values in table.items():
            outcome = call(lambda: bpy.ops.tangle.apply_preset(preset=name))
            if outcome["result"] != ["FINISHED"]:
                mismatches.append([role, name, outcome])
            for key, value in values.items():
                if abs(getattr(group, key) - value) > 1e-6 * max(1.0, abs(value)):
                    mismatches.append([role, name, key, getattr(group, key), value])
    report["mismatches"] = mismatches
    report["unknown"] = call(lambda: bpy.ops.tangle.apply_preset(preset="Tweed"))
    return report


def scenario_panels(args: dict) -> dict:
    """Draw the object panel for soft bodies, hair (each model, Curves and Curve) and every collider shape,
    and the bake panel with problems listed: every drawn property, operator and menu must exist."""
    load_addon("source", None)
    panels = importlib.import_module("blender_addon.panels")
    scene = bpy.context.scene
    head, hair, _, _ = make_head_and_hair(4, 0.1)
    curve_obj = linked_object("Strands", bpy.data.curves.new("Strands", "CURVE"))
    jelly = mesh_object("Jelly", bpy.ops.mesh.primitive_cube_add)
    cases = [("softbody", jelly, {"role": "SOFTBODY"}), ("cloth", jelly, {"role": "CLOTH"})]
    cases += [(f"hair_{model}", hair, {"role": "HAIR", "model": model}) for model in ("der", "cosserat", "particles")]
    cases += [("legacy_curve", curve_obj, {"role": "HAIR", "model": "der"})]
    cases += [(f"collider_{shape.lower()}", head, {"role": "COLLIDER", "shape": shape})
              for shape in ("PLANE", "SPHERE", "BOX", "TORUS", "MESH")]
    scene.tangle.problems.add().object_name = "Jelly"  # the bake panel lists problems
    report = {}
    for case, obj, setting in cases:
        obj.tangle.role = setting["role"]
        if "model" in setting:
            obj.tangle.hair.model = setting["model"]
        if "shape" in setting:
            obj.tangle.collider_shape = setting["shape"]
        maps_panel = (panels.TANGLE_PT_object_maps,) if panels.TANGLE_PT_object_maps.poll(
            type("Context", (), {"object": obj})()) else ()
        calls = draw_panels((panels.TANGLE_PT_object, *maps_panel, panels.TANGLE_PT_bake), object=obj, scene=scene)
        report[case] = {"props": sorted(set(drawn(calls, "prop"))), "menus": drawn(calls, "menu"),
                        "operators": drawn(calls, "operator"), "missing": missing_from_rna(calls),
                        "labels": drawn(calls, "label")}
        obj.tangle.role = "NONE"
    return report


def scenario_painted_maps(args: dict) -> dict:
    """Painted maps from the panel's own properties: a cloth flap clamped along one edge with its bending
    rigidity painted by a vertex group (weight 1 on one half, At Weight 0 = 0.1 elsewhere) is baked and its
    halves' sag measured; Curves hair exports point- and curve-domain attributes as factors; Check Scene
    flags a missing group and a map the hair model does not use."""
    result = {"addon": load_addon("source", None)}
    frames, n = args["frames"], 9
    scene = bake_scene(frames, 4, args["address"])
    flap = grid_object("Flap", n, 0.4, 1.0)          # vertex i*n + j: row i (y), column j (x)
    rows, columns = np.divmod(np.arange(n * n), n)
    flap.vertex_groups.new(name="clamp").add(np.flatnonzero(columns < 2).tolist(), 1.0, "REPLACE")
    flap.vertex_groups.new(name="stiff").add(np.flatnonzero(rows < n // 2).tolist(), 1.0, "REPLACE")
    flap.tangle.role, flap.tangle.pin_group = "CLOTH", "clamp"
    cloth = flap.tangle.cloth
    cloth.bend_stiffness, cloth.stretch_stiffness, cloth.damping = 2.0, 2000.0, 4.0
    cloth.bend_stiffness_map, cloth.bend_stiffness_map_zero = "stiff", 0.1
    head, hair, _, _ = make_head_and_hair(5, 0.1)
    hair.tangle.role = "HAIR"
    strands = len(hair.data.curves)
    root_stiff = hair.data.attributes.new("root_stiff", "FLOAT", "POINT")
    root_stiff.data.foreach_set("value", np.tile(np.linspace(1.0, 0.0, 5), strands).astype(np.float32))
    heavy = hair.data.attributes.new("heavy", "FLOAT", "CURVE")
    heavy.data.foreach_set("value", (np.arange(strands) % 2).astype(np.float32))
    hair.tangle.hair.young_modulus_map, hair.tangle.hair.young_modulus_map_zero = "root_stiff", 0.2
    hair.tangle.hair.density_map, hair.tangle.hair.density_map_zero = "heavy", 0.5
    checks = importlib.import_module("blender_addon.export")
    scene_dict, _, _ = importlib.import_module("blender_addon.export").export_scene(scene)
    entries = entries_by_id(scene_dict)
    result["flap_maps"] = {name: np.asarray(values).tolist() for name, values in entries["Flap"]["maps"].items()}
    result["hair_maps"] = {name: np.asarray(values).tolist() for name, values in entries["Hair"]["maps"].items()}
    result["strands"] = strands
    hair.tangle.role = "NONE"                          # bake the cloth alone
    scene.frame_set(1)
    rest = evaluated_world_positions(flap, 1)
    result |= bake(scene)
    final = evaluated_world_positions(flap, frames)
    tips = np.flatnonzero(columns == n - 1)
    sag = rest[tips, 2] - final[tips, 2]
    result["stiff_sag"] = float(sag[rows[tips] < 3].mean())
    result["soft_sag"] = float(sag[rows[tips] >= n - 3].mean())
    hair.tangle.role = "HAIR"
    cloth.bend_stiffness_map = "no such group"
    hair.tangle.hair.model = "particles"
    result["problems"] = [[problem.object, problem.message, problem.blocking] for problem in checks.check_scene(scene)]
    hair.tangle.hair.particle_stiffness_map = "root_stiff"
    hair.tangle.role = "NONE"
    cloth.bend_stiffness_map = "stiff"
    hair.tangle.role = "HAIR"
    scene_dict, _, _ = importlib.import_module("blender_addon.export").export_scene(scene)
    result["particles_maps"] = sorted(entries_by_id(scene_dict)["Hair"]["maps"])
    return result



def surface_deform_modifier(hair) -> bpy.types.Modifier:
    """A geometry-nodes modifier with Blender's Deform Curves on Surface node, as hair tools add one."""
    group = bpy.data.node_groups.new("Surface Deform", "GeometryNodeTree")
    group.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
    group.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
    group_input, group_output = group.nodes.new("NodeGroupInput"), group.nodes.new("NodeGroupOutput")
    deform = group.nodes.new("GeometryNodeDeformCurvesOnSurface")
    group.links.new(group_input.outputs[0], deform.inputs[0])
    group.links.new(deform.outputs[0], group_output.inputs[0])
    modifier = hair.modifiers.new("Surface Deform", "NODES")
    modifier.node_group = group
    return modifier


def scenario_curves_hair_cache(args: dict) -> dict:
    """Curves hair baked into the Geometry Nodes cache (the default Hair Cache) through a real server: every
    frame the solver sent plays back from the packed bake; re-bake from a frame and a cancelled bake
    resumed keep the earlier frames bit for bit; the file plays without the add-on; Free Bake restores
    the groom and the modifiers exactly."""
    result = {"addon": load_addon("source", None)}
    hair_cache = importlib.import_module("blender_addon.hair_cache")
    bake_output = importlib.import_module("blender_addon.bake_output")
    frames, strands, points = args["frames"], args["strands"], args["points"]
    scene = bake_scene(frames, 2, args["address"])
    result["default_cache"] = scene.tangle.hair_cache
    hair = sagging_hair(strands, points)
    surface_deform = surface_deform_modifier(hair)
    later = hair.modifiers.new("Later", "NODES")  # a modifier after the simulation (e.g. children); empty here
    rest_local = curves_positions(hair, 1, world=False)

    def hair_animated_on_the_wire():  # must not change when the bake adds / mutes modifiers (resume rebuilds it)
        return entries_by_id(importlib.import_module("blender_addon.export").export_scene(scene)[0])["Hair"]["animated"]

    result["animated_before"] = hair_animated_on_the_wire()

    sent = capture_writes(bake_output.GeometryNodesHairOutput)

    def state(frame_numbers):
        return {"max_error": max(float(np.abs(curves_positions(hair, f) - sent[f]).max()) for f in frame_numbers),
                "baked_range": list(hair_cache.baked_range(hair) or []),
                "staging_left": hair_cache.staged_frames(hair.data),
                "modifiers": [m.name for m in hair.modifiers],
                "surface_deform": [surface_deform.show_viewport, surface_deform.show_render],
                "has_action": hair.data.animation_data is not None and hair.data.animation_data.action is not None,
                "status": scene.tangle.status}

    result |= bake(scene)
    result["animated_after"] = hair_animated_on_the_wire()
    result["sent_frames"] = sorted(sent)
    result["full"] = state(range(1, frames + 1))
    result["moved"] = float(np.abs(sent[frames] - sent[1]).max())
    result["groom_untouched"] = float(np.abs(np.array([v for p in hair.data.points for v in p.position])
                                             .reshape(-1, 3) - rest_local).max())
    mid = curves_positions(hair, 3, 0.5, world=False)
    ends = [curves_positions(hair, frame, world=False) for frame in (3, 4)]
    result["subframe_error"] = float(np.abs(mid - 0.5 * (ends[0] + ends[1])).max())
    before = {f: curves_positions(hair, f) for f in range(1, frames + 1)}

    # re-bake from frame 6: frames 1-5 read back from the packed bake and kept bit for bit
    sent.clear()
    scene.frame_set(6)
    result["rebake"] = call(bpy.ops.tangle.rebake_from_frame)
    result["rebake_sent"] = sorted(sent)
    result["rebake_kept_error"] = max(float(np.abs(curves_positions(hair, f) - before[f]).max()) for f in range(1, 6))
    result["rebake_state"] = state(range(6, frames + 1))

    # a longer bake cancelled part way keeps the frames it reported (packed); Resume completes it
    sent.clear()
    scene.frame_end = args["long_frames"]
    session = bake_cancelled_after(scene, args["cancel_after"])
    baked = session.outcome.frames_baked
    all_sent = dict(sent)
    result["cancelled"] = {"state": session.outcome.state, "frames_baked": baked} | state(range(1, baked + 1))
    scene.frame_end = baked + 4
    result["resume"] = call(bpy.ops.tangle.resume_bake)
    all_sent |= sent
    sent.clear()
    sent.update(all_sent)
    result["resumed"] = state(range(1, baked + 5))
    result["record"] = {"route": bake_output.load_record(scene).route, "last": bake_output.load_record(scene).last_frame}

    path = args["save"]
    bpy.ops.wm.save_as_mainfile(filepath=path)
    result["saved_positions"] = {str(f): curves_positions(hair, f).tolist() for f in (1, baked + 4)}
    hair.select_set(True)
    bpy.context.view_layer.objects.active = hair
    result["alembic"] = call(lambda: bpy.ops.wm.alembic_export(filepath=args["alembic"], start=1, end=baked + 4,
                                                               selected=True))

    result["free"] = call(bpy.ops.tangle.free_bake)
    result["after_free"] = {"modifiers": [m.name for m in hair.modifiers],
                            "surface_deform": [surface_deform.show_viewport, surface_deform.show_render],
                            "attributes": sorted(a.name for a in hair.data.attributes if a.name.startswith("tangle")),
                            "rest_error": float(np.abs(curves_positions(hair, 5, world=False) - rest_local).max()),
                            "later_kept": later.name in hair.modifiers}
    return result


if __name__ == "__main__":
    run_from_command_line(globals())

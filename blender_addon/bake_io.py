"""bpy side of the bake: read marked objects into arrays and write results back as shape keys.

Reading: cloth uses the object's base mesh (its own vertices, triangulated with loop triangles), so
one shape key per frame maps one-to-one onto the mesh; modifiers are not simulated. Colliders are
primitive shapes fitted to the evaluated object, sent in local space with ``matrix_world``.
Writing: positions come back in WORLD space and are converted to object local space with the
inverse of ``matrix_world`` at bake time.
"""

from __future__ import annotations

from dataclasses import dataclass

import bpy
import numpy as np

from .core import scene_export
from .core.bake_state import BASIS_NAME, frame_of_shape_key, shape_key_name, topology_hash
from .core.param_table import CLOTH_PARAMS, COLLIDER_PARAMS

# Modifiers that move vertices without changing topology: a collider carrying one deforms over time.
DEFORMING_MODIFIERS = frozenset({
    "ARMATURE", "CAST", "CURVE", "DISPLACE", "HOOK", "LAPLACIANDEFORM", "LATTICE", "MESH_DEFORM",
    "SHRINKWRAP", "SIMPLE_DEFORM", "SMOOTH", "CORRECTIVE_SMOOTH", "LAPLACIANSMOOTH", "SURFACE_DEFORM",
    "WARP", "WAVE", "MESH_CACHE", "MESH_SEQUENCE_CACHE", "NODES", "CLOTH", "SOFT_BODY",
})


def matrix_array(matrix) -> np.ndarray:
    """A mathutils 4x4 Matrix as a float64 (4, 4) array (row-major, as printed)."""
    return np.array(matrix, dtype=np.float64).reshape(4, 4)


def _animation_data_moves(id_data) -> bool:
    animation = getattr(id_data, "animation_data", None)
    return bool(animation and (animation.action or len(animation.drivers) or len(animation.nla_tracks)))


def is_animated(obj: bpy.types.Object) -> bool:
    """Whether the object moves or deforms over time: animation data, constraints, an animated
    parent, deforming modifiers or animated shape keys."""
    if _animation_data_moves(obj):
        return True
    if any(constraint.enabled for constraint in obj.constraints):
        return True
    if any(modifier.type in DEFORMING_MODIFIERS and modifier.show_viewport for modifier in obj.modifiers):
        return True
    shape_keys = getattr(obj.data, "shape_keys", None)
    if shape_keys is not None and _animation_data_moves(shape_keys):
        return True
    return obj.parent is not None and is_animated(obj.parent)


def _params(settings, table) -> dict:
    values = {}
    for spec in table:
        value = getattr(settings, spec.name)
        values[spec.name] = [float(v) for v in value] if isinstance(spec.default, tuple) else (
            bool(value) if isinstance(spec.default, bool) else float(value))
    return values


def mesh_arrays(mesh: bpy.types.Mesh) -> tuple[np.ndarray, np.ndarray]:
    """Local vertex positions (N, 3) float64 and triangles (F, 3) int32 of a mesh."""
    vertex_count = len(mesh.vertices)
    local = np.empty(vertex_count * 3, dtype=np.float64)
    mesh.vertices.foreach_get("co", local)
    mesh.calc_loop_triangles()
    triangles = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int32)
    mesh.loop_triangles.foreach_get("vertices", triangles)
    return local.reshape(vertex_count, 3), triangles.reshape(-1, 3)


def to_world(local: np.ndarray, matrix_world: np.ndarray) -> np.ndarray:
    """(N, 3) local points -> world with a (4, 4) matrix."""
    return local @ matrix_world[:3, :3].T + matrix_world[:3, 3]


def to_local(world: np.ndarray, matrix_world: np.ndarray) -> np.ndarray:
    """(N, 3) world points -> object local (inverse of :func:`to_world`)."""
    return np.linalg.solve(matrix_world[:3, :3], (np.asarray(world, np.float64) - matrix_world[:3, 3]).T).T


def pin_weights(obj: bpy.types.Object, group_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Indices (P,) and weights (P,) of the vertices in vertex group ``group_name`` with weight > 0."""
    if not group_name:
        return np.zeros(0, np.int32), np.zeros(0, np.float64)
    group = obj.vertex_groups.get(group_name)
    if group is None:
        raise scene_export.ExportError(f"pin vertex group '{group_name}' does not exist", obj.name)
    group_index = group.index
    # bpy exposes vertex-group membership only per vertex; this runs once per bake, not per frame.
    pairs = [(vertex.index, element.weight) for vertex in obj.data.vertices for element in vertex.groups
             if element.group == group_index and element.weight > 0.0]
    if not pairs:
        return np.zeros(0, np.int32), np.zeros(0, np.float64)
    indices, weights = zip(*pairs)
    return np.asarray(indices, np.int32), np.asarray(weights, np.float64)


@dataclass
class ClothTarget:
    """A cloth object being baked: where results go and how to bring them to local space."""

    object_name: str
    matrix_world: np.ndarray  # (4, 4) at bake time
    vertex_count: int
    topology: str


def export_cloth(obj: bpy.types.Object) -> tuple[dict, ClothTarget]:
    if obj.type != "MESH":
        raise scene_export.ExportError(f"only mesh objects can be cloth, this is a {obj.type}", obj.name)
    if obj.mode == "EDIT":
        raise scene_export.ExportError("leave Edit Mode before baking", obj.name)
    matrix_world = matrix_array(obj.matrix_world)
    local, triangles = mesh_arrays(obj.data)
    indices, weights = pin_weights(obj, obj.tangle.pin_group)
    entry = scene_export.cloth_object(obj.name, to_world(local, matrix_world), triangles, indices, weights,
                                      _params(obj.tangle.cloth, CLOTH_PARAMS))
    target = ClothTarget(obj.name, matrix_world, len(local), topology_hash(len(local), triangles))
    return entry, target


def export_collider(obj: bpy.types.Object, depsgraph) -> dict:
    evaluated = obj.evaluated_get(depsgraph)
    if obj.tangle.collider_shape == "PLANE":
        shape = scene_export.plane_shape()
    else:
        shape = scene_export.sphere_shape(np.array([tuple(corner) for corner in evaluated.bound_box]), obj.name)
    return scene_export.collider_object(obj.name, shape, matrix_array(evaluated.matrix_world),
                                        _params(obj.tangle.collider, COLLIDER_PARAMS), is_animated(obj))


def marked_objects(scene: bpy.types.Scene, role: str) -> list[bpy.types.Object]:
    return sorted((obj for obj in scene.objects if obj.tangle.role == role), key=lambda obj: obj.name)


def frame_range(scene: bpy.types.Scene) -> tuple[int, int]:
    settings = scene.tangle
    if settings.use_frame_range:
        return settings.frame_start, settings.frame_end
    return scene.frame_start, scene.frame_end


def drive_frames(scene: bpy.types.Scene, objects: list[bpy.types.Object], first: int, last: int) -> dict:
    """{frame: {name: {"matrix_world": f8(4, 4)}}} for every frame first..last, evaluated on the main
    thread with ``scene.frame_set`` (the current frame is restored afterwards)."""
    if not objects:
        return {}
    current_frame, current_subframe = scene.frame_current, scene.frame_subframe
    frames = {}
    try:
        for frame in range(first, last + 1):
            scene.frame_set(frame)
            depsgraph = bpy.context.evaluated_depsgraph_get()
            frames[frame] = {obj.name: scene_export.drive_entry(
                obj.name, matrix_array(obj.evaluated_get(depsgraph).matrix_world)) for obj in objects}
    finally:
        scene.frame_set(current_frame, subframe=current_subframe)
    return frames


def export_scene(scene: bpy.types.Scene) -> tuple[dict, dict | None, dict[str, ClothTarget]]:
    """Everything a bake sends: (scene dict, drive frames or None, cloth targets by object name)."""
    unsupported = [obj.name for obj in scene.objects if obj.tangle.role in {"HAIR", "SOFTBODY"}]
    if unsupported:
        raise scene_export.ExportError(
            "hair and soft body roles are not baked by this version of the add-on yet", unsupported[0])
    first, last = frame_range(scene)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    entries, targets = [], {}
    for obj in marked_objects(scene, "CLOTH"):
        entry, target = export_cloth(obj)
        entries.append(entry)
        targets[obj.name] = target
    colliders = marked_objects(scene, "COLLIDER")
    entries += [export_collider(obj, depsgraph) for obj in colliders]
    fps = scene.render.fps / scene.render.fps_base
    gravity = [round(g, 6) for g in scene.gravity] if scene.use_gravity else [0.0, 0.0, 0.0]
    scene_dict = scene_export.build_scene(entries, fps, first, last, scene.tangle.substeps, tuple(gravity))
    animated = [obj for obj in colliders if is_animated(obj)]
    return scene_dict, (drive_frames(scene, animated, first, last) if animated else None), targets


# ---- writing results ----------------------------------------------------------------------------

def _shape_key_fcurve(key: bpy.types.Key, name: str):
    action = key.animation_data.action
    return action.fcurves.find(f'key_blocks["{name}"].value')


def _key_value(key_block, key: bpy.types.Key, frame: int, value: float) -> None:
    key_block.value = value
    key_block.keyframe_insert("value", frame=frame)
    fcurve = _shape_key_fcurve(key, key_block.name)
    for point in fcurve.keyframe_points:
        point.interpolation = "LINEAR"


def write_frame(target: ClothTarget, frame: int, first_frame: int, positions_world: np.ndarray) -> None:
    """Store one baked frame of a cloth object as shape key ``tangle_fNNNN`` with keyframed value.

    positions_world: (N, 3) float32 metres in world space. The key's value is 1 on ``frame`` and 0
    on the neighbouring frames (LINEAR), so playback is exact at integer frames; the previous frame's
    key gets its 0 at ``frame`` now, so the last baked frame holds after a cancelled bake.
    """
    obj = bpy.data.objects.get(target.object_name)
    if obj is None:
        raise scene_export.ExportError("object was deleted or renamed during the bake", target.object_name)
    positions = np.asarray(positions_world)
    if positions.shape != (target.vertex_count, 3):
        raise scene_export.ExportError(
            f"frame {frame}: server sent positions of shape {positions.shape}, mesh has {target.vertex_count} "
            "vertices", target.object_name)
    if obj.data.shape_keys is None:
        obj.shape_key_add(name=BASIS_NAME, from_mix=False)
        obj.tangle.created_basis = True
    key = obj.data.shape_keys
    key.use_relative = True
    name = shape_key_name(frame)
    existing = key.key_blocks.get(name)
    if existing is not None:
        obj.shape_key_remove(existing)
    block = obj.shape_key_add(name=name, from_mix=False)
    block.data.foreach_set("co", to_local(positions, target.matrix_world).astype(np.float32).ravel())
    if frame > first_frame:
        _key_value(block, key, frame - 1, 0.0)
        previous = key.key_blocks.get(shape_key_name(frame - 1))
        if previous is not None:
            _key_value(previous, key, frame, 0.0)
    _key_value(block, key, frame, 1.0)
    obj.tangle.baked_topology = target.topology


def free_bake(obj: bpy.types.Object) -> int:
    """Remove the baked shape keys of ``obj`` and their animation; returns how many keys were removed."""
    key = getattr(obj.data, "shape_keys", None)
    obj.tangle.baked_topology = ""
    if key is None:
        obj.tangle.created_basis = False
        return 0
    baked = [block for block in key.key_blocks if frame_of_shape_key(block.name) is not None]
    action = key.animation_data.action if key.animation_data else None
    for block in baked:
        if action is not None:
            fcurve = action.fcurves.find(f'key_blocks["{block.name}"].value')
            if fcurve is not None:
                action.fcurves.remove(fcurve)
        obj.shape_key_remove(block)
    if action is not None and len(action.fcurves) == 0:
        key.animation_data.action = None
        if action.users == 0:
            bpy.data.actions.remove(action)
    remaining = obj.data.shape_keys
    if obj.tangle.created_basis and remaining is not None and len(remaining.key_blocks) == 1:
        obj.shape_key_remove(remaining.key_blocks[0])
    obj.tangle.created_basis = False
    return len(baked)

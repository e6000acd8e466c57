"""bpy side of hair: read Curves / Curve objects into strand arrays, bind roots to the emitter surface,
write baked frames back so playback needs no server, and free them.

- ``bpy.types.Curves`` (new hair): points from ``position_data``, strands from ``curve_offset_data``.
  Frames are keyframed on ``attributes["position"].data[i].vector`` (LINEAR), which Blender 4.5
  evaluates during playback; the rest positions are kept in the point attribute
  ``tangle_rest_position`` so Free Bake restores the groom exactly.
  Geometry-nodes modifiers that deform the curves with their surface (Blender's *Surface Deform*, the
  *Deform Curves on Surface* node) are switched off while the bake exists: the baked positions already
  follow the surface, and deforming them again would move the roots twice.
- Legacy ``bpy.types.Curve``: the control points of every spline (Poly / NURBS points, Bezier knots)
  are the simulated points; frames become shape keys like meshes (Bezier handles are turned with
  their knot's tangent).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import bpy
import numpy as np
from mathutils.bvhtree import BVHTree

from .core import scene_export
from .core.bake_state import topology_hash
from .core.strands import carried_handles, point_of_position_path, position_path
from .shape_keys import write_shape_key
from .skin import mute_modifiers, restore_muted

REST_ATTRIBUTE = "tangle_rest_position"
SURFACE_DEFORM_NODE = "GeometryNodeDeformCurvesOnSurface"
SURFACE_UV_ATTRIBUTE = "surface_uv_coordinate"
_LINEAR = 1  # index of "LINEAR" in the keyframe interpolation enum (foreach_set takes enum indices)
MIN_KEY_BATCH = 8  # fewest queued frames of Curves hair keyed in one batch during a bake
# A path and array index no real F-curve has: new position F-curves are created under them, then renamed.
_STAGING_PATH, _STAGING_INDEX = "tangle_new_fcurve", 99


@dataclass
class StrandArrays:
    """A hair object's strands in object LOCAL space: points (N, 3) [m], strand_offsets (S + 1,).
    For a legacy Curve made of Bezier splines, the left/right handles (N, 3) of every knot."""

    points: np.ndarray
    strand_offsets: np.ndarray
    handles_left: np.ndarray | None = None
    handles_right: np.ndarray | None = None
    spline_types: tuple[str, ...] = ()


def read_strands(obj: bpy.types.Object) -> StrandArrays:
    """Strand arrays of a Curves or Curve object (its own data, not the evaluated one: the bake writes
    back onto these very points)."""
    if obj.type == "CURVES":
        curves = obj.data
        points = np.empty(len(curves.points) * 3, np.float32)
        curves.position_data.foreach_get("vector", points)
        offsets = np.empty(len(curves.curves) + 1, np.int32)
        curves.curve_offset_data.foreach_get("value", offsets)
        return StrandArrays(points.reshape(-1, 3).astype(np.float64), offsets.astype(np.int64))
    if obj.type != "CURVE":
        raise scene_export.ExportError(f"only Curves (hair) and Curve objects can be hair, this is a {obj.type}",
                                       obj.name)
    chunks, lefts, rights, counts = [], [], [], [0]
    for spline in obj.data.splines:  # once per bake; bpy exposes control points per spline
        if spline.type == "BEZIER":
            count = len(spline.bezier_points)
            for name, target in (("co", chunks), ("handle_left", lefts), ("handle_right", rights)):
                values = np.empty(count * 3)
                spline.bezier_points.foreach_get(name, values)
                target.append(values.reshape(-1, 3))
        else:
            count = len(spline.points)
            values = np.empty(count * 4)
            spline.points.foreach_get("co", values)
            chunks.append(values.reshape(-1, 4)[:, :3])
        counts.append(count)
    types = tuple(spline.type for spline in obj.data.splines)
    points = np.concatenate(chunks) if chunks else np.zeros((0, 3))
    bezier = bool(types) and all(kind == "BEZIER" for kind in types)
    return StrandArrays(points, np.cumsum(counts), np.concatenate(lefts) if bezier else None,
                        np.concatenate(rights) if bezier else None, types)


# ---- emitter surface -------------------------------------------------------------------------

@dataclass
class SurfaceMesh:
    """An evaluated mesh in world space: vertices (N, 3), loop triangles (F, 3) and, when it has the
    requested UV map, the UV of every triangle corner (F, 3, 2)."""

    vertices: np.ndarray
    triangles: np.ndarray
    corner_uvs: np.ndarray | None


def evaluated_surface(obj: bpy.types.Object, depsgraph, uv_map: str = "") -> SurfaceMesh:
    """World-space evaluated mesh of ``obj`` (modifiers and deformation applied) at the current frame."""
    evaluated = obj.evaluated_get(depsgraph)
    mesh = evaluated.to_mesh()
    try:
        local = np.empty(len(mesh.vertices) * 3)
        mesh.vertices.foreach_get("co", local)
        mesh.calc_loop_triangles()
        triangles = np.empty(len(mesh.loop_triangles) * 3, np.int32)
        mesh.loop_triangles.foreach_get("vertices", triangles)
        corner_uvs = None
        layer = mesh.uv_layers.get(uv_map) if uv_map else None
        if layer is not None and len(mesh.loop_triangles):
            loops = np.empty(len(mesh.loop_triangles) * 3, np.int32)
            mesh.loop_triangles.foreach_get("loops", loops)
            uvs = np.empty(len(mesh.loops) * 2)
            layer.uv.foreach_get("vector", uvs)
            corner_uvs = uvs.reshape(-1, 2)[loops].reshape(-1, 3, 2)
        matrix = np.array(evaluated.matrix_world, dtype=np.float64)
    finally:
        evaluated.to_mesh_clear()
    world = local.reshape(-1, 3) @ matrix[:3, :3].T + matrix[:3, 3]
    return SurfaceMesh(world, triangles.reshape(-1, 3), corner_uvs)


def _nearest_triangles(corners: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index of the nearest triangle (F, 3, 3 corners) for each query point (S, 3), with a BVH tree."""
    flat = corners.reshape(-1, 3)
    tree = BVHTree.FromPolygons(flat.tolist(), np.arange(len(flat)).reshape(-1, 3).tolist(), all_triangles=True)
    # one BVH lookup per root, once per bake (mathutils has no batched query)
    found = [tree.find_nearest(point)[2] for point in queries.tolist()]
    return np.array([-1 if index is None else index for index in found], np.int64)


def bind_roots(obj: bpy.types.Object, roots_world: np.ndarray, surface: SurfaceMesh,
               rest_vertices: np.ndarray | None = None) -> tuple[dict, np.ndarray, np.ndarray]:
    """Root binding of a Curves object to its emitter surface (scene ``roots``): (the binding, triangle
    indices (S,) into ``surface.triangles``, barycentric weights (S, 3)).

    With the Curves' ``surface_uv_coordinate`` attribute and the surface's UV map, each root is found
    in UV space (as Blender's own hair tools bind it); otherwise at the nearest point, in world space, of
    the surface's triangles with ``rest_vertices`` (V, 3) [m] (its undeformed shape, on which the groom was
    made; None: the surface as it is). roots_world: (S, 3) first point of every strand [m]."""
    curves = obj.data
    attribute = curves.attributes.get(SURFACE_UV_ATTRIBUTE)
    if surface.corner_uvs is not None and attribute is not None and attribute.domain == "CURVE":
        uvs = np.empty(len(curves.curves) * 2)
        attribute.data.foreach_get("vector", uvs)
        queries = np.column_stack([uvs.reshape(-1, 2), np.zeros(len(curves.curves))])
        corners = np.concatenate([surface.corner_uvs, np.zeros(surface.corner_uvs.shape[:2] + (1,))], axis=2)
    else:
        queries = roots_world
        corners = (surface.vertices if rest_vertices is None else rest_vertices)[surface.triangles]
    triangles = _nearest_triangles(corners, queries)
    if np.any(triangles < 0):
        raise scene_export.ExportError(f"could not bind the roots to the emitter surface '{curves.surface.name}'",
                                       obj.name)
    weights = scene_export.barycentric_on_triangles(queries, corners[triangles])
    return scene_export.hair_roots(curves.surface.name, triangles, weights), triangles, weights


def rest_surface_vertices(surface_obj: bpy.types.Object, posed: SurfaceMesh) -> np.ndarray | None:
    """World vertices (V, 3) [m] of an emitter surface without the modifiers that deform it (the shape a
    groom is made on), when they correspond one to one with the evaluated surface ``posed``; else None."""
    mesh = surface_obj.data
    if len(mesh.vertices) != len(posed.vertices):
        return None
    local = np.empty(len(mesh.vertices) * 3)
    mesh.vertices.foreach_get("co", local)
    matrix = np.array(surface_obj.matrix_world, dtype=np.float64)
    return local.reshape(-1, 3) @ matrix[:3, :3].T + matrix[:3, 3]


# ---- bake targets ------------------------------------------------------------------------------

@dataclass
class PendingKeys:
    """Baked frames of a Curves object not keyed yet: frame numbers and local positions (N, 3) float32 [m];
    ``keyed``: how many frames of this bake are keyed already."""

    frames: list[int] = field(default_factory=list)
    positions: list[np.ndarray] = field(default_factory=list)
    keyed: int = 0


@dataclass
class HairTarget:
    """A hair object being baked. matrix_world (4, 4) at bake time; ``matrices`` {frame: (4, 4)} when the
    object itself moves (its per-frame transform converts world results to its local space); ``pending``:
    the frames of a Curves object that wait to be keyed in one batch (``flush_curves_keys``)."""

    object_name: str
    matrix_world: np.ndarray
    vertex_count: int
    topology: str
    strand_offsets: np.ndarray
    rest: StrandArrays
    matrices: dict[int, np.ndarray] = field(default_factory=dict)
    pending: PendingKeys = field(default_factory=PendingKeys)

    def matrix_at(self, frame: int) -> np.ndarray:
        return self.matrices.get(frame, self.matrix_world)


def make_target(obj: bpy.types.Object, strands: StrandArrays, matrix_world: np.ndarray) -> HairTarget:
    return HairTarget(obj.name, matrix_world, len(strands.points), topology_hash(len(strands.points),
                      np.asarray(strands.strand_offsets).reshape(-1, 1)), strands.strand_offsets, strands)


def _position_fcurves(curves) -> dict[tuple[int, int], bpy.types.FCurve]:
    """{(point, axis): F-curve} of the baked point positions on a Curves datablock."""
    animation = curves.animation_data
    if animation is None or animation.action is None:
        return {}
    found = {}
    for fcurve in animation.action.fcurves:
        point = point_of_position_path(fcurve.data_path)
        if point is not None:
            found[(point, fcurve.array_index)] = fcurve
    return found


def surface_deform_modifiers(obj: bpy.types.Object) -> list[bpy.types.Modifier]:
    """Enabled geometry-nodes modifiers of ``obj`` that use the Deform Curves on Surface node."""
    return [modifier for modifier in obj.modifiers
            if modifier.type == "NODES" and modifier.node_group is not None
            and (modifier.show_viewport or modifier.show_render)
            and any(node.bl_idname == SURFACE_DEFORM_NODE for node in modifier.node_group.nodes)]


def mute_surface_deform(obj: bpy.types.Object) -> None:
    mute_modifiers(obj, surface_deform_modifiers(obj))


def restore_surface_deform(obj: bpy.types.Object) -> None:
    restore_muted(obj)


def _write_curves_frame(obj: bpy.types.Object, target: HairTarget, frame: int, local: np.ndarray) -> None:
    """Show the frame's pose at once (``position_data``) and queue its keys; the queue is keyed when it
    holds as many frames as are keyed already (at least ``MIN_KEY_BATCH``), so every key is rewritten
    about twice over a whole bake, and by ``flush_curves_keys`` when the bake ends."""
    curves = obj.data
    if REST_ATTRIBUTE not in curves.attributes:
        mute_surface_deform(obj)
        rest = curves.attributes.new(REST_ATTRIBUTE, "FLOAT_VECTOR", "POINT")
        rest.data.foreach_set("vector", target.rest.points.astype(np.float32).ravel())
    pose = np.ascontiguousarray(local, np.float32)
    curves.position_data.foreach_set("vector", pose.ravel())
    pending = target.pending
    pending.frames.append(frame)
    pending.positions.append(pose)
    if len(pending.frames) >= max(MIN_KEY_BATCH, pending.keyed):
        flush_curves_keys(obj, target)


def _new_position_fcurves(curves, missing: list[tuple[int, int]]) -> None:
    """Create the empty position F-curves ``missing`` [(point, axis)] in the datablock's action (the first
    one with keyframe_insert when there is no action yet: it also makes the action slot). Each is created
    under a path and index no F-curve has and then renamed: Blender's duplicate check scans every F-curve
    of the action, and the staging path fails each comparison at once (about 5x faster than creating
    under the real path; the total still grows faster than linearly with the count)."""
    if curves.animation_data is None or curves.animation_data.action is None:
        point, axis = missing[0]
        curves.keyframe_insert(position_path(point), index=axis)
        curves.animation_data.action.fcurves.find(position_path(point), index=axis).keyframe_points.clear()
        missing = missing[1:]
    fcurves = curves.animation_data.action.fcurves
    for point, axis in missing:
        fcurve = fcurves.new(_STAGING_PATH, index=_STAGING_INDEX)
        fcurve.data_path, fcurve.array_index = position_path(point), axis


def _ordered_position_fcurves(curves, count: int) -> list[bpy.types.FCurve]:
    """The 3 ``count`` position F-curves of a Curves datablock in (point, axis) order (missing ones created)."""
    channels = [(point, axis) for point in range(count) for axis in range(3)]
    found = _position_fcurves(curves)
    if len(found) != len(channels):
        _new_position_fcurves(curves, [channel for channel in channels if channel not in found])
        found = _position_fcurves(curves)
    return [found[channel] for channel in channels]


def flush_curves_keys(obj: bpy.types.Object, target: HairTarget) -> None:
    """Key the queued frames of a Curves object: LINEAR keys appended to each position F-curve with one
    ``keyframe_points.add`` and one ``foreach_set`` of co and of interpolation per F-curve (bpy has no key
    insertion across F-curves; one ``insert`` per F-curve and frame costs several times more)."""
    pending = target.pending
    if not pending.frames:
        return
    fcurves = _ordered_position_fcurves(obj.data, target.vertex_count)
    count = len(pending.frames)
    new_keys = np.empty((len(fcurves), count, 2), np.float32)  # (3 N F-curves, frames, (frame, value))
    new_keys[:, :, 0] = pending.frames
    new_keys[:, :, 1] = np.stack(pending.positions).reshape(count, -1).T
    for fcurve, keys in zip(fcurves, new_keys):
        points = fcurve.keyframe_points
        kept = len(points)
        coordinates = np.empty((kept + count) * 2, np.float32)
        points.foreach_get("co", coordinates[:kept * 2])
        coordinates[kept * 2:] = keys.ravel()
        points.add(count)
        points.foreach_set("co", coordinates)
        points.foreach_set("interpolation", np.full(kept + count, _LINEAR, np.int32))
    pending.keyed += count
    pending.frames.clear()
    pending.positions.clear()


def _write_curve_shape_key(obj: bpy.types.Object, target: HairTarget, frame: int, first_frame: int,
                           local: np.ndarray) -> None:
    block = write_shape_key(obj, frame, first_frame, local)
    rest = target.rest
    if rest.handles_left is not None:
        for name, handles in (("handle_left", rest.handles_left), ("handle_right", rest.handles_right)):
            moved = carried_handles(rest.points, handles, local, target.strand_offsets)
            block.data.foreach_set(name, moved.astype(np.float32).ravel())


def write_frame(obj: bpy.types.Object, target: HairTarget, frame: int, first_frame: int, local: np.ndarray) -> None:
    """Store one baked frame of hair object ``obj`` (checked by ``bake_write.write_frame``): keyframed
    points of a Curves object, a shape key of a legacy Curve. local: (N, 3) [m] object local space."""
    if obj.type == "CURVES":
        _write_curves_frame(obj, target, frame, local)
    else:
        _write_curve_shape_key(obj, target, frame, first_frame, local)


def remove_curves_frames_from(obj: bpy.types.Object, first_removed: int) -> int:
    """Remove the keyframes of frames >= ``first_removed`` from a baked Curves object (a continuation
    keeps the earlier ones bit-identical); returns how many frames were removed."""
    removed = 0
    for fcurve in _position_fcurves(obj.data).values():
        points = fcurve.keyframe_points
        coordinates = np.empty(len(points) * 2, np.float32)
        points.foreach_get("co", coordinates)
        coordinates = coordinates.reshape(-1, 2)
        keep = coordinates[coordinates[:, 0] < first_removed]
        removed = len(coordinates) - len(keep)
        if removed:
            points.clear()
            points.add(len(keep))
            points.foreach_set("co", keep.ravel())
            points.foreach_set("interpolation", [_LINEAR] * len(keep))
            fcurve.update()
    return removed


def free_curves_bake(obj: bpy.types.Object) -> int:
    """Remove the baked keyframes of a Curves object and restore its rest positions; returns the number
    of frames removed."""
    curves = obj.data
    fcurves = _position_fcurves(curves)
    frames = len(next(iter(fcurves.values())).keyframe_points) if fcurves else 0
    if fcurves:
        action = curves.animation_data.action
        if len(fcurves) == len(action.fcurves):
            curves.animation_data.action = None
            if action.users == 0:
                bpy.data.actions.remove(action)
        else:
            for fcurve in fcurves.values():
                action.fcurves.remove(fcurve)
    rest = curves.attributes.get(REST_ATTRIBUTE)
    if rest is not None:
        values = np.empty(len(curves.points) * 3, np.float32)
        rest.data.foreach_get("vector", values)
        curves.attributes.remove(rest)
        curves.position_data.foreach_set("vector", values)
        curves.update_tag()
    restore_surface_deform(obj)
    obj.tangle.baked_topology = ""
    return frames

"""bpy side of the bake: read marked objects into arrays (results are written back by ``bake_write.py``).

Reading: cloth and soft bodies use the object's base mesh (its own vertices, triangulated with loop
triangles), so one shape key per frame maps one-to-one onto the mesh and modifiers after it (e.g. a
Subdivision Surface) still apply on top; the server builds the soft body's tetrahedra. Primitive
colliders are shapes fitted to the evaluated object, sent in local space with ``matrix_world``; mesh
colliders (and hair emitter surfaces) are the evaluated, triangulated mesh in world space, with the
deformed vertices sent every frame when the mesh deforms. Hair is read and written by ``hair_io.py``.
What a bake sends is put together by ``export.py``, around the checks (``checks.py``): nothing is sent while
any marked object has a problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import bpy
import numpy as np

from . import hair_io
from .paint_io import painted_maps, vertex_group_weights
from .core import scene_export
from .core.bake_state import topology_hash
from .core.strands import carried_to_posed
from .core.transforms import to_local, to_world
from .skin import SKIN_MODIFIERS, follows_skin
from .core.param_table import CLOTH_PARAMS, COLLIDER_PARAMS, HAIR_PARAMS, SOFTBODY_PARAMS
from .core.wind import scene_wind

# Modifiers that move vertices without changing topology: a collider carrying one deforms over time.
DEFORMING_MODIFIERS = SKIN_MODIFIERS | {"CLOTH", "SOFT_BODY"}


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


def transform_moves(obj: bpy.types.Object) -> bool:
    """Whether the object's transform changes over time: its own animation, enabled constraints or a
    parent that moves (shape keys and modifiers do not count)."""
    if _animation_data_moves(obj) or any(constraint.enabled for constraint in obj.constraints):
        return True
    return obj.parent is not None and is_animated(obj.parent)


def deforms(obj: bpy.types.Object) -> bool:
    """Whether the object's mesh changes shape over time (deforming modifiers, animated shape keys), so
    a mesh collider must send its deformed vertices every frame, not only its transform."""
    if any(modifier.type in DEFORMING_MODIFIERS and modifier.show_viewport for modifier in obj.modifiers):
        return True
    shape_keys = getattr(obj.data, "shape_keys", None)
    return shape_keys is not None and _animation_data_moves(shape_keys)


def _param_value(spec, value):
    if isinstance(spec.default, tuple):
        return [float(v) for v in value]
    if isinstance(spec.default, (bool, str)):
        return type(spec.default)(value)
    return int(value) if isinstance(spec.default, int) else float(value)


def _params(settings, table) -> dict:
    return {spec.name: _param_value(spec, getattr(settings, spec.name)) for spec in table}


def mesh_arrays(mesh: bpy.types.Mesh) -> tuple[np.ndarray, np.ndarray]:
    """Local vertex positions (N, 3) float64 and triangles (F, 3) int32 of a mesh."""
    vertex_count = len(mesh.vertices)
    local = np.empty(vertex_count * 3, dtype=np.float64)
    mesh.vertices.foreach_get("co", local)
    mesh.calc_loop_triangles()
    triangles = np.empty(len(mesh.loop_triangles) * 3, dtype=np.int32)
    mesh.loop_triangles.foreach_get("vertices", triangles)
    return local.reshape(vertex_count, 3), triangles.reshape(-1, 3)


def pin_weights(obj: bpy.types.Object, group_name: str) -> tuple[np.ndarray, np.ndarray]:
    """Indices (P,) and weights (P,) of the vertices in vertex group ``group_name`` with weight > 0."""
    if not group_name:
        return np.zeros(0, np.int32), np.zeros(0, np.float64)
    weights = vertex_group_weights(obj, group_name, "pin vertex group")
    indices = np.flatnonzero(weights > 0.0)
    return indices.astype(np.int32), weights[indices]


@dataclass
class MeshTarget:
    """A cloth or soft body object being baked: where results go and how to bring them to local space.
    matrix_world (4, 4) at the first frame; ``matrices`` {frame: (4, 4)} when the object moves."""

    object_name: str
    matrix_world: np.ndarray
    vertex_count: int
    topology: str
    matrices: dict[int, np.ndarray] = field(default_factory=dict)
    skin: bool = False          # its modifiers deform it below the simulation (``skin``): muted once baked

    def matrix_at(self, frame: int) -> np.ndarray:
        """The object's transform at ``frame`` (results are converted to local space with it)."""
        return self.matrices.get(frame, self.matrix_world)


ClothTarget = MeshTarget  # the name the bake session and outputs were written against


def simulated_mesh_params(obj: bpy.types.Object) -> tuple[str, dict]:
    """(wire kind, wire parameters) of a cloth or soft body object."""
    if obj.tangle.role == "SOFTBODY":
        return "softbody", _params(obj.tangle.softbody, SOFTBODY_PARAMS)
    return "cloth", _params(obj.tangle.cloth, CLOTH_PARAMS)


def export_simulated_mesh(obj: bpy.types.Object, scene: bpy.types.Scene | None = None,
                          depsgraph=None) -> tuple[dict, MeshTarget]:
    """Cloth or soft body entry of a mesh object and its bake target: its base mesh in world space, or, when
    modifiers deform it below the simulation (``skin``; read inside ``readable_skin``, with ``depsgraph``),
    the mesh they deform, whose pinned vertices then follow it every frame; a cloth takes the scene's wind
    with Scene Wind."""
    if obj.type != "MESH":
        raise scene_export.ExportError(f"only mesh objects can be {obj.tangle.role.lower()}, this is a {obj.type}",
                                       obj.name)
    if obj.mode == "EDIT":
        raise scene_export.ExportError("leave Edit Mode before baking", obj.name)
    matrix_world = matrix_array(obj.matrix_world)
    local, triangles = mesh_arrays(obj.data)
    skin = follows_skin(obj) and depsgraph is not None
    if skin:
        deformed = hair_io.evaluated_surface(obj, depsgraph).vertices
        if len(deformed) != len(local):
            raise scene_export.ExportError(
                f"its modifiers change the vertex count ({len(local)} -> {len(deformed)}); only modifiers that "
                "move vertices (Armature, Surface Deform, Lattice, …) can deform a simulated mesh", obj.name)
        local = to_local(deformed, matrix_world)
    indices, weights = pin_weights(obj, obj.tangle.pin_group)
    # pinned vertices follow the object's transform, or the skin's deformed positions sent every frame
    moving = matrix_world if transform_moves(obj) or skin else None
    kind, params = simulated_mesh_params(obj)
    if kind == "cloth" and scene is not None and obj.tangle.use_scene_wind:
        params |= scene_wind_params(scene) or {}
    settings, table = (obj.tangle.cloth, CLOTH_PARAMS) if kind == "cloth" else (obj.tangle.softbody, SOFTBODY_PARAMS)
    entry = scene_export.simulated_mesh_object(kind, obj.name, to_world(local, matrix_world), triangles, indices,
                                               weights, params, moving, painted_maps(obj, settings, table))
    target = MeshTarget(obj.name, matrix_world, len(local), topology_hash(len(local), triangles), skin=skin)
    return entry, target


export_cloth = export_simulated_mesh


def _bounding_box(evaluated) -> np.ndarray:
    return np.array([tuple(corner) for corner in evaluated.bound_box])


def export_collider(obj: bpy.types.Object, depsgraph, params: dict | None = None) -> dict:
    """Collider entry: a primitive fitted to the evaluated object, or (shape MESH, and unmarked emitter
    surfaces, ``params`` given) its evaluated triangulated mesh in world space."""
    evaluated = obj.evaluated_get(depsgraph)
    matrix = matrix_array(evaluated.matrix_world)
    if params is None:
        params = _params(obj.tangle.collider, COLLIDER_PARAMS)
        shape_type = obj.tangle.collider_shape
    else:
        shape_type = "MESH"
    if shape_type == "MESH":
        surface = hair_io.evaluated_surface(obj, depsgraph)
        return scene_export.mesh_collider_object(obj.name, surface.vertices, surface.triangles, matrix, params,
                                                 is_animated(obj))
    shapes = {"PLANE": lambda: scene_export.plane_shape(),
              "SPHERE": lambda: scene_export.sphere_shape(_bounding_box(evaluated), obj.name),
              "BOX": lambda: scene_export.box_shape(_bounding_box(evaluated), obj.name),
              "TORUS": lambda: scene_export.torus_shape(_bounding_box(evaluated), obj.name)}
    return scene_export.collider_object(obj.name, shapes[shape_type](), matrix, params, is_animated(obj))


def uses_emitter(obj: bpy.types.Object) -> bool:
    """A hair object whose roots are bound to its Curves emitter surface."""
    return obj.type == "CURVES" and obj.tangle.bind_to_surface


def wind_fields(scene: bpy.types.Scene) -> list[bpy.types.Object]:
    """The scene's objects carrying a Wind or Turbulence force field."""
    return [obj for obj in scene.objects if obj.field is not None and obj.field.type in ("WIND", "TURBULENCE")]


def scene_wind_params(scene: bpy.types.Scene) -> dict | None:
    """Wind parameters (hair and cloth) from the scene's Wind and Turbulence fields (``core.wind``), or None."""
    fields = wind_fields(scene)
    return scene_wind(np.array([matrix_array(obj.matrix_world)[:3, 2] for obj in fields]).reshape(-1, 3),
                      [obj.field.strength for obj in fields], [obj.field.noise for obj in fields],
                      [obj.field.type == "TURBULENCE" for obj in fields])


def export_hair(obj: bpy.types.Object, depsgraph, scene: bpy.types.Scene) -> tuple[dict, hair_io.HairTarget]:
    """Hair entry (points in world space, roots bound to the emitter surface when set, the scene's wind
    for the fast models) and its target."""
    if obj.mode != "OBJECT":
        raise scene_export.ExportError("switch to Object Mode before baking", obj.name)
    strands = hair_io.read_strands(obj)
    matrix_world = matrix_array(obj.matrix_world)
    points_world = to_world(strands.points, matrix_world)
    roots = None
    if uses_emitter(obj):
        surface = hair_io.evaluated_surface(obj.data.surface, depsgraph, obj.data.surface_uv_map)
        rest = hair_io.rest_surface_vertices(obj.data.surface, surface) if deforms(obj.data.surface) else None
        roots, triangles, weights = hair_io.bind_roots(obj, points_world[strands.strand_offsets[:-1]], surface, rest)
        if rest is not None:
            # the groom is made on the surface's rest shape: a bake that starts on a posed frame carries every
            # strand with its root's triangle onto the posed scalp
            corners = surface.triangles[triangles]
            points_world = carried_to_posed(points_world, strands.strand_offsets, weights, rest[corners],
                                            surface.vertices[corners])
    params = _params(obj.tangle.hair, HAIR_PARAMS)
    if obj.tangle.use_scene_wind:
        params |= scene_wind_params(scene) or {}
    maps = painted_maps(obj, obj.tangle.hair, HAIR_PARAMS, params["model"])
    # "animated": the object's transform moves, so its roots follow per-frame matrices. Modifiers do not
    # count: the groom is read without them, and the bake itself adds (Tangle Hair Cache) or mutes (Surface
    # Deform) modifiers, which must not change the scene a resume rebuilds from its checkpoint.
    entry = scene_export.hair_object(obj.name, points_world, strands.strand_offsets, params, matrix_world,
                                     transform_moves(obj), roots, maps)
    return entry, hair_io.make_target(obj, strands, matrix_world)


def marked_objects(scene: bpy.types.Scene, role: str) -> list[bpy.types.Object]:
    return sorted((obj for obj in scene.objects if obj.tangle.role == role), key=lambda obj: obj.name)


def frame_range(scene: bpy.types.Scene) -> tuple[int, int]:
    settings = scene.tangle
    if settings.use_frame_range:
        return settings.frame_start, settings.frame_end
    return scene.frame_start, scene.frame_end


def _drive_entry(obj: bpy.types.Object, depsgraph, with_vertices: bool) -> dict:
    matrix = matrix_array(obj.evaluated_get(depsgraph).matrix_world)
    if not with_vertices:
        return scene_export.drive_entry(obj.name, matrix)
    vertices = hair_io.evaluated_surface(obj, depsgraph).vertices
    return scene_export.drive_entry(obj.name, matrix, vertices)


def drive_frames(scene: bpy.types.Scene, objects: list[bpy.types.Object], first: int, last: int,
                 deforming: frozenset[str] = frozenset()) -> dict:
    """{frame: {name: {"matrix_world": f8(4, 4), "vertices"?: f8(N, 3)}}} for every frame first..last,
    evaluated on the main thread with ``scene.frame_set`` (the current frame is restored afterwards).
    Objects named in ``deforming`` also send their evaluated vertices in world space, which must keep
    the vertex count of the first frame."""
    if not objects:
        return {}
    current_frame, current_subframe = scene.frame_current, scene.frame_subframe
    frames = {}
    try:
        for frame in range(first, last + 1):
            scene.frame_set(frame)
            depsgraph = bpy.context.evaluated_depsgraph_get()
            frames[frame] = {obj.name: _drive_entry(obj, depsgraph, obj.name in deforming) for obj in objects}
            for name, entry in frames[frame].items():
                if "vertices" in entry and len(entry["vertices"]) != len(frames[first][name]["vertices"]):
                    raise scene_export.ExportError(
                        f"frame {frame}: the deforming mesh changed its vertex count "
                        f"({len(frames[first][name]['vertices'])} -> {len(entry['vertices'])}); a mesh collider "
                        "must keep its topology over the bake range", name)
    finally:
        scene.frame_set(current_frame, subframe=current_subframe)
    return frames

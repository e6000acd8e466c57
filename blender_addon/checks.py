"""Pre-bake checks, bpy side: read every marked object and run ``core.validation`` on it.

``check_scene`` stores the problems in ``Scene.tangle.problems`` (listed in the Tangle Bake panel, each
with its object) and returns them; ``export.export_scene`` calls it first and refuses to send anything
while any blocking problem remains. Warnings (``Problem.blocking`` false) do not stop a bake: hair rooted
inside a collider, or combed partly through one, at the first frame (``core.rooted_inside``). ``TANGLE_OT_check_scene`` runs the same
check from the panel.
"""

from __future__ import annotations

import bpy
import numpy as np

from . import hair_io
from .bake_io import (deforms, export_collider, export_hair, frame_range, marked_objects, matrix_array,
                      mesh_arrays, simulated_mesh_params, to_world)
from .core import validation
from .core.painted_maps import check_maps, map_settings
from .core.param_table import CLOTH_PARAMS, HAIR_PARAMS, SOFTBODY_PARAMS
from .core.rooted_inside import rooted_inside_warnings, started_inside_warnings
from .core.bake_state import frame_of_shape_key
from .core.scene_export import ExportError
from .core.validation import Problem
from .skin import follows_skin, readable_skin

ROLE_NAMES = {"CLOTH": "cloth", "SOFTBODY": "soft body", "COLLIDER": "mesh collider", "HAIR": "hair"}


def _mesh_problems(obj: bpy.types.Object, scene: bpy.types.Scene, depsgraph) -> list[Problem]:
    role = obj.tangle.role
    if obj.type != "MESH":
        return [Problem(obj.name, f"a {ROLE_NAMES[role]} must be a mesh object, this is a {obj.type}")]
    if obj.mode == "EDIT":
        return [Problem(obj.name, "the object is in Edit Mode; leave Edit Mode before baking")]
    if role == "COLLIDER":
        surface = hair_io.evaluated_surface(obj, depsgraph)
        vertices, triangles = surface.vertices, surface.triangles
    else:
        local, triangles = mesh_arrays(obj.data)
        vertices = to_world(local, matrix_array(obj.matrix_world))
    problems = validation.check_mesh(obj.name, vertices, triangles, ROLE_NAMES[role])
    if role == "SOFTBODY" and len(triangles):
        problems += validation.check_closed_manifold(obj.name, triangles)
    if role != "COLLIDER":
        problems += validation.check_pin_group(obj.name, obj.tangle.pin_group, [g.name for g in obj.vertex_groups])
        kind, params = simulated_mesh_params(obj)
        corners = np.asarray(vertices, np.float64).reshape(-1, 3)[np.asarray(triangles, np.int64).reshape(-1, 3)]
        edges = np.linalg.norm(corners - np.roll(corners, 1, axis=1), axis=2).ravel()
        problems += validation.check_settings(obj.name, kind, params, edges,
                                              near_colliders=bool(marked_objects(scene, "COLLIDER")))
        settings, table = (obj.tangle.cloth, CLOTH_PARAMS) if kind == "cloth" else (obj.tangle.softbody, SOFTBODY_PARAMS)
        problems += check_maps(obj.name, map_settings(settings, table), table, params,
                               [group.name for group in obj.vertex_groups])
        problems += _deformation_problems(obj, len(local))
    return problems


def _deformation_problems(obj: bpy.types.Object, vertex_count: int) -> list[Problem]:
    """What a simulated mesh's deformation below the simulation asks: skin modifiers must keep its vertex
    count (the bake follows them); animated shape keys are not followed (a warning)."""
    problems = []
    if follows_skin(obj):
        with readable_skin([obj]):
            deformed = hair_io.evaluated_surface(obj, bpy.context.evaluated_depsgraph_get()).vertices
        if len(deformed) != vertex_count:
            problems.append(Problem(obj.name, f"its modifiers change the vertex count ({vertex_count} -> "
                                              f"{len(deformed)}); only modifiers that move vertices (Armature, "
                                              "Surface Deform, Lattice, …) can deform a simulated mesh"))
    keys = getattr(obj.data, "shape_keys", None)
    action = keys.animation_data.action if keys is not None and keys.animation_data else None
    if action is not None and any(frame_of_shape_key(_quoted_name(curve.data_path)) is None
                                  for curve in action.fcurves):
        problems.append(Problem(obj.name, "animated shape keys deform it, but the bake simulates its base mesh "
                                          "and its pins do not follow them; deform it with a modifier (Armature, "
                                          "Surface Deform) instead", blocking=False))
    return problems


def _quoted_name(data_path: str) -> str:
    """The name in an animation path such as ``key_blocks["Smile"].value`` ("" when it names none)."""
    parts = data_path.split('"')
    return parts[1] if len(parts) >= 3 else ""


def _hair_problems(obj: bpy.types.Object, scene: bpy.types.Scene) -> list[Problem]:
    if obj.type not in {"CURVES", "CURVE"}:
        return [Problem(obj.name, f"hair must be a Curves (hair) or Curve object, this is a {obj.type}")]
    if obj.mode != "OBJECT":
        return [Problem(obj.name, "switch to Object Mode before baking")]
    strands = hair_io.read_strands(obj)
    problems = validation.check_hair(obj.name, strands.points, strands.strand_offsets)
    hair = obj.tangle.hair
    attributes = [attribute.name for attribute in obj.data.attributes] if obj.type == "CURVES" else []
    problems += check_maps(obj.name, map_settings(hair, HAIR_PARAMS), HAIR_PARAMS,
                           {spec.name: getattr(hair, spec.name) for spec in HAIR_PARAMS}, attributes, hair.model,
                           what="attribute" if obj.type == "CURVES" else "attribute (a Curve object has none; "
                                                                         "convert it to Curves)")
    if len(set(strands.spline_types)) > 1 and "BEZIER" in strands.spline_types:
        problems.append(Problem(obj.name, "the curve mixes Bezier and Poly/NURBS splines; convert them to one "
                                          "type (Curve > Set Spline Type)"))
    if obj.type == "CURVES" and obj.tangle.bind_to_surface:
        curves = obj.data
        surface = curves.surface
        in_scene = surface is not None and scene.objects.get(surface.name) is surface
        uv_maps = [layer.name for layer in surface.data.uv_layers] if in_scene and surface.type == "MESH" else []
        problems += validation.check_emitter(
            obj.name, surface.name if surface else None, surface.type if in_scene else None,
            surface.tangle.role if in_scene else None, surface.tangle.collider_shape if in_scene else None,
            curves.surface_uv_map, uv_maps)
        if in_scene and surface.type == "MESH" and deforms(surface):
            posed = hair_io.evaluated_surface(surface, bpy.context.evaluated_depsgraph_get())
            if hair_io.rest_surface_vertices(surface, posed) is None:
                problems.append(Problem(obj.name, f"the modifiers of its surface '{surface.name}' change its vertex "
                                                  "count, so the groom cannot be carried onto the posed surface: "
                                                  "a bake that starts on a posed frame starts with the roots off the "
                                                  "scalp", blocking=False))
    return problems


def object_problems(obj: bpy.types.Object, scene: bpy.types.Scene, depsgraph) -> list[Problem]:
    """Every problem of one marked object (empty for unmarked and primitive-collider objects with a
    valid transform)."""
    role = obj.tangle.role
    if role == "NONE":
        return []
    problems = []
    if role != "HAIR":
        problems += validation.check_transform(obj.name, matrix_array(obj.matrix_world))
    if role == "HAIR":
        problems += _hair_problems(obj, scene)
    elif role != "COLLIDER" or obj.tangle.collider_shape == "MESH":
        problems += _mesh_problems(obj, scene, depsgraph)
    return problems


def rooted_inside(scene: bpy.types.Scene, blocked: set[str] = frozenset()) -> list[Problem]:
    """Warnings for hair rooted inside a collider, or combed partly through one, at the bake's first frame
    (the scene is read there, as the bake reads it, and the current frame is restored). Objects named in
    ``blocked`` have blocking problems of their own and cannot be read for this; they are left out."""
    hair_objects = [obj for obj in marked_objects(scene, "HAIR") if obj.name not in blocked]
    colliders = [obj for obj in marked_objects(scene, "COLLIDER") if obj.name not in blocked]
    if not hair_objects or not colliders:
        return []
    current_frame, current_subframe = scene.frame_current, scene.frame_subframe
    scene.frame_set(frame_range(scene)[0])
    try:
        depsgraph = bpy.context.evaluated_depsgraph_get()
        collider_entries = [export_collider(obj, depsgraph) for obj in colliders]
        warnings = []
        for obj in hair_objects:
            try:
                hair_entry = export_hair(obj, depsgraph, scene)[0]
            except ExportError:
                continue          # its emitter is blocked: that problem is listed already
            warnings += rooted_inside_warnings(hair_entry, collider_entries)
            warnings += started_inside_warnings(hair_entry, collider_entries)
        return warnings
    finally:
        scene.frame_set(current_frame, subframe=current_subframe)


def check_scene(scene: bpy.types.Scene) -> list[Problem]:
    """Check every marked object of ``scene``; store and return the problems, blocking ones and warnings
    together (none blocking: ready to bake). The warnings that need the scene exported are looked for on
    the objects without blocking problems, so an artist sees every warning while fixing what blocks."""
    depsgraph = bpy.context.evaluated_depsgraph_get()
    problems = []
    for role in ("CLOTH", "SOFTBODY", "HAIR", "COLLIDER"):
        for obj in marked_objects(scene, role):
            problems += object_problems(obj, scene, depsgraph)
    problems += rooted_inside(scene, {problem.object for problem in validation.blocking(problems)})
    stored = scene.tangle.problems
    stored.clear()
    for problem in problems:
        item = stored.add()
        item.object_name, item.message, item.blocking = problem.object, problem.message, problem.blocking
    return problems


class TANGLE_OT_check_scene(bpy.types.Operator):
    """Check every object marked for Tangle and list what must be fixed before baking"""

    bl_idname = "tangle.check_scene"
    bl_label = "Check Scene"
    bl_options = {"REGISTER"}

    def execute(self, context):
        problems = check_scene(context.scene)
        stopping = validation.blocking(problems)
        if stopping:
            self.report({"WARNING"}, validation.summary(stopping))
        elif problems:
            self.report({"WARNING"}, f"Ready to bake, with {len(problems)} warning(s): {validation.summary(problems)}")
        else:
            self.report({"INFO"}, "Ready to bake: no problems found")
        return {"FINISHED"}


classes = (TANGLE_OT_check_scene,)

"""Pre-bake checks, bpy side: read every marked object and run ``core.validation`` on it (``object_problems``),
and the warnings found on the exported scene (``exported_problems``: hair rooted inside a collider, or combed
partly through one, at the first frame, ``core.rooted_inside``). ``export.checked_export`` runs both around
the one read of the scene that a bake sends; Check Scene (``operators/check.py``) runs the same. Warnings
(``Problem.blocking`` false) do not stop a bake.
"""

from __future__ import annotations

import bpy
import numpy as np

from . import hair_io
from .bake_io import deforms, marked_objects, matrix_array, mesh_arrays, simulated_mesh_params, to_world
from .core import validation
from .core.painted_maps import check_maps, map_settings
from .core.param_table import CLOTH_PARAMS, HAIR_PARAMS, SOFTBODY_PARAMS
from .core.rooted_inside import rooted_inside_warnings, started_inside_warnings
from .core.bake_state import frame_of_shape_key
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


def exported_problems(entries: list[dict], collider_names: set[str]) -> list[Problem]:
    """Warnings for the exported hair ``entries`` (protocol object dicts, read at the bake's first frame) rooted
    inside, or combed partly through, the exported colliders named in ``collider_names`` (the marked ones)."""
    colliders = [entry for entry in entries if entry["kind"] == "collider" and entry["id"] in collider_names]
    if not colliders:
        return []
    warnings = []
    for hair in (entry for entry in entries if entry["kind"] == "hair"):
        warnings += rooted_inside_warnings(hair, colliders)
        warnings += started_inside_warnings(hair, colliders)
    return warnings


def store_problems(scene: bpy.types.Scene, problems: list[Problem]) -> None:
    """List ``problems`` in ``Scene.tangle.problems`` (the Tangle Bake panel shows them, each with its object)."""
    stored = scene.tangle.problems
    stored.clear()
    for problem in problems:
        item = stored.add()
        item.object_name, item.message, item.blocking = problem.object, problem.message, problem.blocking

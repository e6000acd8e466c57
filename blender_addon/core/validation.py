"""Checks run on every marked object before a bake sends anything. Blender-free.

The bpy side (``blender_addon/checks.py``) reads each object into arrays and calls these functions;
each returns a list of :class:`Problem` (empty when the input is fine), so the panel can list every
problem of every object at once, each naming its object.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .scene_export import triangle_double_areas

ZERO_AREA = 1e-12  # m², twice the triangle area below which a triangle is degenerate
ZERO_LENGTH = 1e-9  # m, hair segment length below which a segment is degenerate
# most self-collision thickness per median rest edge length: the server's rule (solver_server/sim/builder.py,
# SELF_COLLISION_THICKNESS; tests/addon_core/test_validation.py checks the two agree)
SELF_COLLISION_THICKNESS = 0.25


@dataclass(frozen=True)
class Problem:
    """One thing found before baking: the Blender object's name and what is wrong. ``blocking`` problems
    must be fixed before anything is sent; the others are warnings (the bake runs, but will look wrong
    or behave differently from what the settings suggest)."""

    object: str
    message: str
    blocking: bool = True

    def __str__(self) -> str:
        return f"{self.object}: {self.message}"


def blocking(problems: list[Problem]) -> list[Problem]:
    """The problems that stop a bake (the others are warnings)."""
    return [problem for problem in problems if problem.blocking]


def summary(problems: list[Problem]) -> str:
    """One line for a report: the first problem and how many more there are."""
    if not problems:
        return ""
    kind = "problem" if problems[0].blocking else "warning"
    more = f" (and {len(problems) - 1} more {kind}(s), listed in the Tangle Bake panel)" if len(problems) > 1 else ""
    return f"{problems[0]}{more}"


def check_mesh(object_id: str, vertices: np.ndarray, triangles: np.ndarray, role: str) -> list[Problem]:
    """Empty mesh, no faces, non-finite coordinates, zero-area triangles.

    vertices: (N, 3) float [m]; triangles: (F, 3) int; role: what the mesh is used as ("cloth", ...).
    """
    vertices = np.asarray(vertices, np.float64).reshape(-1, 3)
    triangles = np.asarray(triangles, np.int64).reshape(-1, 3)
    if len(vertices) == 0:
        return [Problem(object_id, f"the mesh is empty (no vertices); a {role} needs geometry")]
    if len(triangles) == 0:
        return [Problem(object_id, f"the mesh has no faces; a {role} needs faces (only loose vertices/edges)")]
    problems = []
    if not np.all(np.isfinite(vertices)):
        problems.append(Problem(object_id, "the mesh has NaN or infinite vertex coordinates"))
        return problems
    degenerate = np.flatnonzero(triangle_double_areas(vertices, triangles) < ZERO_AREA)
    if len(degenerate):
        problems.append(Problem(object_id, f"{len(degenerate)} zero-area triangle(s) (first: triangle "
                                           f"{int(degenerate[0])}); use Merge by Distance or Degenerate Dissolve"))
    return problems


def check_closed_manifold(object_id: str, triangles: np.ndarray) -> list[Problem]:
    """A soft body surface must be closed (every edge in exactly 2 triangles) and consistently oriented."""
    triangles = np.asarray(triangles, np.int64).reshape(-1, 3)
    if len(triangles) == 0:
        return []
    directed = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    undirected = np.sort(directed, axis=1)
    edges, counts = np.unique(undirected, axis=0, return_counts=True)
    problems = []
    open_edges = edges[counts == 1]
    if len(open_edges):
        a, b = open_edges[0]
        problems.append(Problem(object_id, f"the soft body surface is open: {len(open_edges)} boundary edge(s), "
                                           f"e.g. vertices {a}–{b}; fill the holes (a soft body needs a closed mesh)"))
    shared = edges[counts > 2]
    if len(shared):
        a, b = shared[0]
        problems.append(Problem(object_id, f"the soft body surface is non-manifold: {len(shared)} edge(s) shared by "
                                           f"more than two faces, e.g. vertices {a}–{b}"))
    if not problems:
        _, directed_counts = np.unique(directed, axis=0, return_counts=True)
        if np.any(directed_counts > 1):
            problems.append(Problem(object_id, "the soft body surface has inconsistent normals; use Mesh > "
                                               "Normals > Recalculate Outside"))
    return problems


def check_transform(object_id: str, matrix_world: np.ndarray) -> list[Problem]:
    """Singular or mirrored (negative scale) object transforms.

    matrix_world: (4, 4). A negative determinant flips triangle orientation in world space (inside-out
    soft bodies, flipped collider sides), so it must be applied first."""
    matrix = np.asarray(matrix_world, np.float64).reshape(4, 4)
    determinant = float(np.linalg.det(matrix[:3, :3]))
    if not np.isfinite(determinant) or abs(determinant) < 1e-12:
        return [Problem(object_id, "the object is scaled to zero along an axis")]
    if determinant < 0.0:
        return [Problem(object_id, "the object has an unapplied negative scale (mirrored); apply the scale "
                                   "(Object > Apply > Scale) or flip the axis in Edit Mode")]
    return []


def check_hair(object_id: str, points: np.ndarray, strand_offsets: np.ndarray) -> list[Problem]:
    """No strands, strands with fewer than 2 points, non-finite points, zero-length segments.

    points: (N, 3) float [m]; strand_offsets: (S + 1,) int (strand s = points[offsets[s]:offsets[s+1]])."""
    points = np.asarray(points, np.float64).reshape(-1, 3)
    offsets = np.asarray(strand_offsets, np.int64).reshape(-1)
    if len(offsets) < 2 or len(points) == 0:
        return [Problem(object_id, "the hair has no strands")]
    problems = []
    short = np.flatnonzero(np.diff(offsets) < 2)
    if len(short):
        problems.append(Problem(object_id, f"{len(short)} strand(s) with fewer than 2 points (first: strand "
                                           f"{int(short[0])}); delete them or add points"))
    if not np.all(np.isfinite(points)):
        problems.append(Problem(object_id, "the hair has NaN or infinite point coordinates"))
        return problems
    lengths = np.linalg.norm(np.diff(points, axis=0), axis=1)
    strand_start = np.zeros(len(points), bool)
    strand_start[offsets[:-1][offsets[:-1] < len(points)]] = True
    within_strand = ~strand_start[1:]  # segment i joins points i and i + 1 of one strand
    segment_strand = np.searchsorted(offsets, np.arange(len(points) - 1), side="right") - 1
    zero = np.flatnonzero(within_strand & (lengths < ZERO_LENGTH))
    if len(zero):
        strand = int(segment_strand[zero[0]])
        problems.append(Problem(object_id, f"{len(zero)} zero-length hair segment(s) (first in strand {strand}, "
                                           f"point {int(zero[0] - offsets[strand])}); remove doubled points"))
    return problems


def check_pin_group(object_id: str, group_name: str, vertex_groups: list[str]) -> list[Problem]:
    """The pin group named in the Tangle settings must exist on the object."""
    if group_name and group_name not in vertex_groups:
        return [Problem(object_id, f"pin vertex group '{group_name}' does not exist (the object has "
                                   f"{', '.join(repr(name) for name in vertex_groups) or 'no vertex groups'})")]
    return []


def check_emitter(object_id: str, surface: str | None, surface_kind: str | None, surface_role: str | None,
                  surface_collider_shape: str | None, uv_map: str, surface_uv_maps: list[str]) -> list[Problem]:
    """A hair object bound to an emitter surface needs that surface: a mesh in the scene with faces, not
    simulated itself, not a primitive collider (the roots need its triangles), with the named UV map.

    surface: the surface object's name or None; surface_kind: its Blender type ("MESH", ...) or None when
    it is not in the scene; surface_role / surface_collider_shape: its Tangle role and collider shape."""
    if not surface:
        return [Problem(object_id, "missing emitter surface: the hair roots are bound to a surface but none is "
                                   "set (set Surface in the Curves data properties, or turn off Bind Roots)")]
    if surface_kind is None:
        return [Problem(object_id, f"missing emitter surface: '{surface}' is not in this scene")]
    if surface_kind != "MESH":
        return [Problem(object_id, f"emitter surface '{surface}' is a {surface_kind}, not a mesh")]
    if surface_role in {"CLOTH", "SOFTBODY", "HAIR"}:
        return [Problem(object_id, f"emitter surface '{surface}' is simulated ({surface_role.lower()}); roots "
                                   "can be bound only to a collider or an unmarked mesh")]
    if surface_role == "COLLIDER" and surface_collider_shape != "MESH":
        return [Problem(object_id, f"emitter surface '{surface}' is a {surface_collider_shape.lower()} collider; "
                                   "set its collider shape to Mesh so the roots can follow its triangles")]
    if uv_map and uv_map not in surface_uv_maps:
        return [Problem(object_id, f"emitter surface '{surface}' has no UV map '{uv_map}'")]
    return []


def check_settings(object_id: str, kind: str, params: dict, triangle_edges: np.ndarray | None = None,
                   near_colliders: bool = False) -> list[Problem]:
    """A cloth's or soft body's settings against the server's rules (blocking: it would refuse them at submit)
    and against what looks wrong after a bake (warnings).

    kind: "cloth" or "softbody"; params: the wire parameters; triangle_edges: (3F,) rest edge lengths of the
    triangles [m] (for the self-collision rule); near_colliders: the scene has colliders."""
    problems = []
    limits = params.get("strain_limits")
    if limits is not None and not float(limits[0]) <= 1.0 <= float(limits[1]):
        problems.append(Problem(object_id, f"strain limits ({float(limits[0]):g}, {float(limits[1]):g}) must "
                                           "satisfy min ≤ 1 ≤ max (the stretch ratios that cost no energy include "
                                           "the rest length)"))
    thickness = float(params.get("thickness", 0.0))
    self_collision = kind == "cloth" and bool(params.get("self_collision", False))
    if self_collision and triangle_edges is not None and len(triangle_edges):
        median = float(np.median(triangle_edges))
        if thickness > SELF_COLLISION_THICKNESS * median:
            problems.append(Problem(object_id, f"thickness {thickness:g} m is too large for self-collision on edges "
                                               f"of {median:.3g} m (median): at most {SELF_COLLISION_THICKNESS:g} × "
                                               "the edge length, or the cloth pushes itself apart; lower the "
                                               "thickness or subdivide the mesh"))
    if thickness == 0.0 and (near_colliders or self_collision):
        touches = " and itself" if self_collision else ""
        problems.append(Problem(object_id, f"thickness 0: the {'cloth' if kind == 'cloth' else 'soft body'} rests "
                                           f"exactly on collider surfaces{touches}, so a rendered subdivision or "
                                           "Solidify shows through them; a few mm is typical", blocking=False))
    return problems

"""Arrays -> the protocol scene dict (DESIGN §2, ARCHITECTURE §2). Blender-free.

The bpy side (``blender_addon/bake_io.py``) reads objects into numpy arrays and calls these
functions; everything that decides what goes on the wire lives here so it is tested without Blender.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial

import numpy as np

FLOAT = np.dtype("<f8")
INDEX = np.dtype("<i4")


class ExportError(ValueError):
    """Bad input found while exporting; ``object`` names the Blender object."""

    def __init__(self, message: str, object: str | None = None):
        super().__init__(f"{object}: {message}" if object else message)
        self.object = object
        self.message = message


def _float_array(values, shape_tail: tuple[int, ...], what: str, object_id: str) -> np.ndarray:
    array = np.ascontiguousarray(values, dtype=FLOAT)
    if array.ndim != 1 + len(shape_tail) or array.shape[1:] != shape_tail:
        raise ExportError(f"{what} must have shape (n, {', '.join(map(str, shape_tail))}), got {array.shape}", object_id)
    if not np.all(np.isfinite(array)):
        raise ExportError(f"{what} contain NaN or infinite values", object_id)
    return array


def _matrix(matrix_world, object_id: str) -> np.ndarray:
    matrix = np.ascontiguousarray(matrix_world, dtype=FLOAT)
    if matrix.shape != (4, 4) or not np.all(np.isfinite(matrix)):
        raise ExportError(f"matrix_world must be a finite 4x4 matrix, got shape {matrix.shape}", object_id)
    if abs(np.linalg.det(matrix[:3, :3])) < 1e-12:
        raise ExportError("matrix_world is singular (an axis is scaled to zero)", object_id)
    return matrix


def _surface(object_id: str, vertices_world, triangles, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Validated (N, 3) float64 world vertices and (F, 3) int32 triangles of a simulated or collider mesh."""
    vertices = _float_array(vertices_world, (3,), "vertices", object_id)
    if len(vertices) == 0:
        raise ExportError("mesh has no vertices", object_id)
    tris = np.ascontiguousarray(triangles, dtype=np.int64)
    if tris.ndim != 2 or tris.shape[1] != 3 or len(tris) == 0:
        raise ExportError(f"mesh has no faces to simulate as {what} (triangles shape {tris.shape})", object_id)
    if tris.min() < 0 or tris.max() >= len(vertices):
        raise ExportError("triangles reference vertices that do not exist", object_id)
    degenerate = np.flatnonzero(triangle_double_areas(vertices, tris) < 1e-12)
    if len(degenerate):
        raise ExportError(
            f"{len(degenerate)} zero-area triangle(s), first at triangle {int(degenerate[0])}; "
            "merge by distance or dissolve degenerate faces", object_id)
    return vertices, tris.astype(INDEX)


def triangle_double_areas(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Twice the area [m²] of each triangle: vertices (N, 3), triangles (F, 3) -> (F,)."""
    edge_a = vertices[triangles[:, 1]] - vertices[triangles[:, 0]]
    edge_b = vertices[triangles[:, 2]] - vertices[triangles[:, 0]]
    return np.linalg.norm(np.cross(edge_a, edge_b), axis=1)


def _pins(object_id: str, pin_indices, pin_weights, count: int) -> dict:
    indices = np.ascontiguousarray(pin_indices, dtype=np.int64).reshape(-1)
    weights = np.ascontiguousarray(pin_weights, dtype=FLOAT).reshape(-1)
    if indices.shape != weights.shape:
        raise ExportError(f"{len(indices)} pin indices but {len(weights)} pin weights", object_id)
    if len(indices) and (indices.min() < 0 or indices.max() >= count):
        raise ExportError("pin indices reference vertices that do not exist", object_id)
    return {"indices": indices.astype(INDEX), "weights": weights}


def _maps(object_id: str, maps: Mapping[str, np.ndarray], count: int) -> dict:
    """The wire ``maps`` {parameter: (count,) float32 factors} (core.painted_maps), checked for shape and
    finiteness."""
    entry = {}
    for name, values in maps.items():
        values = np.ascontiguousarray(values, dtype=FLOAT).reshape(-1)
        if values.shape != (count,):
            raise ExportError(f"the {name} map has {values.size} values for {count} points", object_id)
        if not np.all(np.isfinite(values)):
            raise ExportError(f"the {name} map holds NaN or infinite values", object_id)
        entry[name] = values
    return entry


# What each simulated-mesh kind is called in error messages ("mesh has no faces to simulate as ...").
SIMULATED_MESH_KINDS = {"cloth": "cloth", "softbody": "a soft body"}


def simulated_mesh_object(
    kind: str,
    object_id: str,
    vertices_world: np.ndarray,
    triangles: np.ndarray,
    pin_indices: np.ndarray,
    pin_weights: np.ndarray,
    params: Mapping[str, object],
    matrix_world: np.ndarray | None = None,
    maps: Mapping[str, np.ndarray] | None = None,
) -> dict:
    """One cloth (``kind="cloth"``) or soft body (``kind="softbody"``: its closed surface, the server
    builds the tetrahedra) entry.

    vertices_world: (N, 3) float, metres, world space. triangles: (F, 3) int vertex indices (a closed
    manifold surface for a soft body, checked by ``core.validation``). pin_indices: (P,) int,
    pin_weights: (P,) float in (0, 1]. params: protocol cloth / softbody parameters.
    matrix_world: (4, 4) at frame_start for an object that moves (``"animated": true``; the drive then
    carries its matrix every frame and the pinned vertices follow it), else None (static, no matrix).
    maps: painted factors {parameter: (N,)} (core.painted_maps), sent when not empty.
    """
    if kind not in SIMULATED_MESH_KINDS:
        raise ExportError(f"simulated mesh kind must be one of {sorted(SIMULATED_MESH_KINDS)}, not {kind!r}",
                          object_id)
    vertices, tris = _surface(object_id, vertices_world, triangles, SIMULATED_MESH_KINDS[kind])
    entry = {
        "id": object_id,
        "kind": kind,
        "vertices": vertices,
        "triangles": tris,
        "pins": _pins(object_id, pin_indices, pin_weights, len(vertices)),
        "animated": matrix_world is not None,
        "params": dict(params),
    }
    if matrix_world is not None:
        entry["matrix_world"] = _matrix(matrix_world, object_id)
    if maps:
        entry["maps"] = _maps(object_id, maps, len(vertices))
    return entry


cloth_object = partial(simulated_mesh_object, "cloth")
softbody_object = partial(simulated_mesh_object, "softbody")


def hair_object(
    object_id: str,
    points_world: np.ndarray,
    strand_offsets: np.ndarray,
    params: Mapping[str, object],
    matrix_world: np.ndarray,
    animated: bool,
    roots: dict | None = None,
    maps: Mapping[str, np.ndarray] | None = None,
) -> dict:
    """One hair entry.

    points_world: (N, 3) float, metres, world space, strand after strand. strand_offsets: (S + 1,) int,
    strand s is points[offsets[s]:offsets[s + 1]] (at least 2 points each). matrix_world: (4, 4) of the
    hair object; when ``animated`` the drive carries it every frame and the roots follow it (unless
    ``roots`` binds them to an emitter surface, see :func:`hair_roots`). No ``pins`` key: the first two
    points of every strand are clamped to the root. maps: painted factors {parameter: (N,)} per point.
    """
    points = _float_array(points_world, (3,), "points", object_id)
    offsets = np.ascontiguousarray(strand_offsets, dtype=np.int64).reshape(-1)
    if len(points) == 0 or len(offsets) < 2:
        raise ExportError("hair has no strands", object_id)
    if offsets[0] != 0 or offsets[-1] != len(points) or np.any(np.diff(offsets) < 2):
        raise ExportError("every strand needs at least 2 points (strand offsets must start at 0, end at the "
                          "point count and grow by 2 or more)", object_id)
    entry = {
        "id": object_id,
        "kind": "hair",
        "points": points,
        "strand_offsets": offsets.astype(INDEX),
        "matrix_world": _matrix(matrix_world, object_id),
        "animated": bool(animated),
        "params": dict(params),
    }
    if roots is not None:
        if len(roots["triangles"]) != len(offsets) - 1:
            raise ExportError(f"{len(roots['triangles'])} root bindings for {len(offsets) - 1} strands", object_id)
        entry["roots"] = roots
    if maps:
        entry["maps"] = _maps(object_id, maps, len(points))
    return entry


def barycentric_on_triangles(points: np.ndarray, corners: np.ndarray) -> np.ndarray:
    """Barycentric weights (S, 3) of the points (S, D) projected onto triangles (S, 3, D), D = 2 or 3,
    clamped onto the triangle (weights ≥ 0, summing to 1); degenerate triangles get their first corner."""
    points = np.asarray(points, np.float64)
    a, b, c = (np.asarray(corners, np.float64)[:, k] for k in range(3))
    e0, e1, d = b - a, c - a, points - a
    d00, d01, d11 = (e0 * e0).sum(1), (e0 * e1).sum(1), (e1 * e1).sum(1)
    d20, d21 = (d * e0).sum(1), (d * e1).sum(1)
    denominator = d00 * d11 - d01 * d01
    safe = np.where(np.abs(denominator) > 1e-300, denominator, 1.0)
    v = np.where(np.abs(denominator) > 1e-300, (d11 * d20 - d01 * d21) / safe, 0.0)
    w = np.where(np.abs(denominator) > 1e-300, (d00 * d21 - d01 * d20) / safe, 0.0)
    weights = np.clip(np.stack([1.0 - v - w, v, w], axis=1), 0.0, None)
    total = weights.sum(axis=1, keepdims=True)
    return np.where(total > 0, weights / np.where(total > 0, total, 1.0), [1.0, 0.0, 0.0])


def hair_roots(surface_id: str, triangles: np.ndarray, barycentric: np.ndarray) -> dict:
    """Root binding of S strands to the emitter ``surface_id``: triangle indices (S,) into the surface's
    exported ``triangles`` and barycentric weights (S, 3)."""
    return {"surface": surface_id, "triangles": np.ascontiguousarray(triangles, dtype=INDEX).reshape(-1),
            "barycentric": np.ascontiguousarray(barycentric, dtype=FLOAT).reshape(-1, 3)}


def plane_shape() -> dict:
    """The object's local XY plane through its origin, normal +Z (solid below)."""
    return {"type": "plane", "point": [0.0, 0.0, 0.0], "normal": [0.0, 0.0, 1.0]}


def sphere_shape(bbox_corners_local: np.ndarray, object_id: str) -> dict:
    """Sphere fitted to a local bounding box: center = box center, radius = half the largest dimension.

    bbox_corners_local: (8, 3) or (K, 3) float, metres, object local space.
    """
    corners = _float_array(bbox_corners_local, (3,), "bounding box corners", object_id)
    low, high = corners.min(axis=0), corners.max(axis=0)
    radius = 0.5 * float((high - low).max())
    if radius <= 0.0:
        raise ExportError("cannot fit a sphere collider: the object's bounding box is empty", object_id)
    return {"type": "sphere", "center": [float(c) for c in 0.5 * (low + high)], "radius": radius}


def box_shape(bbox_corners_local: np.ndarray, object_id: str) -> dict:
    """Box = the local bounding box: ``center`` and full edge lengths ``size`` [m]."""
    corners = _float_array(bbox_corners_local, (3,), "bounding box corners", object_id)
    low, high = corners.min(axis=0), corners.max(axis=0)
    if np.any(high - low <= 0.0):
        raise ExportError("cannot fit a box collider: the bounding box is flat along an axis", object_id)
    return {"type": "box", "center": [float(c) for c in 0.5 * (low + high)],
            "size": [float(e) for e in high - low]}


def torus_shape(bbox_corners_local: np.ndarray, object_id: str) -> dict:
    """Torus fitted to a local bounding box, ring in the local XY plane: minor radius = half the Z extent,
    major radius = half the mean XY extent − minor radius (as Blender's Add > Torus)."""
    corners = _float_array(bbox_corners_local, (3,), "bounding box corners", object_id)
    low, high = corners.min(axis=0), corners.max(axis=0)
    extent = high - low
    minor = 0.5 * float(extent[2])
    major = 0.25 * float(extent[0] + extent[1]) - minor
    if not 0.0 < minor < major:
        raise ExportError(f"cannot fit a torus collider to a bounding box of {extent.round(4).tolist()} m: it "
                          "needs a Z extent smaller than half the XY extent", object_id)
    return {"type": "torus", "center": [float(c) for c in 0.5 * (low + high)],
            "major_radius": major, "minor_radius": minor}


def collider_object(
    object_id: str, shape: dict, matrix_world: np.ndarray, params: Mapping[str, object], animated: bool
) -> dict:
    """One primitive collider: ``shape`` in local space, placed by ``matrix_world`` (4, 4)."""
    return {
        "id": object_id,
        "kind": "collider",
        "shape": shape,
        "matrix_world": _matrix(matrix_world, object_id),
        "animated": bool(animated),
        "params": dict(params),
    }


def mesh_collider_object(
    object_id: str, vertices_world: np.ndarray, triangles: np.ndarray, matrix_world: np.ndarray,
    params: Mapping[str, object], animated: bool,
) -> dict:
    """One triangle-mesh collider: vertices (N, 3) WORLD space at frame_start, triangles (F, 3).

    When ``animated`` the drive carries ``matrix_world`` every frame, plus the deformed ``vertices``
    when the mesh deforms (see :func:`drive_entry`)."""
    vertices, tris = _surface(object_id, vertices_world, triangles, "a mesh collider")
    return {
        "id": object_id,
        "kind": "collider",
        "vertices": vertices,
        "triangles": tris,
        "matrix_world": _matrix(matrix_world, object_id),
        "animated": bool(animated),
        "params": dict(params),
    }


def drive_entry(object_id: str, matrix_world: np.ndarray, vertices_world: np.ndarray | None = None) -> dict:
    """Drive data of one animated object at one frame: ``{"matrix_world": f8(4, 4)}`` plus the deformed
    ``"vertices"`` (N, 3) in world space for a deforming mesh collider."""
    entry = {"matrix_world": _matrix(matrix_world, object_id)}
    if vertices_world is not None:
        entry["vertices"] = _float_array(vertices_world, (3,), "deformed vertices", object_id)
    return entry


def build_scene(
    objects: Iterable[dict],
    fps: float,
    frame_start: int,
    frame_end: int,
    substeps: int,
    gravity: Iterable[float] = (0.0, 0.0, -9.81),
    preroll: int = 0,
) -> dict:
    """Assemble the submit scene (``preroll``: frames simulated before frame_start with every object held at its
    first pose). Raises ExportError on an empty scene, duplicate ids or a bad range."""
    objects = list(objects)
    if frame_end <= frame_start:
        raise ExportError(f"frame range {frame_start}..{frame_end} is empty: the end must be after the start")
    if fps <= 0:
        raise ExportError(f"frames per second must be positive, got {fps}")
    if substeps < 1:
        raise ExportError(f"substeps must be at least 1, got {substeps}")
    if preroll < 0:
        raise ExportError(f"the pre-roll must be 0 or more frames, got {preroll}")
    if not any(obj["kind"] != "collider" for obj in objects):
        raise ExportError("nothing to simulate: mark at least one object as Cloth, Soft Body or Hair in the Tangle physics panel")
    seen: set[str] = set()
    for obj in objects:
        if obj["id"] in seen:
            raise ExportError("two objects share this name", obj["id"])
        seen.add(obj["id"])
    return {
        "gravity": [float(g) for g in gravity],
        "time": {"fps": float(fps), "frame_start": int(frame_start), "frame_end": int(frame_end),
                 "substeps": int(substeps), **({"preroll": int(preroll)} if preroll else {})},
        "objects": objects,
    }


def animated_ids(scene: dict) -> list[str]:
    """Ids of the objects the server will wait drive data for."""
    return [obj["id"] for obj in scene["objects"] if obj.get("animated")]

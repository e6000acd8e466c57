"""Arrays -> the protocol scene dict (DESIGN §2, ARCHITECTURE §2). Blender-free.

The bpy side (``blender_addon/bake_io.py``) reads objects into numpy arrays and calls these
functions; everything that decides what goes on the wire lives here so it is tested without Blender.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

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


def cloth_object(
    object_id: str,
    vertices_world: np.ndarray,
    triangles: np.ndarray,
    pin_indices: np.ndarray,
    pin_weights: np.ndarray,
    params: Mapping[str, object],
) -> dict:
    """One cloth entry.

    vertices_world: (N, 3) float, metres, world space. triangles: (F, 3) int vertex indices.
    pin_indices: (P,) int, pin_weights: (P,) float in (0, 1]. params: protocol cloth parameters.
    """
    vertices = _float_array(vertices_world, (3,), "vertices", object_id)
    if len(vertices) == 0:
        raise ExportError("mesh has no vertices", object_id)
    tris = np.ascontiguousarray(triangles, dtype=np.int64)
    if tris.ndim != 2 or tris.shape[1] != 3 or len(tris) == 0:
        raise ExportError(f"mesh has no faces to simulate as cloth (triangles shape {tris.shape})", object_id)
    if tris.min() < 0 or tris.max() >= len(vertices):
        raise ExportError("triangles reference vertices that do not exist", object_id)
    edge_a = vertices[tris[:, 1]] - vertices[tris[:, 0]]
    edge_b = vertices[tris[:, 2]] - vertices[tris[:, 0]]
    doubled_areas = np.linalg.norm(np.cross(edge_a, edge_b), axis=1)
    degenerate = np.flatnonzero(doubled_areas < 1e-12)
    if len(degenerate):
        raise ExportError(
            f"{len(degenerate)} zero-area triangle(s), first at triangle {int(degenerate[0])}; "
            "merge by distance or dissolve degenerate faces", object_id)
    indices = np.ascontiguousarray(pin_indices, dtype=np.int64).reshape(-1)
    weights = np.ascontiguousarray(pin_weights, dtype=FLOAT).reshape(-1)
    if indices.shape != weights.shape:
        raise ExportError(f"{len(indices)} pin indices but {len(weights)} pin weights", object_id)
    if len(indices) and (indices.min() < 0 or indices.max() >= len(vertices)):
        raise ExportError("pin indices reference vertices that do not exist", object_id)
    return {
        "id": object_id,
        "kind": "cloth",
        "vertices": vertices,
        "triangles": tris.astype(INDEX),
        "pins": {"indices": indices.astype(INDEX), "weights": weights},
        "animated": False,
        "params": dict(params),
    }


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


def drive_entry(object_id: str, matrix_world: np.ndarray) -> dict:
    """Drive data of one animated collider at one frame: ``{"matrix_world": f8(4, 4)}``."""
    return {"matrix_world": _matrix(matrix_world, object_id)}


def build_scene(
    objects: Iterable[dict],
    fps: float,
    frame_start: int,
    frame_end: int,
    substeps: int,
    gravity: Iterable[float] = (0.0, 0.0, -9.81),
) -> dict:
    """Assemble the submit scene. Raises ExportError on an empty scene, duplicate ids or a bad range."""
    objects = list(objects)
    if frame_end <= frame_start:
        raise ExportError(f"frame range {frame_start}..{frame_end} is empty: the end must be after the start")
    if fps <= 0:
        raise ExportError(f"frames per second must be positive, got {fps}")
    if substeps < 1:
        raise ExportError(f"substeps must be at least 1, got {substeps}")
    if not any(obj["kind"] != "collider" for obj in objects):
        raise ExportError("nothing to simulate: mark at least one object as Cloth in the Tangle physics panel")
    seen: set[str] = set()
    for obj in objects:
        if obj["id"] in seen:
            raise ExportError("two objects share this name", obj["id"])
        seen.add(obj["id"])
    return {
        "gravity": [float(g) for g in gravity],
        "time": {"fps": float(fps), "frame_start": int(frame_start), "frame_end": int(frame_end),
                 "substeps": int(substeps)},
        "objects": objects,
    }


def animated_ids(scene: dict) -> list[str]:
    """Ids of the objects the server will wait drive data for."""
    return [obj["id"] for obj in scene["objects"] if obj.get("animated")]

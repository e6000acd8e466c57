"""Strand (hair) helpers shared by export and bake output. Blender-free.

Strands are stored flat: points (N, 3) strand after strand, ``strand_offsets`` (S + 1,) with strand s =
points[offsets[s]:offsets[s + 1]] (the layout of ``bpy.types.Curves`` and of the protocol's hair objects).
"""

from __future__ import annotations

import numpy as np

POSITION_PATH_PREFIX = 'attributes["position"].data['


def position_path(point: int) -> str:
    """RNA path of one point's position on a ``Curves`` datablock (keyframed by the bake)."""
    return f'{POSITION_PATH_PREFIX}{int(point)}].vector'


def point_of_position_path(path: str) -> int | None:
    """Inverse of :func:`position_path`; ``None`` for other paths."""
    if not (path.startswith(POSITION_PATH_PREFIX) and path.endswith("].vector")):
        return None
    number = path[len(POSITION_PATH_PREFIX):-len("].vector")]
    return int(number) if number.isdigit() else None


def strand_tangents(points: np.ndarray, strand_offsets: np.ndarray) -> np.ndarray:
    """Unit tangents (N, 3) at every point: central differences inside a strand, one-sided at its ends."""
    points = np.asarray(points, np.float64)
    offsets = np.asarray(strand_offsets, np.int64)
    index = np.arange(len(points))
    strand = np.searchsorted(offsets, index, side="right") - 1
    previous = np.maximum(index - 1, offsets[strand])
    following = np.minimum(index + 1, offsets[strand + 1] - 1)
    tangents = points[following] - points[previous]
    length = np.linalg.norm(tangents, axis=1, keepdims=True)
    return np.where(length > 0, tangents / np.where(length > 0, length, 1.0), [0.0, 0.0, 1.0])


def rotations_between(from_unit: np.ndarray, to_unit: np.ndarray) -> np.ndarray:
    """Smallest rotations (K, 3, 3) taking unit vectors from_unit (K, 3) onto to_unit (K, 3) (Rodrigues);
    opposite vectors get a half turn about an axis perpendicular to from_unit."""
    a = np.asarray(from_unit, np.float64)
    b = np.asarray(to_unit, np.float64)
    axis = np.cross(a, b)
    cosine = np.einsum("kd,kd->k", a, b)
    skew = np.zeros((len(a), 3, 3))
    skew[:, 0, 1], skew[:, 0, 2], skew[:, 1, 2] = -axis[:, 2], axis[:, 1], -axis[:, 0]
    skew -= np.transpose(skew, (0, 2, 1))
    opposite = cosine < -1.0 + 1e-9
    scale = 1.0 / np.where(opposite, 1.0, 1.0 + cosine)
    rotations = np.eye(3) + skew + skew @ skew * scale[:, None, None]
    if np.any(opposite):
        helper = np.where(np.abs(a[opposite, :1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
        perpendicular = np.cross(a[opposite], helper)
        perpendicular /= np.linalg.norm(perpendicular, axis=1, keepdims=True)
        rotations[opposite] = 2.0 * np.einsum("ki,kj->kij", perpendicular, perpendicular) - np.eye(3)
    return rotations


def carried_handles(rest_knots: np.ndarray, rest_handles: np.ndarray, knots_now: np.ndarray,
                    strand_offsets: np.ndarray) -> np.ndarray:
    """Bezier handles (N, 3) that follow their simulated knots: each rest handle offset (handle − knot) is
    turned by the smallest rotation from the knot's rest tangent to its current tangent.

    rest_knots, rest_handles, knots_now: (N, 3) [m]; strand_offsets (S + 1,) of the knots."""
    rotation = rotations_between(strand_tangents(rest_knots, strand_offsets),
                                 strand_tangents(knots_now, strand_offsets))
    offsets = np.asarray(rest_handles, np.float64) - np.asarray(rest_knots, np.float64)
    return np.asarray(knots_now, np.float64) + np.einsum("kij,kj->ki", rotation, offsets)


def triangle_frames(corners: np.ndarray) -> np.ndarray:
    """(S, 3, 3) orthonormal frames [e1 e2 n] (columns) of triangles (S, 3 corners, 3): e1 along the first
    edge, n the normal (degenerate triangles get arbitrary but finite frames)."""
    a, b, c = corners[:, 0], corners[:, 1], corners[:, 2]
    e1 = b - a
    e1 = e1 / np.maximum(np.linalg.norm(e1, axis=1, keepdims=True), 1e-300)
    normal = np.cross(b - a, c - a)
    normal = normal / np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-300)
    return np.stack([e1, np.cross(normal, e1), normal], axis=-1)


def carried_to_posed(points: np.ndarray, strand_offsets: np.ndarray, weights: np.ndarray,
                     rest_corners: np.ndarray, posed_corners: np.ndarray) -> np.ndarray:
    """A groom authored on a surface's rest shape, carried onto the same surface deformed (a bake that
    starts on a posed frame): every strand moves rigidly with the triangle its root is bound to, from the
    triangle's rest frame and point (barycentric ``weights`` (S, 3)) to its posed ones, so it keeps its
    place and angle on the scalp. points (N, 3) [m], strand_offsets (S + 1,), rest and posed corners
    (S, 3, 3) [m] of each strand's triangle. Returns the carried points (N, 3)."""
    rotation = triangle_frames(posed_corners) @ np.transpose(triangle_frames(rest_corners), (0, 2, 1))
    rest_root = np.einsum("sk,skd->sd", weights, rest_corners)
    posed_root = np.einsum("sk,skd->sd", weights, posed_corners)
    strand = np.repeat(np.arange(len(strand_offsets) - 1), np.diff(strand_offsets))
    return posed_root[strand] + np.einsum("nij,nj->ni", rotation[strand], points - rest_root[strand])

"""Hair rooted inside a collider, or combed partly through one, found before the bake. Blender-free.

The first two points of every strand follow the root (``scene_export.hair_object``). Where they lie inside a
collider's solid, no motion of the strand can bring them out: the server leaves the free points next to them
out of contact with that collider and counts them (``unreachable_contacts`` in the frame stats), which keeps
the solve fast but lets that part of the strand pass through. The artist should hear of it before baking.

Depth inside a collider, per collider entry of the protocol (shape in local space placed by ``matrix_world``,
or a triangle mesh in world space):

* primitives: the depth in the shape's local space times the smallest singular value of ``matrix_world``'s
  linear part (a lower bound of the world depth under non-uniform scale);
* meshes: inside where the generalized winding number of the triangles, every shell wound outward
  (``protocol.mesh_shells``, the server's convention too), is above one half: flipped and open-but-nearly-closed
  shells count, and overlapping shells of opposite windings (an ear through a head) add up instead of
  cancelling; the depth is the distance to the nearest triangle. The all-pairs work is bounded (``MAX_PAIRS``):
  beyond it an even subsample of the strands is tested and the count is scaled (the message then says "about").
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

import numpy as np

from .._protocol import PROTOCOL_PACKAGE
from .validation import Problem

outward_shells = importlib.import_module(f"{PROTOCOL_PACKAGE}.mesh_shells").outward_shells

# point-triangle pairs evaluated per mesh collider at most (~1 s of numpy); more strands are subsampled
MAX_PAIRS = 20_000_000
# pairs per vectorized chunk (memory: ~30 float64 temporaries of 9 × this length, ~20 MB each)
CHUNK_PAIRS = 250_000


def depth_inside(collider: Mapping, points: np.ndarray) -> np.ndarray:
    """Depth (n,) [m] of world points (n, 3) inside a protocol collider entry's solid; 0 outside."""
    points = np.asarray(points, np.float64).reshape(-1, 3)
    if "vertices" in collider:
        return _mesh_depth(np.asarray(collider["vertices"], np.float64).reshape(-1, 3),
                           np.asarray(collider["triangles"], np.int64).reshape(-1, 3), points)
    matrix = np.asarray(collider["matrix_world"], np.float64).reshape(4, 4)
    local = (points - matrix[:3, 3]) @ np.linalg.inv(matrix[:3, :3]).T
    smallest_scale = float(np.linalg.svd(matrix[:3, :3], compute_uv=False).min())
    return np.maximum(_primitive_depth(collider["shape"], local), 0.0) * smallest_scale


def _primitive_depth(shape: Mapping, local: np.ndarray) -> np.ndarray:
    """Signed depth (n,) inside a local-space primitive (positive inside)."""
    kind = shape["type"]
    if kind == "plane":
        normal = np.asarray(shape["normal"], np.float64)
        normal = normal / np.linalg.norm(normal)
        return (np.asarray(shape["point"], np.float64) - local) @ normal          # solid below the plane
    offset = local - np.asarray(shape["center"], np.float64)
    if kind == "sphere":
        return float(shape["radius"]) - np.linalg.norm(offset, axis=1)
    if kind == "box":
        return (0.5 * np.asarray(shape["size"], np.float64) - np.abs(offset)).min(axis=1)
    if kind == "torus":
        ring = np.hypot(offset[:, 0], offset[:, 1]) - float(shape["major_radius"])
        return float(shape["minor_radius"]) - np.hypot(ring, offset[:, 2])
    raise ValueError(f"unknown collider shape {kind!r}")


def _chunks(points: np.ndarray, triangle_count: int):
    """Slices of the points such that each chunk × triangle_count stays near CHUNK_PAIRS."""
    step = max(1, CHUNK_PAIRS // max(triangle_count, 1))
    return (slice(start, start + step) for start in range(0, len(points), step))


def winding_numbers(vertices: np.ndarray, triangles: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Generalized winding number (n,) of a triangle soup at points (n, 3) (Van Oosterom–Strackee solid
    angles, summed over the triangles / 4π): ±1 inside a closed shell, 0 outside."""
    corners = vertices[triangles]                                                    # (F, 3, 3)
    total = np.zeros(len(points))
    for rows in _chunks(points, len(triangles)):
        relative = corners[None, :, :, :] - points[rows, None, None, :]            # (m, F, 3, 3)
        a, b, c = relative[:, :, 0], relative[:, :, 1], relative[:, :, 2]
        la, lb, lc = (np.linalg.norm(v, axis=2) for v in (a, b, c))
        triple = np.einsum("mfi,mfi->mf", a, np.cross(b, c))
        below = la * lb * lc + np.einsum("mfi,mfi->mf", a, b) * lc + np.einsum("mfi,mfi->mf", b, c) * la \
            + np.einsum("mfi,mfi->mf", c, a) * lb
        total[rows] = 2.0 * np.arctan2(triple, below).sum(axis=1)
    return total / (4.0 * np.pi)


def _segment_distances(points, start, end):
    """Distance (m, F) from points (m, 1, 3) to segments start → end (F, 3)."""
    along = end - start
    length2 = np.maximum(np.einsum("fi,fi->f", along, along), 1e-300)
    t = np.clip(np.einsum("mfi,fi->mf", points - start, along) / length2, 0.0, 1.0)
    return np.linalg.norm(points - (start + t[:, :, None] * along), axis=2)


def distances_to_triangles(vertices: np.ndarray, triangles: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Unsigned distance (n,) [m] from points (n, 3) to the nearest triangle: the distance to the plane
    where the point projects inside the triangle, otherwise to the nearest of its three edges."""
    a, b, c = (vertices[triangles[:, k]] for k in range(3))                          # (F, 3) each
    normal = np.cross(b - a, c - a)
    unit = normal / np.maximum(np.linalg.norm(normal, axis=1), 1e-300)[:, None]
    nearest = np.empty(len(points))
    for rows in _chunks(points, len(triangles)):
        p = points[rows, None, :]                                                    # (m, 1, 3)
        height = np.einsum("mfi,fi->mf", p - a, unit)
        foot = p - height[:, :, None] * unit
        # the foot is inside when it lies on the inner side of all three edges
        inside = np.ones(height.shape, bool)
        for start, end in ((a, b), (b, c), (c, a)):
            inside &= np.einsum("mfi,fi->mf", np.cross(end - start, foot - start), normal) >= 0.0
        edges = np.minimum(np.minimum(_segment_distances(p, a, b), _segment_distances(p, b, c)),
                           _segment_distances(p, c, a))
        nearest[rows] = np.where(inside, np.abs(height), edges).min(axis=1)
    return nearest


def _mesh_depth(vertices, triangles, points):
    depth = np.zeros(len(points))
    low, high = vertices.min(axis=0), vertices.max(axis=0)
    candidates = np.flatnonzero(np.all((points >= low) & (points <= high), axis=1))
    if len(candidates) == 0 or len(triangles) == 0:
        return depth
    inside = winding_numbers(vertices, outward_shells(vertices, triangles), points[candidates]) > 0.5
    candidates = candidates[inside]
    if len(candidates):
        depth[candidates] = distances_to_triangles(vertices, triangles, points[candidates])
    return depth


def _hair_arrays(hair: Mapping):
    """(points (N, 3) [m], strand offsets (S + 1,), contact distance [m]: radius + thickness) of a hair entry."""
    params = hair.get("params", {})
    return (np.asarray(hair["points"], np.float64).reshape(-1, 3),
            np.asarray(hair["strand_offsets"], np.int64).reshape(-1),
            float(params.get("radius", 0.0)) + float(params.get("thickness", 0.0)))


def _tested_strands(collider: Mapping, strands: int, points_per_strand: float) -> tuple[np.ndarray, int]:
    """(strand indices, stride): every strand, or an even subsample that keeps the point–triangle pairs of
    a mesh collider within MAX_PAIRS."""
    triangles = len(collider["triangles"]) if "vertices" in collider else 1
    stride = max(1, int(np.ceil(points_per_strand * strands * triangles / MAX_PAIRS)))
    return np.arange(0, strands, stride), stride


def _counted(found: int, stride: int, strands: int) -> str:
    """How many of ``strands`` a warning names: ``found`` when every strand was tested, else the subsample's
    count scaled by its ``stride`` ("about N")."""
    return f"{found}" if stride == 1 else f"about {min(found * stride, strands)}"


def _root_depth(collider: Mapping, points: np.ndarray, offsets: np.ndarray, tested: np.ndarray) -> np.ndarray:
    """Depth (k,) [m] of the deeper of the two root points of the ``tested`` strands inside the collider."""
    roots = np.concatenate([points[offsets[tested]], points[offsets[tested] + 1]])
    return depth_inside(collider, roots).reshape(2, -1).max(axis=0)


def rooted_inside_warnings(hair: Mapping, colliders: list[Mapping]) -> list[Problem]:
    """Non-blocking problems, one per collider, for strands of a protocol hair entry whose root points (the
    first two of each strand) lie inside the collider deeper than the hair's contact distance (radius +
    thickness, the hair's own contact sphere wholly inside)."""
    points, offsets, reach = _hair_arrays(hair)
    strands = len(offsets) - 1
    warnings = []
    for collider in colliders:
        tested, stride = _tested_strands(collider, strands, 2)
        depth = _root_depth(collider, points, offsets, tested)
        sunk = int(np.count_nonzero(depth > reach))
        if sunk == 0:
            continue
        warnings.append(Problem(
            hair["id"],
            f"{_counted(sunk, stride, strands)} of {strands} strands are rooted inside collider '{collider['id']}' (up to "
            f"{1e3 * float(depth.max()):.3g} mm deep): the points next to those roots cannot be pushed out, so "
            f"they are left out of contact with '{collider['id']}'; move the roots onto its surface or shrink it",
            blocking=False))
    return warnings


def started_inside_warnings(hair: Mapping, colliders: list[Mapping]) -> list[Problem]:
    """Non-blocking problems, one per collider, for strands rooted outside it whose other points start inside
    its solid deeper than the hair's contact distance (a groom combed through the ground or the body). The
    solver counts them (``started_inside`` in the first frame's stats) and brings them out over a few frames
    where their strand can move that way; the artist should know that the first frames show it."""
    points, offsets, reach = _hair_arrays(hair)
    strands = len(offsets) - 1
    if strands == 0:
        return []
    lengths = np.diff(offsets)
    owner = np.repeat(np.arange(strands), lengths)                  # (N,) strand of every point
    beyond_roots = np.arange(len(owner)) - offsets[owner] >= 2
    warnings = []
    for collider in colliders:
        tested, stride = _tested_strands(collider, strands, float(lengths.mean()))
        rooted_outside = np.zeros(strands, bool)
        rooted_outside[tested[_root_depth(collider, points, offsets, tested) <= reach]] = True
        rows = np.flatnonzero(beyond_roots & rooted_outside[owner])
        depth = depth_inside(collider, points[rows]) if len(rows) else np.zeros(0)
        deep = depth > reach
        through = len(np.unique(owner[rows[deep]]))
        if through == 0:
            continue
        warnings.append(Problem(
            hair["id"],
            f"{_counted(through, stride, strands)} of {strands} strands start partly inside collider '{collider['id']}' ({int(deep.sum())} "
            f"points, up to {1e3 * float(depth.max()):.3g} mm deep): the solver brings them out over the first "
            f"frames where the strands can move that way; comb the groom out of '{collider['id']}' for a clean "
            f"first frame", blocking=False))
    return warnings

"""Independent checks of contact results (numpy reference code, not the solver's kernels).

- ``winding_numbers``: generalized winding number of a triangle soup around points (Jacobson et al.
  2013, solid angles by Van Oosterom & Strackee), orientation-free when taken as |w|;
- ``intersecting_triangle_pairs``: pairs of triangles of one surface (sharing no vertex) that
  intersect, found as edge–triangle crossings (two triangles intersect iff an edge of one crosses
  the other, or they are coplanar, which a falling cloth never is exactly);
- ``edges_through_surface``: edges of one surface that pass through the triangles of another (a cloth
  hooked through a collider's thin part: no vertex inside, yet the head shows through the cloth);
- ``edge_stretch``: largest edge length / rest length − 1.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree


def winding_numbers(points: np.ndarray, vertices: np.ndarray, triangles: np.ndarray, chunk: int = 256) -> np.ndarray:
    """Generalized winding number (n,) of the triangle mesh around points (n, 3)."""
    corners = vertices[triangles]                                    # (F, 3, 3)
    out = np.zeros(len(points))
    for start in range(0, len(points), chunk):
        p = points[start:start + chunk]
        a, b, c = (corners[None, :, k, :] - p[:, None, :] for k in range(3))   # (m, F, 3)
        la, lb, lc = (np.linalg.norm(x, axis=2) for x in (a, b, c))
        det = np.einsum("mfi,mfi->mf", a, np.cross(b, c))
        denominator = la * lb * lc + np.einsum("mfi,mfi->mf", a, b) * lc + np.einsum("mfi,mfi->mf", b, c) * la \
            + np.einsum("mfi,mfi->mf", c, a) * lb
        out[start:start + chunk] = np.arctan2(det, denominator).sum(axis=1) / (2.0 * np.pi)
    return out


def _segment_hits_triangle(p, q, a, b, c, eps=1e-12):
    """Rows where segment p→q crosses triangle (a, b, c) (all (m, 3)), interior crossings only."""
    normal = np.cross(b - a, c - a)
    dp = np.einsum("mi,mi->m", p - a, normal)
    dq = np.einsum("mi,mi->m", q - a, normal)
    crosses = dp * dq < 0
    t = dp / np.where(crosses, dp - dq, 1.0)
    x = p + t[:, None] * (q - p)
    inside = np.ones(len(p), bool)
    for u, v in ((a, b), (b, c), (c, a)):
        inside &= np.einsum("mi,mi->m", np.cross(v - u, x - u), normal) > eps * np.einsum("mi,mi->m", normal, normal)
    return crosses & inside


def intersecting_triangle_pairs(positions: np.ndarray, triangles: np.ndarray) -> int:
    """Number of pairs of vertex-disjoint triangles of one mesh that intersect (edge–triangle crossings)."""
    corners = positions[triangles]
    centroids = corners.mean(axis=1)
    radius = np.linalg.norm(corners - centroids[:, None], axis=2).max()
    pairs = cKDTree(centroids).query_pairs(2.0 * radius, output_type="ndarray")
    if len(pairs) == 0:
        return 0
    first, second = triangles[pairs[:, 0]], triangles[pairs[:, 1]]
    disjoint = ~(first[:, :, None] == second[:, None, :]).any(axis=(1, 2))
    pairs = pairs[disjoint]
    hit = np.zeros(len(pairs), bool)
    for edge_owner, other in ((0, 1), (1, 0)):
        tri_e, tri_t = triangles[pairs[:, edge_owner]], triangles[pairs[:, other]]
        a, b, c = (positions[tri_t[:, k]] for k in range(3))
        for i, j in ((0, 1), (1, 2), (2, 0)):
            hit |= _segment_hits_triangle(positions[tri_e[:, i]], positions[tri_e[:, j]], a, b, c)
    return int(hit.sum())


def surface_edges(triangles: np.ndarray) -> np.ndarray:
    """Unique edges (E, 2) of a triangle mesh, each (low, high)."""
    return np.unique(np.sort(np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]]),
                             axis=1), axis=0)


def edges_through_surface(positions: np.ndarray, triangles: np.ndarray, other_vertices: np.ndarray,
                          other_triangles: np.ndarray) -> int:
    """Number of edges of the mesh (positions (N, 3), triangles) that pass through a triangle of the other
    mesh (other_vertices (M, 3), other_triangles)."""
    edges = surface_edges(triangles)
    start, end = positions[edges[:, 0]], positions[edges[:, 1]]
    corners = other_vertices[other_triangles]
    centroids = corners.mean(axis=1)
    reach = 0.5 * np.linalg.norm(end - start, axis=1).max() + np.linalg.norm(corners - centroids[:, None], axis=2).max()
    near = cKDTree(0.5 * (start + end)).query_ball_tree(cKDTree(centroids), reach)
    edge_index = np.repeat(np.arange(len(edges)), [len(found) for found in near])
    if len(edge_index) == 0:
        return 0
    triangle_index = np.concatenate([np.asarray(found, int) for found in near])
    a, b, c = (corners[triangle_index, k] for k in range(3))
    hit = _segment_hits_triangle(start[edge_index], end[edge_index], a, b, c)
    return len(np.unique(edge_index[hit]))


def edge_stretch(positions: np.ndarray, rest: np.ndarray, triangles: np.ndarray) -> float:
    """Largest relative edge elongation (length / rest length − 1) over the mesh's edges."""
    edges = surface_edges(triangles)
    length = np.linalg.norm(positions[edges[:, 0]] - positions[edges[:, 1]], axis=1)
    rest_length = np.linalg.norm(rest[edges[:, 0]] - rest[edges[:, 1]], axis=1)
    return float((length / rest_length).max() - 1.0)

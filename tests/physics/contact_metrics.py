"""Independent checks of contact results (numpy reference code, not the solver's kernels).

- ``winding_numbers``: generalized winding number of a triangle soup around points (Jacobson et al.
  2013, solid angles by Van Oosterom & Strackee), orientation-free when taken as |w|;
- ``intersecting_triangle_pairs``: pairs of triangles of one surface (sharing no vertex) that
  intersect, found as edge–triangle crossings (two triangles intersect iff an edge of one crosses
  the other, or they are coplanar, which a falling cloth never is exactly);
- ``edges_through_surface``: edges of one surface that pass through the triangles of another (a cloth
  hooked through a collider's thin part: no vertex inside, yet the head shows through the cloth);
- ``edge_stretch``: largest edge length / rest length − 1;
- ``distance_to_surface``: unsigned distance of points to a triangle mesh, within a reach.
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


def _closest_on_triangles(points: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Closest points (m, 3) on triangles (a, b, c) to points, pairwise (Ericson's Voronoi-region walk)."""
    ab, ac, ap = b - a, c - a, points - a
    d1, d2 = (ab * ap).sum(1), (ac * ap).sum(1)
    bp = points - b
    d3, d4 = (ab * bp).sum(1), (ac * bp).sum(1)
    cp = points - c
    d5, d6 = (ab * cp).sum(1), (ac * cp).sum(1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    with np.errstate(divide="ignore", invalid="ignore"):
        total = va + vb + vc
        v, w = vb / total, vc / total
        result = a + v[:, None] * ab + w[:, None] * ac
        cases = [((va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0),
                  b + ((d4 - d3) / ((d4 - d3) + (d5 - d6)))[:, None] * (c - b)),
                 ((vb <= 0) & (d2 >= 0) & (d6 <= 0), a + (d2 / (d2 - d6))[:, None] * ac),
                 ((d6 >= 0) & (d5 <= d6), c),
                 ((vc <= 0) & (d1 >= 0) & (d3 <= 0), a + (d1 / (d1 - d3))[:, None] * ab),
                 ((d3 >= 0) & (d4 <= d3), b),
                 ((d1 <= 0) & (d2 <= 0), a)]
    for holds, point in cases:          # the last assignment wins: vertex a first, as the walk tests it
        result = np.where(holds[:, None], point, result)
    return result


def distance_to_surface(points: np.ndarray, vertices: np.ndarray, triangles: np.ndarray, reach: float) -> np.ndarray:
    """Unsigned distance (n,) [m] of points (n, 3) to the triangle mesh, exact up to ``reach`` [m] (inf beyond)."""
    corners = vertices[triangles]
    centroids = corners.mean(axis=1)
    radius = np.linalg.norm(corners - centroids[:, None], axis=2).max()
    nearby = cKDTree(centroids).query_ball_point(points, reach + radius)
    pair_point = np.repeat(np.arange(len(points)), [len(found) for found in nearby])
    pair_triangle = np.fromiter((t for found in nearby for t in found), dtype=np.int64, count=len(pair_point))
    distance = np.full(len(points), np.inf)
    if len(pair_point):
        closest = _closest_on_triangles(points[pair_point], *(corners[pair_triangle, k] for k in range(3)))
        np.minimum.at(distance, pair_point, np.linalg.norm(points[pair_point] - closest, axis=1))
    distance[distance > reach] = np.inf
    return distance

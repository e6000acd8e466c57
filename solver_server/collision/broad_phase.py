"""Broad phases: which points are near which, as a sorted spatial hash grid in ``xp`` or a host k-d tree.

The grid is written only against the array namespace ``xp`` (numpy or cupy), so on a GPU the whole
query stays on the device: cell keys are sorted once, the 27 neighbour cells of every query are found
with two ``searchsorted`` calls, and the candidates of all queries are expanded in one vectorized step
(no Python loop per point). The only host round trip is one integer, the number of candidate pairs,
which sizes the expansion (CuPy needs it to allocate the output).

Three queries, each with a grid version and a scipy ``cKDTree`` version that returns exactly the same
sets (tests/server/test_broad_phase.py):

* :func:`grid_neighbour_pairs` / :func:`kdtree_neighbour_pairs` — pairs i < j of one point set within a
  radius (``cKDTree.query_pairs``);
* :func:`grid_points_near` / :func:`kdtree_points_near` — every (query, point) pair within a radius
  (``cKDTree.query_ball_point``);
* :func:`grid_nearest_within` / :func:`kdtree_nearest_within` — per query the ``k`` nearest points closer
  than a bound (``cKDTree.query(k=k, distance_upper_bound=bound)``).

Outputs are in a defined order, the same for both implementations (solvers whose result depends on
the order of their contacts then give the same frames on CPU and GPU): pairs sorted by (i, j), (query,
point) pairs sorted by query then point, nearest points by query then distance. Distances are compared
as squared distances: within ``radius`` means |p − q|² ≤ radius² and closer than
``bound`` means |p − q|² < bound². Which implementation runs is chosen in :mod:`solver_server.backend`.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

# At most this many cells along an axis: a tiny radius over a huge extent gets larger cells (still
# correct, only more candidates) so that the linear cell key (≤ (2^20 + 3)^3 < 2^61) fits in int64.
CELLS_PER_AXIS_LIMIT = 2 ** 20
# Cells are this much wider than the radius so that rounding in (p − low) / cell never puts two points
# within the radius more than one cell apart.
CELL_WIDENING = 1.0 + 1e-9

NEIGHBOUR_CELLS = 27  # the 3 x 3 x 3 cells around a query's cell


def _grid_candidates(xp, queries, points, radius):
    """(query index (c,), point index (c,)) of every point in the 27 cells around each query.

    queries (m, 3), points (n, 3) [m]; radius [m] (float or 0-d device array) >= 0. Cells are cubes
    of edge >= radius, so every point within ``radius`` of a query is among its candidates.
    """
    empty = xp.zeros(0, dtype=xp.int64)
    if queries.shape[0] == 0 or points.shape[0] == 0:
        return empty, empty
    low = xp.minimum(queries.min(axis=0), points.min(axis=0))              # (3,)
    extent = xp.maximum(queries.max(axis=0), points.max(axis=0)) - low       # (3,)
    cell = xp.maximum(xp.maximum(radius * CELL_WIDENING, extent.max() / CELLS_PER_AXIS_LIMIT), 1e-300)
    dims = xp.floor(extent / cell).astype(xp.int64) + 3                      # cells per axis, 1 padding each side
    strides = xp.stack([dims[1] * dims[2], dims[2], xp.ones_like(dims[2])])  # (3,) linear key of a cell

    def keys(coordinates):
        cells = xp.floor((coordinates - low) / cell).astype(xp.int64) + 1
        return (cells * strides).sum(axis=1)

    point_keys = keys(points)
    order = xp.argsort(point_keys)
    sorted_keys = point_keys[order]
    neighbour = xp.arange(NEIGHBOUR_CELLS)                                   # made on the device: no upload
    steps = xp.stack([neighbour // 9 - 1, (neighbour // 3) % 3 - 1, neighbour % 3 - 1], axis=1)  # (27, 3)
    offsets = (steps * strides).sum(axis=1)                                  # (27,) key offsets
    neighbour_keys = (keys(queries)[:, None] + offsets[None, :]).ravel()     # (m * 27,)
    first = xp.searchsorted(sorted_keys, neighbour_keys, side="left")
    counts = xp.searchsorted(sorted_keys, neighbour_keys, side="right") - first
    ends = xp.cumsum(counts)
    total = int(ends[-1])                                                    # the one device -> host sync
    if total == 0:
        return empty, empty
    slot = xp.searchsorted(ends, xp.arange(total), side="right")             # (query, neighbour cell) per candidate
    within_cell = xp.arange(total) - (ends - counts)[slot]
    return slot // NEIGHBOUR_CELLS, order[first[slot] + within_cell]


def _squared_distance(queries, points, query_index, point_index):
    offset = queries[query_index] - points[point_index]
    return (offset * offset).sum(axis=1)


def _pairs_within(xp, queries, points, radius, increasing: bool):
    """(query index, point index) with |query − point| ≤ radius, sorted by (query, point); with
    ``increasing`` only pairs whose query index is below the point index. One compaction (one
    ``nonzero``: a single synchronization on CuPy) for both outputs."""
    query_index, point_index = _grid_candidates(xp, queries, points, radius)
    keep = _squared_distance(queries, points, query_index, point_index) <= radius * radius
    if increasing:
        keep &= query_index < point_index
    kept = xp.nonzero(keep)[0]
    query_index, point_index = query_index[kept], point_index[kept]
    order = xp.lexsort(xp.stack([point_index, query_index]))
    return query_index[order], point_index[order]


def grid_points_near(xp, queries, points, radius):
    """Every (query, point) pair with |query − point| ≤ radius.

    queries (m, 3), points (n, 3) [m] on the ``xp`` device; radius [m] >= 0 (float or 0-d array).
    Returns (query index (c,), point index (c,)) int64 sorted by (query, point).
    """
    return _pairs_within(xp, queries, points, radius, increasing=False)


def grid_neighbour_pairs(xp, points, radius):
    """Pairs (i, j), i < j, of ``points`` (n, 3) [m] with |p_i − p_j| ≤ radius [m]: (c, 2) int64 sorted
    by (i, j)."""
    first, second = _pairs_within(xp, points, points, radius, increasing=True)
    return xp.stack([first, second], axis=1)


def grid_nearest_within(xp, queries, points, bound, k: int):
    """Per query, its (up to) ``k`` nearest points with |query − point| < bound.

    queries (m, 3), points (n, 3) [m]; bound [m] > 0; k >= 1. Returns (query index (c,), point index
    (c,)) int64 ordered by query, then by distance.
    """
    query_index, point_index = _grid_candidates(xp, queries, points, bound)
    if query_index.shape[0] == 0:
        return query_index, point_index
    squared = _squared_distance(queries, points, query_index, point_index)
    squared = xp.where(squared < bound * bound, squared, xp.inf)                  # too far: sorted last
    order = xp.lexsort(xp.stack([squared, query_index.astype(squared.dtype)]))  # by query, then distance
    ordered_queries = query_index[order]                                        # candidates come by query
    rank = xp.arange(order.shape[0]) - xp.searchsorted(ordered_queries, ordered_queries, side="left")
    kept = order[xp.nonzero((rank < k) & xp.isfinite(squared[order]))[0]]
    return query_index[kept], point_index[kept]


def kdtree_points_near(queries: np.ndarray, points: np.ndarray, radius: float):
    """Host version of :func:`grid_points_near` (scipy cKDTree.query_ball_point)."""
    if len(queries) == 0 or len(points) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pairs = cKDTree(queries).sparse_distance_matrix(cKDTree(points), float(radius), output_type="ndarray")
    order = np.lexsort((pairs["j"], pairs["i"]))
    return pairs["i"][order].astype(np.int64), pairs["j"][order].astype(np.int64)


def kdtree_neighbour_pairs(points: np.ndarray, radius: float) -> np.ndarray:
    """Host version of :func:`grid_neighbour_pairs` (scipy cKDTree.query_pairs): (c, 2) int64, i < j,
    sorted by (i, j)."""
    if len(points) == 0:
        return np.zeros((0, 2), np.int64)
    pairs = cKDTree(points).query_pairs(float(radius), output_type="ndarray").astype(np.int64)
    return pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]


def kdtree_nearest_within(queries: np.ndarray, points: np.ndarray, bound: float, k: int):
    """Host version of :func:`grid_nearest_within` (scipy cKDTree.query with distance_upper_bound)."""
    m = len(queries)
    k = min(int(k), len(points))
    if m == 0 or k == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    distance, index = cKDTree(points).query(queries, k=k, distance_upper_bound=float(bound))
    distance, index = distance.reshape(m, k), index.reshape(m, k)
    found = np.isfinite(distance)
    return np.nonzero(found)[0].astype(np.int64), index[found].astype(np.int64)


__all__ = ["grid_neighbour_pairs", "grid_points_near", "grid_nearest_within", "kdtree_neighbour_pairs",
           "kdtree_points_near", "kdtree_nearest_within"]

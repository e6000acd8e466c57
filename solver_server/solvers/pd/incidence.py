"""Each particle's elements as CSR lists, for kernels that gather over a particle's edges or tetrahedra (a fixed
order of sums on every device, no atomics)."""

from __future__ import annotations

import numpy as np


def corner_incidence(elements: np.ndarray, particle_count: int) -> tuple[np.ndarray, np.ndarray]:
    """elements (E, k) particle indices -> (start (n + 1,) int32, corner (k·E,) int32): particle p's corners are
    corner[start[p]:start[p + 1]], each coded element · k + its place in the element, in increasing order."""
    ends = np.asarray(elements).ravel()                         # e0 corner 0, e0 corner 1, …, e1 corner 0 …
    order = np.argsort(ends, kind="stable")
    start = np.zeros(particle_count + 1, dtype=np.int64)
    np.cumsum(np.bincount(ends, minlength=particle_count), out=start[1:])
    return start.astype(np.int32), order.astype(np.int32)


def incidence(edges: np.ndarray, particle_count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """edges (E, 2) -> (start (n + 1,) int32, edge (2E,) int32, sign (2E,) float64: −1 where the particle is
    the edge's first end, +1 where it is the second); a particle's edges in increasing index order."""
    start, corner = corner_incidence(edges, particle_count)
    sign = np.where(corner % 2 == 0, -1.0, 1.0)
    return start, (corner // 2).astype(np.int32), sign

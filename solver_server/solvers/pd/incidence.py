"""Each particle's edges as CSR lists, for kernels that gather over a particle's edges (a fixed order of sums
on every device, no atomics)."""

from __future__ import annotations

import numpy as np


def incidence(edges: np.ndarray, particle_count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """edges (E, 2) -> (start (n + 1,) int32, edge (2E,) int32, sign (2E,) float64: −1 where the particle is
    the edge's first end, +1 where it is the second); a particle's edges in increasing index order."""
    ends = np.asarray(edges).ravel()                            # e0 first end, e0 second end, e1 ...
    order = np.argsort(ends, kind="stable")
    start = np.zeros(particle_count + 1, dtype=np.int64)
    np.cumsum(np.bincount(ends, minlength=particle_count), out=start[1:])
    sign = np.where(order % 2 == 0, -1.0, 1.0)
    return start.astype(np.int32), (order // 2).astype(np.int32), sign

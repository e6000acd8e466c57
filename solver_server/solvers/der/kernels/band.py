"""Warp kernel of the band matrix's kinematic rows and columns (banded.constrain_band), a thread per column.

Lower band storage (p+1, n): band[d, j] = A_{j+d, j}. The entry is multiplied by the free-DOF indicator of its
column j and, inside the matrix (j + d < n), of its row j + d, in that order (the same two products, exact by
0 and 1, as one array multiply per diagonal); the diagonal of a fixed column becomes 1.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken


@wp.kernel
def constrain_columns(free: wp.array(dtype=wp.float64), band: wp.array(dtype=wp.float64, ndim=2)):
    """free (n,): 1 for a free DOF, 0 for a kinematic one; band (p+1, n), constrained in place."""
    j = wp.tid()
    n = band.shape[1]
    for d in range(band.shape[0]):
        value = band[d, j] * free[j]
        if d > 0 and j + d < n:
            value = value * free[j + d]
        band[d, j] = value
    if free[j] == wp.float64(0.0):
        band[0, j] = wp.float64(1.0)

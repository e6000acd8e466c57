"""Warp kernel of the band matrix's kinematic rows and columns (banded.constrain_band), a thread per kinematic DOF.

Lower band storage (p+1, n): band[d, j] = A_{j+d, j}. Every entry in a kinematic DOF's column or row is multiplied by
the free-DOF indicator of its column j and, inside the matrix (j + d < n), of its row j + d, in that order (exact by
0 and 1: the products a multiply of the whole band by both indicators gives, ±0 included); the diagonal of a fixed
column becomes 1. Entries whose column and row are both free are not touched (a multiply by 1 · 1 keeps them as
they are), so the kernel visits 2p + 1 entries per kinematic DOF instead of the whole band. Where two kinematic DOFs
share an entry both threads write the same product.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken


@wp.func
def _constrained(band: wp.array(dtype=wp.float64, ndim=2), free: wp.array(dtype=wp.float64), d: int, j: int,
                 n: int) -> wp.float64:
    """band[d, j] times the indicator of its column j and (inside the matrix) of its row j + d."""
    value = band[d, j] * free[j]
    if d > 0 and j + d < n:
        value = value * free[j + d]
    return value


@wp.kernel
def constrain_fixed(fixed: wp.array(dtype=wp.int32), free: wp.array(dtype=wp.float64),
                    band: wp.array(dtype=wp.float64, ndim=2)):
    """fixed (k,): the kinematic DOFs; free (n,): 1 for a free DOF, 0 for a kinematic one; band (p+1, n), constrained
    in place: DOF fixed[tid]'s column (band[d, j]) and row (band[d, j − d]) entries."""
    j = fixed[wp.tid()]
    n = band.shape[1]
    for d in range(band.shape[0]):
        band[d, j] = _constrained(band, free, d, j, n)
        if d > 0 and j - d >= 0:
            band[d, j - d] = _constrained(band, free, d, j - d, n)
    band[0, j] = wp.float64(1.0)

"""Warp kernels of the band Cholesky of independent diagonal blocks (der/banded.py on a device), a thread per block.

The system matrix of all strands is one symmetric band matrix in lower storage (p+1, n): band[d, j] = A_{j+d, j},
block diagonal over strands (a strand's DOFs are contiguous, rows [offsets[b], offsets[b+1])). Each block is
factored, solved and inverted by one thread, sequentially along its columns, so a factorization, a solve with any
number of right-hand sides and the band of the inverse are one launch each, with no read of the device:

* ``factor_blocks``: L with A = L Lᵀ in the same storage (L[d, j] = L_{j+d, j}), right-looking: column j is scaled
  by its pivot √A_jj and its outer product taken from the columns right of it. Entries that would couple two blocks
  (j + d at or past the block's end) are 0. A pivot that is not positive (or not finite) marks the block as failed
  and stops it; the count of failed blocks is a device integer, read by the caller when it chooses to.
* ``solve_blocks``: x with L Lᵀ x = b for one right-hand side column per thread's second index, forward then back
  substitution in place.
* ``inverse_band_of_blocks``: the entries of A⁻¹ inside the band (Takahashi's recurrence from the block's last column
  backwards): Z_ij = δ_ij / L_jj² − (1/L_jj) Σ_{m=1..p} L_{j+m, j} Z_{i, j+m} for i ≥ j, i − j ≤ p.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken


@wp.kernel
def factor_blocks(first: int, offsets: wp.array(dtype=wp.int32), band: wp.array2d(dtype=wp.float64),
                  factor: wp.array2d(dtype=wp.float64), failed: wp.array(dtype=wp.int32),
                  failures: wp.array(dtype=wp.int32)):
    """factor (p+1, n): L of block ``first + tid`` (rows offsets[b] .. offsets[b+1]) from band (p+1, n); failed (S,)
    1 for a block with a non-positive pivot (0 otherwise), and failures[0] counts them (atomically)."""
    block = wp.tid() + first
    start = offsets[block]
    end = offsets[block + 1]
    width = band.shape[0]
    for j in range(start, end):
        for d in range(width):
            value = wp.float64(0.0)
            if j + d < end:
                value = band[d, j]
            factor[d, j] = value
    failed[block] = 0
    for j in range(start, end):
        pivot = factor[0, j]
        if not (pivot > wp.float64(0.0)) or not wp.isfinite(pivot):
            failed[block] = 1
            wp.atomic_add(failures, 0, 1)
            return
        root = wp.sqrt(pivot)
        factor[0, j] = root
        reach = wp.min(width - 1, end - 1 - j)           # rows below the diagonal inside the block
        for d in range(1, reach + 1):
            factor[d, j] = factor[d, j] / root
        for k in range(1, reach + 1):
            coupling = factor[k, j]                      # L_{j+k, j}
            for d in range(0, reach - k + 1):            # A_{j+k+d, j+k} −= L_{j+k+d, j} L_{j+k, j}
                factor[d, j + k] = factor[d, j + k] - factor[d + k, j] * coupling


@wp.kernel
def solve_blocks(offsets: wp.array(dtype=wp.int32), factor: wp.array2d(dtype=wp.float64),
                 rhs: wp.array2d(dtype=wp.float64), result: wp.array2d(dtype=wp.float64)):
    """result[:, c] (n, m) = A⁻¹ rhs[:, c] on block b for thread (b, c), with A = L Lᵀ from ``factor``."""
    block, column = wp.tid()
    start = offsets[block]
    end = offsets[block + 1]
    width = factor.shape[0]
    for j in range(start, end):                          # L y = b
        total = rhs[j, column]
        for k in range(1, wp.min(width - 1, j - start) + 1):
            total = total - factor[k, j - k] * result[j - k, column]
        result[j, column] = total / factor[0, j]
    for back in range(end - start):                      # Lᵀ x = y, from the block's last row
        j = end - 1 - back
        total = result[j, column]
        for k in range(1, wp.min(width - 1, end - 1 - j) + 1):
            total = total - factor[k, j] * result[j + k, column]
        result[j, column] = total / factor[0, j]


@wp.kernel
def inverse_band_of_blocks(first: int, offsets: wp.array(dtype=wp.int32), factor: wp.array2d(dtype=wp.float64),
                           selected: wp.array(dtype=wp.int32), all_selected: int,
                           inverse: wp.array2d(dtype=wp.float64)):
    """inverse (p+1, n): the entries of A⁻¹ in the band of block ``first + tid`` (0 where they would couple blocks),
    for a block that is selected (``all_selected`` 1, or selected[b] 1); zeros for the others."""
    block = wp.tid() + first
    start = offsets[block]
    end = offsets[block + 1]
    width = factor.shape[0]
    wanted = all_selected != 0 or selected[block] != 0
    for back in range(end - start):
        j = end - 1 - back
        if not wanted:
            for d in range(width):
                inverse[d, j] = wp.float64(0.0)
            continue
        pivot = factor[0, j]
        reach = wp.min(width - 1, end - 1 - j)
        # off the diagonal first (they need only the columns right of j), then the diagonal, which needs them
        for d in range(1, width):
            value = wp.float64(0.0)
            if d <= reach:
                total = wp.float64(0.0)
                for m in range(1, reach + 1):
                    # Z_{j+d, j+m}, stored at row |d − m| of column j + min(d, m)
                    entry = wp.float64(0.0)
                    if d >= m:
                        entry = inverse[d - m, j + m]
                    else:
                        entry = inverse[m - d, j + d]
                    total = total + factor[m, j] * entry
                value = -total / pivot
            inverse[d, j] = value
        total = wp.float64(0.0)
        for m in range(1, reach + 1):
            total = total + factor[m, j] * inverse[m, j]
        inverse[0, j] = wp.float64(1.0) / (pivot * pivot) - total / pivot

"""Warp kernels of the (A-)Jacobi global step with Chebyshev acceleration (``global_solve.JacobiSolve``; seed
§4.3.2, eqs. 4-8, 4-11, 4-12): the seed's GPU path, one launch per sweep instead of a chain of array operations.

``chebyshev_sweep`` computes, for rows [first + t·chunk, first + (t + 1)·chunk) of a CSR matrix R = (D⁻¹B)ˡ,
x_next = ω (γ (R x + β − x) + x − x_prev) + x_prev in one pass over the row's non-zeros (3 right-hand sides at
once, the PD system being the same for x, y and z); ``csr_product`` is y = A x for the right-hand side's
β = Σ_j Rʲ D⁻¹ b and the residual. Rows are independent: on CUDA a thread per row, on the CPU ranges of rows
over the CPU threads; every row sums its non-zeros in the CSR order, so the layouts agree bit for bit.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from ....kernels import launch_items, warp_device_of, warp_view

wp.set_module_options({"enable_backward": False})


@wp.kernel
def csr_product(indptr: wp.array(dtype=wp.int32), indices: wp.array(dtype=wp.int32),
                values: wp.array(dtype=wp.float64), x: wp.array(dtype=wp.vec3d), first: int, chunk: int,
                y: wp.array(dtype=wp.vec3d)):
    """y[i] = Σ_k values[k] x[indices[k]] over row i's non-zeros, rows [first + t·chunk, first + (t + 1)·chunk)."""
    start = first + wp.tid() * chunk
    for row in range(start, wp.min(start + chunk, indptr.shape[0] - 1)):
        total = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
        for k in range(indptr[row], indptr[row + 1]):
            total = total + values[k] * x[indices[k]]
        y[row] = total


@wp.kernel
def chebyshev_sweep(indptr: wp.array(dtype=wp.int32), indices: wp.array(dtype=wp.int32),
                    values: wp.array(dtype=wp.float64), x: wp.array(dtype=wp.vec3d), beta: wp.array(dtype=wp.vec3d),
                    previous: wp.array(dtype=wp.vec3d), omega: wp.float64, gamma: wp.float64, first: int, chunk: int,
                    out: wp.array(dtype=wp.vec3d)):
    """out[i] = ω (γ ((R x)[i] + β[i] − x[i]) + x[i] − previous[i]) + previous[i] for rows
    [first + t·chunk, first + (t + 1)·chunk) (ω = 1, γ = 1: the plain sweep R x + β)."""
    start = first + wp.tid() * chunk
    for row in range(start, wp.min(start + chunk, indptr.shape[0] - 1)):
        total = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
        for k in range(indptr[row], indptr[row + 1]):
            total = total + values[k] * x[indices[k]]
        now = x[row]
        before = previous[row]
        out[row] = omega * (gamma * (total + beta[row] - now) + now - before) + before


class CsrKernelMatrix:
    """A sparse (n, n) matrix on the job's device as int32/float64 CSR arrays and their Warp views, for the
    kernels above. matrix: scipy.sparse (host); xp: the job's array module."""

    def __init__(self, xp, matrix):
        matrix = matrix.tocsr()
        matrix.sort_indices()
        self.shape = matrix.shape
        self._arrays = [xp.asarray(np.ascontiguousarray(matrix.indptr, dtype=np.int32)),
                        xp.asarray(np.ascontiguousarray(matrix.indices, dtype=np.int32)),
                        xp.asarray(np.ascontiguousarray(matrix.data, dtype=np.float64))]
        self.views = [warp_view(self._arrays[0], wp.int32), warp_view(self._arrays[1], wp.int32),
                      warp_view(self._arrays[2], wp.float64)]
        self.device = warp_device_of(self._arrays[0])
        self.per_item = None            # None: the device's layout (tests force the other one)

    def product(self, xp, x):
        """A x for x (n, 3) C-contiguous float64 on the device: a new (n, 3) array."""
        y = xp.empty((self.shape[0], 3), dtype=xp.float64)
        launch_items(csr_product, self.shape[0], self.device, [*self.views, warp_view(x, wp.vec3d)],
                     [warp_view(y, wp.vec3d)], per_item=self.per_item, split=True)
        return y

    def sweep(self, x, beta, previous, omega: float, gamma: float, out, split: bool = True) -> None:
        """out = ω (γ (A x + β − x) + x − previous) + previous, all (n, 3) C-contiguous float64 on the device.
        split: CPU rows over the CPU threads (False: one launch, as a captured graph needs)."""
        launch_items(chebyshev_sweep, self.shape[0], self.device,
                     [*self.views, warp_view(x, wp.vec3d), warp_view(beta, wp.vec3d), warp_view(previous, wp.vec3d),
                      wp.float64(omega), wp.float64(gamma)], [warp_view(out, wp.vec3d)], per_item=self.per_item,
                     split=split)

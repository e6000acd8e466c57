"""Factorization of the banded system matrix (M(1 + h c) + h² ∇²E) of all strands at once.

With the interleaved DOF ordering (see model.py) the matrix of every strand is banded with half-bandwidth
10 and strands follow each other, so the whole system is ONE symmetric band matrix: a single LAPACK banded
Cholesky (scipy.linalg.cholesky_banded, O(n·11²)) factors every strand at once.  docs/der.md compares it
with a general sparse factorization (SuperLU) of the same matrix.  On a CUDA backend the band is moved to
the host for the factorization and the solve (documented limitation).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg


class NotPositiveDefinite(ArithmeticError):
    """The system matrix is not positive definite (caller retries with projected Hessians)."""


def constrain_band(xp, band, fixed_dofs):
    """Replace rows and columns of kinematic DOFs by the identity (in place), band (11, n)."""
    if fixed_dofs.shape[0] == 0:
        return band
    band[:, fixed_dofs] = 0.0
    for offset in range(1, band.shape[0]):  # one pass per sub-diagonal
        column = fixed_dofs - offset
        column = column[column >= 0]
        band[offset, column] = 0.0
    band[0, fixed_dofs] = 1.0
    return band


class BandedCholesky:
    """Cholesky factor of a symmetric positive definite band matrix in lower storage (11, n)."""

    def __init__(self, backend_to_host, backend_from_host, band):
        self._to_host = backend_to_host
        self._from_host = backend_from_host
        try:
            self._factor = scipy.linalg.cholesky_banded(np.ascontiguousarray(self._to_host(band)), lower=True,
                                                        check_finite=False)
        except np.linalg.LinAlgError as error:
            raise NotPositiveDefinite(str(error)) from error

    @property
    def lower_factor(self):
        """L of A = L Lᵀ in lower band storage (11, n), host array."""
        return self._factor

    def solve(self, rhs):
        result = scipy.linalg.cho_solve_banded((self._factor, True), self._to_host(rhs), check_finite=False)
        return self._from_host(result)


def band_of_inverse(xp, lower_factor, segment_ends):
    """Entries of A⁻¹ inside the band of A (Takahashi recurrence), lower storage (p+1, n), on the host.

    lower_factor: Cholesky factor L of A in lower band storage (p+1, n) (L[d, j] = L_{j+d, j});
    segment_ends: (S,) one-past-last DOF of every independent block (strand).  The recurrence runs from
    the last column of each block backwards; columns at the same distance from their block's end are
    processed together, so the Python loop runs over the longest block's DOF count, vectorized over blocks:

        Z_ij = δ_ij / L_jj² − (1/L_jj) Σ_{m=1..p} L_{j+m, j} Z_{i, j+m}     (i ≥ j, i − j ≤ p)
    """
    factor = np.asarray(lower_factor)
    ends = np.asarray(segment_ends)
    width, n = factor.shape
    p = width - 1
    starts = np.concatenate(([0], ends[:-1]))
    lengths = ends - starts
    inverse = np.zeros((width, n + p))           # padded so that j + m never runs off the end
    padded_factor = np.zeros((width, n + p))
    padded_factor[:, :n] = factor
    m = np.arange(1, p + 1)
    d = np.arange(0, p + 1)
    for back in range(int(lengths.max())):
        j = (ends - 1 - back)[lengths > back]                           # (B,) one column per block
        l_col = padded_factor[1:, j].T                                  # (B, p): L_{j+m, j}
        # Z_{j+d, j+m} for d = 0..p, m = 1..p from the already computed columns right of j
        dd, mm = d[:, None], m[None, :]
        row_minus_col = dd - mm                                         # (p+1, p)
        diag_index = np.abs(row_minus_col)
        col_index = j[:, None, None] + np.minimum(dd, mm)[None]         # column of the lower entry
        z = inverse[np.broadcast_to(diag_index, col_index.shape), col_index]   # (B, p+1, p)
        z = np.where(np.broadcast_to(diag_index <= p, z.shape), z, 0.0)
        pivot = padded_factor[0, j]
        # off-diagonal entries first (they only need columns right of j), then the diagonal, which needs them
        off_diagonal = -np.einsum("bm,bdm->bd", l_col, z[:, 1:, :]) / pivot[:, None]
        inverse[1:, j] = off_diagonal.T
        inverse[0, j] = 1.0 / (pivot * pivot) - np.einsum("bm,bm->b", l_col, off_diagonal) / pivot
    return inverse[:, :n]

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

    def solve(self, rhs):
        result = scipy.linalg.cho_solve_banded((self._factor, True), self._to_host(rhs), check_finite=False)
        return self._from_host(result)

"""Factorization of the banded system matrix (M(1 + h c) + h² ∇²E) of all strands at once.

With the interleaved DOF ordering (see model.py) the matrix of every strand is banded with half-bandwidth
p = 10 and strands follow each other, so the whole system is ONE symmetric band matrix (lower storage
(p+1, n): band[d, j] = A_{j+d, j}) that is block diagonal over strands.  Two ways to factor it:

* LAPACK (numpy backend): scipy.linalg.cholesky_banded / cho_solve_banded, O(n·(p+1)²), on host arrays.
* The kernel path (device backends, or forced with FORCE_KERNEL_PATH): ``kernels.cholesky``, a thread per strand
  block, factors, solves and inverts the band in one launch each, on the device that holds the band, with no read
  of the device (a non-positive pivot is counted there and read when the caller chooses to).  The same factor
  storage as LAPACK's, so everything built on a factor (the band of its inverse, the contacts' response) is one
  code for both.

docs/der.md compares LAPACK with a general sparse factorization (SuperLU); docs/gpu.md has the timings of
the paths.
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.linalg
import warp as wp

from ...kernels import int32_view, launch, launch_split, warp_device_of, warp_view
from .kernels import band as band_kernels
from .kernels import cholesky as cholesky_kernels

# use the kernel path on numpy too (tests compare it with LAPACK; on a device backend it is always used)
FORCE_KERNEL_PATH = False


class NotPositiveDefinite(ArithmeticError):
    """The system matrix is not positive definite (caller retries with projected Hessians)."""


def uses_kernel_path(xp) -> bool:
    """Whether band matrices on this array module are factored by the kernel path (else LAPACK on numpy)."""
    return xp is not np or FORCE_KERNEL_PATH


def constrain_band(xp, band, fixed_dofs):
    """Replace rows and columns of kinematic DOFs by the identity (in place), band (p+1, n).

    Every entry in a kinematic DOF's row or column multiplied by the free-DOF indicator of its column and of its row,
    in one launch over the kinematic DOFs (``kernels.band.constrain_fixed``: no data-sized selection, so no
    synchronization on a device; the other entries stay as they are, so it reads 2p + 1 entries a kinematic DOF
    where a pass over every column read the whole band)."""
    if fixed_dofs.shape[0] == 0:
        return band
    free = xp.ones(band.shape[1], dtype=xp.float64)
    free[fixed_dofs] = 0.0
    launch(band_kernels.constrain_fixed, fixed_dofs.shape[0], inputs=[int32_view(xp, fixed_dofs),
                                                                       warp_view(free, wp.float64),
                                                                       warp_view(band, wp.float64)],
           device=warp_device_of(band))
    return band


class StrandBlocks:
    """The independent diagonal blocks (strands) of a band matrix of width p+1.

    segment_ends: (S,) host integers, one-past-last DOF of every block (blocks are contiguous, the first starts
    at 0).  ``offsets`` (S + 1,) int32 on the device, the blocks' first DOFs and n, is what the kernels read.
    Built once per model (on the host)."""

    def __init__(self, xp, segment_ends, width: int):
        ends = np.asarray(segment_ends, dtype=np.int64)
        if ends.ndim != 1 or ends.shape[0] == 0:
            raise ValueError(f"segment_ends must be a non-empty 1-D array, got shape {ends.shape}")
        lengths = np.diff(np.concatenate(([0], ends)))
        if np.any(lengths <= 0):
            raise ValueError("segment_ends must be strictly increasing and positive")
        self.n = int(ends[-1])
        self.width = width
        self.count = int(ends.shape[0])
        self.segment_ends = ends
        self.offsets = xp.asarray(np.concatenate(([0], ends)).astype(np.int32))

    def columns_of(self, selected):
        """The blocks marked in the host bool mask selected (S,) side by side: their host column indices (c,),
        block after block, and the one-past-last positions (s,) of each block within those columns (the segment
        ends of the compressed band)."""
        selected = np.asarray(selected, dtype=bool)
        ends = self.segment_ends[selected]
        lengths = ends - np.concatenate(([0], self.segment_ends[:-1]))[selected]
        compressed_ends = np.cumsum(lengths)
        columns = np.repeat(ends - compressed_ends, lengths) + np.arange(int(lengths.sum()))
        return columns, compressed_ends


def strand_blocks_of_model(xp, to_host, model, width: int = 11) -> StrandBlocks:
    """StrandBlocks of a DER model (DOF ends of every strand, see model.py: 4 DOFs per vertex but the last)."""
    offsets = np.asarray(to_host(model.strand_offsets), dtype=np.int64)
    return StrandBlocks(xp, 4 * offsets[1:] - np.arange(offsets.shape[0] - 1) - 1, width)


def _factor_blocks(xp, band, blocks: StrandBlocks, deferred: bool = False):
    """(lower factor (p+1, n) of the band (p+1, n), every block by ``kernels.cholesky.factor_blocks``; whether every
    pivot was positive as a 0-d device bool with ``deferred``, else None after raising NotPositiveDefinite where one
    was not)."""
    band = xp.ascontiguousarray(band, dtype=xp.float64)
    factor = xp.empty_like(band)
    failed = xp.empty(blocks.count, dtype=xp.int32)
    failures = xp.zeros(1, dtype=xp.int32)
    launch_split(cholesky_kernels.factor_blocks, blocks.count, warp_device_of(band), [],
                 [warp_view(blocks.offsets, wp.int32), warp_view(band, wp.float64), warp_view(factor, wp.float64),
                  warp_view(failed, wp.int32), warp_view(failures, wp.int32)])
    valid = failures[0] == 0
    if deferred:
        return factor, valid
    if not bool(valid):
        first = int(xp.argmax(failed))
        raise NotPositiveDefinite(f"band matrix not positive definite: non-positive pivot in strand block {first} "
                                  f"of {blocks.count}")
    return factor, None


def _solve_blocks(xp, factor, blocks: StrandBlocks, rhs):
    """x with L Lᵀ x = rhs (n,) or (n, m), L the kernel path's lower factor (p+1, n)."""
    right = xp.ascontiguousarray(rhs if rhs.ndim == 2 else rhs[:, None], dtype=xp.float64)
    result = xp.empty_like(right)
    launch(cholesky_kernels.solve_blocks, (blocks.count, right.shape[1]),
           inputs=[warp_view(blocks.offsets, wp.int32), warp_view(factor, wp.float64), warp_view(right, wp.float64),
                   warp_view(result, wp.float64)], device=warp_device_of(right))
    return result if rhs.ndim == 2 else result[:, 0]


class BandedCholesky:
    """Cholesky factor of a symmetric positive definite band matrix in lower storage (p+1, n), whose
    diagonal blocks `blocks` (StrandBlocks) are independent.  LAPACK on the host for numpy arrays, the
    kernel path otherwise (uses_kernel_path).  A matrix that is not positive definite raises NotPositiveDefinite; on
    the kernel path with ``deferred_check`` the test is not read back but kept as ``valid`` (a 0-d device bool) for
    the caller to read later with its other flags (a matrix positive definite by construction, where reading
    the test would stall a device for nothing)."""

    def __init__(self, xp, band, blocks: StrandBlocks, to_host=None, from_host=None, deferred_check: bool = False):
        self.xp = xp
        self.blocks = blocks
        self.on_kernel_path = uses_kernel_path(xp)
        if band.shape != (blocks.width, blocks.n):
            raise ValueError(f"band shape {band.shape} does not match the strand blocks ({blocks.width}, {blocks.n})")
        self.valid = None
        if self.on_kernel_path:
            self._factor, self.valid = _factor_blocks(xp, band, blocks, deferred_check)
            return
        self._to_host = to_host or (lambda array: array)
        self._from_host = from_host or (lambda array: array)
        try:
            self._factor = scipy.linalg.cholesky_banded(np.ascontiguousarray(self._to_host(band)), lower=True,
                                                        check_finite=False)
        except np.linalg.LinAlgError as error:
            raise NotPositiveDefinite(str(error)) from error

    def refactored(self, band, selected) -> "BandedCholesky":
        """A new factor whose blocks `selected` (host bool (S,)) are factored from `band` (only their columns
        are read) and whose other blocks keep this factor's columns (LAPACK path only: the blocks are
        independent, so the selected columns side by side are one band matrix of their own)."""
        if self.on_kernel_path:
            raise ValueError("refactoring some blocks needs the LAPACK path")
        columns, _ = self.blocks.columns_of(selected)
        try:
            part = scipy.linalg.cholesky_banded(np.ascontiguousarray(self._to_host(band)[:, columns]), lower=True,
                                                check_finite=False)
        except np.linalg.LinAlgError as error:
            raise NotPositiveDefinite(str(error)) from error
        result = copy.copy(self)
        result._factor = self._factor.copy()
        result._factor[:, columns] = part
        return result

    @property
    def lower_factor(self):
        """L of A = L Lᵀ in lower band storage (p+1, n): a host array from LAPACK, an xp array on the kernel path."""
        return self._factor

    def inverse_band(self, selected=None):
        """Entries of A⁻¹ inside the band of A, lower storage (p+1, n), an array of the factor's module (host for
        LAPACK): of every block, or of the blocks marked in ``selected`` (S,) (zero elsewhere)."""
        return band_of_inverse(self.xp if self.on_kernel_path else np, self._factor, self.blocks, selected)

    def solve(self, rhs):
        """A⁻¹ rhs for rhs (n,) or (n, m)."""
        if self.on_kernel_path:
            return _solve_blocks(self.xp, self._factor, self.blocks, rhs)
        result = scipy.linalg.cho_solve_banded((self._factor, True), self._to_host(rhs), check_finite=False)
        return self._from_host(result)


def band_of_inverse(xp, lower_factor, blocks, selected=None):
    """Entries of A⁻¹ inside the band of A (Takahashi's recurrence, ``kernels.cholesky.inverse_band_of_blocks``, a
    thread per block), lower storage (p+1, n), an array of ``xp`` on the factor's device.

    lower_factor: Cholesky factor L of A in lower band storage (p+1, n) (L[d, j] = L_{j+d, j}); blocks:
    StrandBlocks of the independent blocks (strands), or their (S,) host one-past-last DOFs; selected: None (every
    block) or (S,) bool of the blocks wanted (the others are zero)."""
    width, n = lower_factor.shape
    if not isinstance(blocks, StrandBlocks):
        blocks = StrandBlocks(xp, blocks, width)
    factor = xp.ascontiguousarray(lower_factor, dtype=xp.float64)
    inverse = xp.empty_like(factor)
    chosen = xp.zeros(1, dtype=xp.int32) if selected is None else xp.ascontiguousarray(selected, dtype=xp.int32)
    launch_split(cholesky_kernels.inverse_band_of_blocks, blocks.count, warp_device_of(factor), [],
                 [warp_view(blocks.offsets, wp.int32), warp_view(factor, wp.float64), warp_view(chosen, wp.int32),
                  int(selected is None), warp_view(inverse, wp.float64)])
    return inverse

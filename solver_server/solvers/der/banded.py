"""Factorization of the banded system matrix (M(1 + h c) + h² ∇²E) of all strands at once.

With the interleaved DOF ordering (see model.py) the matrix of every strand is banded with half-bandwidth
p = 10 and strands follow each other, so the whole system is ONE symmetric band matrix (lower storage
(p+1, n): band[d, j] = A_{j+d, j}) that is block diagonal over strands.  Two ways to factor it:

* LAPACK (numpy backend): scipy.linalg.cholesky_banded / cho_solve_banded, O(n·(p+1)²), on host arrays.
* The xp path (device backends, or forced with FORCE_XP_PATH), one of two algorithms written only against
  `xp`, both vectorized across strands:

  - dense strand blocks (when the padded blocks hold at most DENSE_BLOCK_ENTRIES numbers): every strand's
    block is copied into a dense (L, L) matrix (L: the longest strand's DOF count; shorter strands padded
    with the identity), factored by one batched Cholesky and inverted (A⁻¹ = L⁻ᵀ L⁻¹, symmetric by
    construction); a solve is one batched matrix product.  A handful of device calls per factorization
    and per solve, where the column loop below makes ~6 per DOF of the longest strand (on an H100 the
    column loop's solve took 103 ms for 1 000 × 20-segment strands, kernel launches and Python overhead);
  - a left-looking band Cholesky, for strands too long or too many for the dense blocks.  Column t of every strand (j = start + t) is computed at once,
  so the Python loop runs over the longest strand's DOF count, not over n:

      L[d, j] = (A[d, j] − Σ_{k=1..p−d} L[d+k, j−k] · L[k, j−k]) / L[0, j],   L[0, j] = √(A[0, j] − Σ_k L[k, j−k]²)

  Entries coupling two strands (j + d at or past the end of j's strand) are set to zero: the blocks are
  independent, and a strand never reads another strand's columns.  Forward and back substitution run the
  same way (columns at the same distance from their strand's start / end together).  No array leaves the
  device; a non-positive pivot is detected with one scalar test per factorization.

docs/der.md compares LAPACK with a general sparse factorization (SuperLU); docs/gpu.md has the timings of
the two paths.
"""

from __future__ import annotations

import copy

import numpy as np
import scipy.linalg
import warp as wp

from ...kernels import launch, warp_device_of, warp_view
from .kernels import band as band_kernels

# use the xp path on numpy too (tests compare it with LAPACK; on a device backend it is always used)
FORCE_XP_PATH = False
# the xp path factors dense strand blocks when strands × L² (L: the longest strand's DOFs) is at most this
# (2²⁶ float64 = 512 MiB per matrix; 1 000 strands × 20 segments: 83² × 1 000 = 6.9 M), else band columns
DENSE_BLOCK_ENTRIES = 1 << 26
# a batched Cholesky counts as failed (not positive definite) when L Lᵀ misses A by more than this × max |A|
# in a block: CuPy does not raise on a failed factorization, and a correct one misses by ~1e-16
CHOLESKY_RESIDUAL = 1e-8


class NotPositiveDefinite(ArithmeticError):
    """The system matrix is not positive definite (caller retries with projected Hessians)."""


def uses_xp_path(xp) -> bool:
    """Whether band matrices on this array module are factored by the xp path (else LAPACK on numpy)."""
    return xp is not np or FORCE_XP_PATH


def constrain_band(xp, band, fixed_dofs):
    """Replace rows and columns of kinematic DOFs by the identity (in place), band (p+1, n).

    Every entry multiplied by the free-DOF indicator of its column and of its row, in one launch
    (``kernels.band.constrain_columns``: no data-sized selection, so no synchronization on a device, and one
    launch where a multiply per sub-diagonal made ~35 array operations)."""
    if fixed_dofs.shape[0] == 0:
        return band
    free = xp.ones(band.shape[1], dtype=xp.float64)
    free[fixed_dofs] = 0.0
    launch(band_kernels.constrain_columns, band.shape[1], inputs=[warp_view(free, wp.float64),
                                                                  warp_view(band, wp.float64)],
           device=warp_device_of(band))
    return band


class StrandBlocks:
    """The independent diagonal blocks (strands) of a band matrix of width p+1, in the order the xp loops
    visit them.

    segment_ends: (S,) host integers, one-past-last DOF of every block (blocks are contiguous, the first
    starts at 0).  Blocks are sorted by decreasing length, so the blocks that still have a column at
    distance t from their start (or end) are a prefix of that order: `active[t]` of them, a host integer,
    and the loops slice device arrays without a synchronization.  Built once per model (on the host)."""

    def __init__(self, xp, segment_ends, width: int):
        ends = np.asarray(segment_ends, dtype=np.int64)
        if ends.ndim != 1 or ends.shape[0] == 0:
            raise ValueError(f"segment_ends must be a non-empty 1-D array, got shape {ends.shape}")
        starts = np.concatenate(([0], ends[:-1]))
        lengths = ends - starts
        if np.any(lengths <= 0):
            raise ValueError("segment_ends must be strictly increasing and positive")
        order = np.argsort(-lengths, kind="stable")
        longest = int(lengths.max())
        self.n = int(ends[-1])
        self.width = width
        self.segment_ends = ends
        # number of blocks longer than t, t = 0 .. longest−1
        self.active = [int(count) for count in lengths.shape[0] - np.searchsorted(np.sort(lengths),
                                                                                  np.arange(longest), side="right")]
        self.starts = xp.asarray(starts[order])
        self.ends = xp.asarray(ends[order])
        block_end = np.repeat(ends, lengths)                                     # (n,) end of each column's block
        inside = np.arange(self.n)[None, :] + np.arange(width)[:, None] < block_end[None, :]
        self.inside = xp.asarray(inside.astype(np.float64))                     # (p+1, n) 1 inside a block
        self.offsets = xp.asarray(np.arange(1, width))                          # (p,) k = 1..p
        # the products L[d+k, j−k]·L[k, j−k] of the factor's column update: pairs (d, k) with d + k ≤ p
        d, k = np.nonzero(np.arange(width)[:, None] + np.arange(1, width)[None, :] < width)
        self.product_row = xp.asarray(d + k + 1)                                # (P,) row d + k
        self.product_offset = xp.asarray(k + 1)                                 # (P,) k
        self.product_sum = xp.asarray((d[None, :] == np.arange(width)[:, None]).astype(np.float64))  # (p+1, P)
        self.longest = longest
        # whether the xp path factors dense strand blocks (their index maps are built only for the xp path:
        # LAPACK on numpy needs none of them)
        self.fits_dense = uses_xp_path(xp) and lengths.shape[0] * longest * longest <= DENSE_BLOCK_ENTRIES
        if self.fits_dense:
            self._build_dense_maps(xp, starts, lengths, inside)

    def _build_dense_maps(self, xp, starts, lengths, inside):
        """Index maps between the band (p+1, n) and the padded dense blocks (S, L, L) (blocks in their
        original order): band entry → lower and upper dense entry, padding diagonal, DOF → padded row."""
        n, size = self.n, self.longest
        block = np.repeat(np.arange(lengths.shape[0]), lengths)                 # (n,) block of every DOF
        local = np.arange(n) - starts[block]                                    # (n,) row within its block
        self.dense_row = xp.asarray(block * size + local)                       # (n,) row in (S·L,)
        row_of_padded = np.full(lengths.shape[0] * size, n, dtype=np.int64)     # padded row → DOF (n: none)
        row_of_padded[block * size + local] = np.arange(n)
        self.padded_dof = xp.asarray(row_of_padded)
        d, j = np.nonzero(inside)
        base = block[j] * size * size
        self.band_entry = xp.asarray(d * n + j)
        self.dense_lower = xp.asarray(base + (local[j] + d) * size + local[j])
        self.dense_upper = xp.asarray(base + local[j] * size + local[j] + d)
        padding = np.nonzero(row_of_padded == n)[0]
        self.dense_padding = xp.asarray(padding // size * size * size + padding % size * (size + 1))


    def columns_of(self, selected):
        """The blocks marked in the host bool mask selected (S,) (blocks in their original order) side by
        side: their host column indices (c,), block after block, and the one-past-last positions (s,) of
        each block within those columns (the segment ends of the compressed band)."""
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


def _factor_in_xp(xp, band, blocks: StrandBlocks, deferred: bool = False):
    """(padded lower factor (p+1, p + n): column j of L is stored at j + p (p zero columns in front), whether every
    pivot was positive as a 0-d device bool with ``deferred``, else None after raising NotPositiveDefinite where one
    was not)."""
    width, n = band.shape
    p = width - 1
    factor = xp.zeros((width, n + p), dtype=band.dtype)
    # gathers through flat indices (row · (n + p) + column): several times faster than 2-D fancy indexing
    flat = factor.reshape(-1)
    offset = blocks.product_offset[:, None]
    row_start, offset_start = blocks.product_row[:, None] * (n + p), offset * (n + p)
    for t, count in enumerate(blocks.active):
        columns = blocks.starts[:count] + t                                     # (c,)
        previous = columns[None, :] - offset + p                                # (P, c) stored columns j − k
        products = flat[row_start + previous] * flat[offset_start + previous]   # (P, c) L[d+k, j−k]·L[k, j−k]
        column = band[:, columns] - blocks.product_sum @ products               # Σ over k for every d
        pivot = xp.sqrt(xp.where(column[0] > 0.0, column[0], xp.nan))           # NaN marks a non-positive pivot
        column = column / pivot
        column[0] = pivot
        factor[:, columns + p] = column * blocks.inside[:, columns]
    valid = xp.all(factor[0, p:] > 0.0)
    if deferred:
        return factor, valid
    if not bool(valid):
        first = int(xp.nonzero(~(factor[0, p:] > 0.0))[0][0])
        raise NotPositiveDefinite(f"band matrix not positive definite: non-positive pivot in column {first} of {n}")
    return factor, None


def _dense_inverse(xp, band, blocks: StrandBlocks, deferred: bool = False):
    """(inverse (S, L, L) of every strand block of the band matrix (p+1, n) (padding rows: identity), whether every
    block's Cholesky factor was sound as a 0-d device bool with ``deferred``, else None after raising
    NotPositiveDefinite where one was not)."""
    count, size = blocks.segment_ends.shape[0], blocks.longest
    dense = xp.zeros(count * size * size, dtype=band.dtype)
    values = band.reshape(-1)[blocks.band_entry]
    dense[blocks.dense_upper] = values
    dense[blocks.dense_lower] = values
    dense[blocks.dense_padding] = 1.0
    dense = dense.reshape(count, size, size)
    try:
        lower = xp.linalg.cholesky(dense)
    except np.linalg.LinAlgError as error:      # numpy raises; CuPy returns a wrong factor (checked below)
        raise NotPositiveDefinite(f"band matrix not positive definite ({error})") from error
    pivots = xp.diagonal(lower, axis1=1, axis2=2)
    miss = xp.max(xp.abs(lower @ xp.swapaxes(lower, 1, 2) - dense), axis=(1, 2))
    good = xp.all(pivots > 0.0, axis=1) & (miss <= CHOLESKY_RESIDUAL * xp.max(xp.abs(dense), axis=(1, 2)))
    valid = None
    if deferred:
        valid = xp.all(good)
    elif not bool(xp.all(good)):
        first = int(xp.argmin(good.astype(xp.int64)))
        raise NotPositiveDefinite(f"band matrix not positive definite: strand block {first} of {count}")
    lower_inverse = xp.linalg.inv(lower)
    return xp.swapaxes(lower_inverse, 1, 2) @ lower_inverse, valid


def _dense_solve(xp, inverse, blocks: StrandBlocks, rhs):
    """A⁻¹ rhs with the strand blocks' inverses (S, L, L); rhs (n,) or (n, m)."""
    right = rhs.reshape(blocks.n, -1)
    padded = xp.concatenate((right, xp.zeros((1, right.shape[1]), dtype=right.dtype)))[blocks.padded_dof]
    count, size = inverse.shape[0], inverse.shape[1]
    result = (inverse @ padded.reshape(count, size, -1)).reshape(count * size, -1)
    return result[blocks.dense_row].reshape(rhs.shape)


def _dense_inverse_band(xp, inverse, blocks: StrandBlocks):
    """Band (p+1, n) of A⁻¹ from the strand blocks' inverses (zero where the band leaves a strand)."""
    band = xp.zeros(blocks.width * blocks.n, dtype=inverse.dtype)
    band[blocks.band_entry] = inverse.reshape(-1)[blocks.dense_lower]
    return band.reshape(blocks.width, blocks.n)


def _solve_in_xp(xp, padded_factor, blocks: StrandBlocks, rhs):
    """x with L Lᵀ x = rhs; rhs (n,) or (n, m)."""
    p = blocks.width - 1
    n = blocks.n
    right = rhs.reshape(n, -1)
    offsets = blocks.offsets[:, None]
    flat, diagonal = padded_factor.reshape(-1), padded_factor[0]
    offset_start = offsets * (n + p)                                        # (p, 1) flat start of row k
    forward = xp.zeros((n + p, right.shape[1]), dtype=padded_factor.dtype)   # y_j stored at j + p
    for t, count in enumerate(blocks.active):
        columns = blocks.starts[:count] + t
        previous = columns[None, :] - offsets + p                           # (p, c) stored j − k
        coupling = flat[offset_start + previous]                            # (p, c) L_{j, j−k}
        total = right[columns] - xp.einsum("kc,kcm->cm", coupling, forward[previous])
        forward[columns + p] = total / diagonal[columns + p][:, None]
    result = xp.zeros((n + p, right.shape[1]), dtype=padded_factor.dtype)    # x_j stored at j
    for back, count in enumerate(blocks.active):
        columns = blocks.ends[:count] - 1 - back
        following = columns[None, :] + offsets                              # (p, c) j + k
        coupling = flat[offset_start + columns[None, :] + p]                # (p, c) L_{j+k, j}
        total = forward[columns + p] - xp.einsum("kc,kcm->cm", coupling, result[following])
        result[columns] = total / diagonal[columns + p][:, None]
    return result[:n].reshape(rhs.shape)


class BandedCholesky:
    """Cholesky factor of a symmetric positive definite band matrix in lower storage (p+1, n), whose
    diagonal blocks `blocks` (StrandBlocks) are independent.  LAPACK on the host for numpy arrays, the
    xp path otherwise (uses_xp_path).  A matrix that is not positive definite raises NotPositiveDefinite; on
    the xp path with ``deferred_check`` the test is not read back but kept as ``valid`` (a 0-d device bool) for
    the caller to read later with its other flags (a matrix positive definite by construction, where reading
    the test would stall a device for nothing)."""

    def __init__(self, xp, band, blocks: StrandBlocks, to_host=None, from_host=None, deferred_check: bool = False):
        self.xp = xp
        self.blocks = blocks
        self.on_xp_path = uses_xp_path(xp)
        if band.shape != (blocks.width, blocks.n):
            raise ValueError(f"band shape {band.shape} does not match the strand blocks ({blocks.width}, {blocks.n})")
        self._inverse = self._padded = None
        self.valid = None
        if self.on_xp_path:
            if blocks.fits_dense:
                self._inverse, self.valid = _dense_inverse(xp, band, blocks, deferred_check)
            else:
                self._padded, self.valid = _factor_in_xp(xp, band, blocks, deferred_check)
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
        if self.on_xp_path:
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
        """L of A = L Lᵀ in lower band storage (p+1, n): a host array from LAPACK, an xp array from the xp
        band columns (the dense strand blocks keep inverses instead: see inverse_band)."""
        if self._inverse is not None:
            raise ValueError("the dense strand-block factorization keeps A⁻¹, not a band factor")
        if self.on_xp_path:
            return self._padded[:, self.blocks.width - 1:]
        return self._factor

    def inverse_band(self):
        """Entries of A⁻¹ inside the band of A, lower storage (p+1, n), on the xp path (an xp array)."""
        if self._inverse is not None:
            return _dense_inverse_band(self.xp, self._inverse, self.blocks)
        if not self.on_xp_path:
            raise ValueError("inverse_band is for the xp path; LAPACK factors use band_of_inverse on their columns")
        return band_of_inverse(self.xp, self.lower_factor, self.blocks)

    def solve(self, rhs):
        """A⁻¹ rhs for rhs (n,) or (n, m)."""
        if self._inverse is not None:
            return _dense_solve(self.xp, self._inverse, self.blocks, rhs)
        if self.on_xp_path:
            return _solve_in_xp(self.xp, self._padded, self.blocks, rhs)
        result = scipy.linalg.cho_solve_banded((self._factor, True), self._to_host(rhs), check_finite=False)
        return self._from_host(result)


def band_of_inverse(xp, lower_factor, blocks):
    """Entries of A⁻¹ inside the band of A (Takahashi recurrence), lower storage (p+1, n), in xp.

    lower_factor: Cholesky factor L of A in lower band storage (p+1, n) (L[d, j] = L_{j+d, j});
    blocks: StrandBlocks of the independent blocks (strands), or their (S,) host one-past-last DOFs.  The
    recurrence runs from the last column of each block backwards; columns at the same distance from their
    block's end are processed together, so the Python loop runs over the longest block's DOF count,
    vectorized over blocks:

        Z_ij = δ_ij / L_jj² − (1/L_jj) Σ_{m=1..p} L_{j+m, j} Z_{i, j+m}     (i ≥ j, i − j ≤ p)
    """
    width, n = lower_factor.shape
    p = width - 1
    if not isinstance(blocks, StrandBlocks):
        blocks = StrandBlocks(xp, blocks, width)
    inverse = xp.zeros((width, n + p), dtype=lower_factor.dtype)       # padded so that j + m never runs off
    padded_factor = xp.zeros((width, n + p), dtype=lower_factor.dtype)
    padded_factor[:, :n] = lower_factor
    m = blocks.offsets[None, :]                                         # (1, p)
    d = xp.arange(width)[:, None]                                       # (p+1, 1)
    # flat index (row · (n + p) + column) of Z_{j+d, j+m}, stored at row |d − m|, column j + min(d, m)
    entry_start = xp.abs(d - m) * (n + p) + xp.minimum(d, m)            # (p+1, p)
    flat_inverse = inverse.reshape(-1)
    for back, count in enumerate(blocks.active):
        j = blocks.ends[:count] - 1 - back                              # (B,) one column per block
        l_col = padded_factor[1:, j].T                                  # (B, p): L_{j+m, j}
        # Z_{j+d, j+m} for d = 0..p, m = 1..p from the already computed columns right of j
        z = flat_inverse[j[:, None, None] + entry_start[None]]          # (B, p+1, p)
        pivot = padded_factor[0, j]
        # off-diagonal entries first (they only need columns right of j), then the diagonal, which needs them
        off_diagonal = -xp.einsum("bm,bdm->bd", l_col, z[:, 1:, :]) / pivot[:, None]
        inverse[1:, j] = off_diagonal.T * blocks.inside[1:, j]
        inverse[0, j] = 1.0 / (pivot * pivot) - xp.einsum("bm,bm->b", l_col, off_diagonal) / pivot
    return inverse[:, :n]

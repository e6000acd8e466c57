"""The kernel path of the DER band Cholesky (der/banded.py, ``kernels.cholesky``) against LAPACK and dense
linear algebra, on numpy and on the strict CuPy-like backend: factor, solve and band of the inverse of random SPD
strand-band matrices; entries coupling two strands ignored; failures reported, deferred where asked."""

import numpy as np
import pytest
import scipy.linalg

from solver_server.solvers.der import banded
from solver_server.solvers.der.banded import (BandedCholesky, NotPositiveDefinite, StrandBlocks, band_of_inverse,
                                              constrain_band, strand_blocks_of_model)
from solver_server.solvers.der.energy import Configuration, elastic_gradient_hessian
from solver_server.solvers.der.model import build_model
from solver_server.emulated_device import PortabilityError, emulated_cuda_backend, refusing_synchronizations, substep_guard

from .helpers import HAIR

P = 10
LENGTHS = [39, 7, 23, 39, 1, 15, 30]      # uneven strand DOF counts, a 1-DOF block included


def _strand_band(rng, lengths, p=P):
    """Lower band (p+1, n) of a random SPD block-diagonal matrix (one band block per strand) and its dense form."""
    n = sum(lengths)
    dense = np.zeros((n, n))
    start = 0
    for size in lengths:
        x = rng.standard_normal((size, size))
        block = x @ x.T
        rows, cols = np.indices((size, size))
        block[np.abs(rows - cols) > p] = 0.0
        block += (np.abs(block).sum(axis=1).max() + 1.0) * np.eye(size)      # diagonally dominant: SPD
        dense[start:start + size, start:start + size] = block
        start += size
    band = np.stack([np.concatenate((np.diag(dense, -d), np.zeros(d))) for d in range(p + 1)])
    return band, dense


@pytest.fixture
def kernel_path(monkeypatch):
    """The kernel path on numpy."""
    monkeypatch.setattr(banded, "FORCE_KERNEL_PATH", True)


def _relative(actual, expected):
    return np.abs(actual - expected).max() / np.abs(expected).max()


def _inside(lengths, p=P):
    """(p+1, n) bool: band entries inside a strand block (row j + d in column j's strand)."""
    ends = np.repeat(np.cumsum(lengths), lengths)
    n = sum(lengths)
    return np.arange(n)[None, :] + np.arange(p + 1)[:, None] < ends[None, :]


def _band_of(dense, p=P):
    return np.stack([np.concatenate((np.diag(dense, -d), np.zeros(d))) for d in range(p + 1)])


@pytest.mark.parametrize("fixed", [False, True])
def test_kernel_path_equals_lapack_on_numpy(kernel_path, fixed):
    rng = np.random.default_rng(3)
    band, _ = _strand_band(rng, LENGTHS)
    if fixed:       # kinematic DOFs, among them a strand's first and last DOF
        constrain_band(np, band, np.array([0, 1, 2, 38, 50, 60, 61, 100]))
    blocks = StrandBlocks(np, np.cumsum(LENGTHS), P + 1)
    reference = scipy.linalg.cholesky_banded(band, lower=True)
    factor = BandedCholesky(np, band, blocks)
    assert factor.on_kernel_path
    assert _relative(factor.lower_factor, reference) < 1e-12
    rhs = rng.standard_normal((band.shape[1], 3))
    expected = scipy.linalg.cho_solve_banded((reference, True), rhs)
    assert _relative(factor.solve(rhs), expected) < 1e-12
    assert _relative(factor.solve(rhs[:, 0]), expected[:, 0]) < 1e-12


def test_band_of_inverse_equals_the_dense_inverse_and_coupling_entries_vanish(kernel_path):
    rng = np.random.default_rng(4)
    band, dense = _strand_band(rng, LENGTHS)
    blocks = StrandBlocks(np, np.cumsum(LENGTHS), P + 1)
    expected = _band_of(np.linalg.inv(dense))
    factor = BandedCholesky(np, band, blocks)
    assert _relative(factor.inverse_band(), expected) < 1e-10
    # the same from LAPACK's factor (the contact response's path on numpy)
    assert _relative(band_of_inverse(np, scipy.linalg.cholesky_banded(band, lower=True), np.cumsum(LENGTHS)),
                     expected) < 1e-10
    ends = np.cumsum(LENGTHS)
    crossing = ~_inside(LENGTHS)
    assert crossing.sum() > 0 and np.all(factor.lower_factor[crossing] == 0.0)
    assert np.all(factor.inverse_band()[crossing] == 0.0)
    assert np.all(np.isin(ends[:-1] - 1, np.nonzero(crossing[1])[0]))


def test_band_of_inverse_of_selected_blocks_is_zero_elsewhere():
    rng = np.random.default_rng(15)
    band, dense = _strand_band(rng, LENGTHS)
    blocks = StrandBlocks(np, np.cumsum(LENGTHS), P + 1)
    factor = BandedCholesky(np, band, blocks)                     # LAPACK
    selected = np.array([False, True, False, False, True, False, True])
    inverse = factor.inverse_band(selected=selected)
    strand_of_column = np.repeat(np.arange(len(LENGTHS)), LENGTHS)
    chosen = selected[strand_of_column]
    assert _relative(inverse[:, chosen], _band_of(np.linalg.inv(dense))[:, chosen]) < 1e-10
    assert np.all(inverse[:, ~chosen] == 0.0)


def test_a_strand_entry_changes_only_that_strands_factor_columns(kernel_path):
    """Perturbing one strand's block changes only that strand's columns of the factor, from the perturbed column
    on."""
    rng = np.random.default_rng(5)
    band, _ = _strand_band(rng, LENGTHS)
    blocks = StrandBlocks(np, np.cumsum(LENGTHS), P + 1)
    before = BandedCholesky(np, band, blocks).lower_factor.copy()
    band[0, 40:46] += 3.0                                  # inside the second strand (DOFs 39 .. 45)
    after = BandedCholesky(np, band, blocks).lower_factor
    changed = np.nonzero(np.any(after != before, axis=0))[0]
    assert changed.min() == 40 and changed.max() == 45


def test_entries_coupling_two_strands_are_ignored_by_the_kernel_path(kernel_path):
    """The kernel path factors the strand blocks: a band entry reaching into the next strand is treated as 0."""
    rng = np.random.default_rng(9)
    band, dense = _strand_band(rng, LENGTHS)
    blocks = StrandBlocks(np, np.cumsum(LENGTHS), P + 1)
    reference = scipy.linalg.cholesky_banded(band, lower=True)
    rhs = rng.standard_normal(band.shape[1])
    band[1:, :][~_inside(LENGTHS)[1:]] = 0.3                 # coupling entries (and the unused band tail)
    factor = BandedCholesky(np, band, blocks)
    assert _relative(factor.lower_factor, reference) < 1e-12
    assert _relative(factor.solve(rhs), np.linalg.solve(dense, rhs)) < 1e-10


def test_not_positive_definite_is_reported_on_every_path(monkeypatch):
    rng = np.random.default_rng(6)
    band, _ = _strand_band(rng, LENGTHS)
    band[0, 70] = -1.0                                     # a negative diagonal entry in the fourth strand
    blocks = StrandBlocks(np, np.cumsum(LENGTHS), P + 1)
    with pytest.raises(NotPositiveDefinite):
        BandedCholesky(np, band, blocks)                   # LAPACK
    monkeypatch.setattr(banded, "FORCE_KERNEL_PATH", True)
    with pytest.raises(NotPositiveDefinite, match="strand block 3 of 7"):
        BandedCholesky(np, band, blocks)
    band[0, 70] = np.nan
    with pytest.raises(NotPositiveDefinite, match="strand block 3 of 7"):
        BandedCholesky(np, band, blocks)


def test_strict_device_backend_factors_and_solves_without_a_download():
    rng = np.random.default_rng(7)
    band, dense = _strand_band(rng, LENGTHS)
    constrain_band(np, band, np.array([0, 5, 39]))
    backend = emulated_cuda_backend()
    xp = backend.xp
    blocks = StrandBlocks(xp, np.cumsum(LENGTHS), P + 1)
    rhs = rng.standard_normal((band.shape[1], 4))
    reference = scipy.linalg.cholesky_banded(band, lower=True)
    device_band, device_rhs = backend.from_host(band), backend.from_host(rhs)
    with substep_guard("a banded solve"), refusing_synchronizations():
        factor = BandedCholesky(xp, device_band, blocks, deferred_check=True)
        solution = factor.solve(device_rhs)
        column = factor.solve(device_rhs[:, 2])
        inverse = factor.inverse_band()
    assert factor.on_kernel_path
    expected = scipy.linalg.cho_solve_banded((reference, True), rhs)
    assert _relative(backend.to_host(solution), expected) < 1e-12
    assert _relative(backend.to_host(column), expected[:, 2]) < 1e-12
    assert _relative(backend.to_host(inverse), band_of_inverse(np, reference, np.cumsum(LENGTHS))) < 1e-10


def test_der_hessian_band_vanishes_at_the_model_strand_ends():
    """The blocks the kernel path treats as independent are really uncoupled in the DER system matrix."""
    rng = np.random.default_rng(8)
    counts = [5, 9, 3, 12]
    points = np.concatenate([np.cumsum(rng.uniform(0.5, 1.0, (count, 3)) * 0.01, axis=0) + index
                             for index, count in enumerate(counts)])
    model = build_model(np, points, np.concatenate(([0], np.cumsum(counts))), HAIR)
    blocks = strand_blocks_of_model(np, lambda array: array, model)
    assert blocks.n == model.n_dofs
    bent = points + rng.normal(scale=1e-3, size=points.shape)
    config = Configuration(bent, rng.normal(size=model.n_edges), model.rest_u, np.zeros(model.bend_vertex.shape[0]))
    _, band = elastic_gradient_hessian(np, model, config, with_hessian=True, project=False, gauss_newton=False)
    inside = _inside(np.diff(np.concatenate(([0], blocks.segment_ends))))
    assert np.abs(band[inside]).max() > 0.0
    assert np.all(band[~inside] == 0.0)


def test_constrain_band_makes_rows_and_columns_of_fixed_dofs_identity():
    rng = np.random.default_rng(10)
    band, dense = _strand_band(rng, LENGTHS)
    fixed = np.array([0, 3, 38, 45, 108, 153])
    dense[fixed, :] = 0.0
    dense[:, fixed] = 0.0
    dense[fixed, fixed] = 1.0
    expected = np.stack([np.concatenate((np.diag(dense, -d), np.zeros(d))) for d in range(P + 1)])
    n = band.shape[1]
    used = np.arange(n)[None, :] + np.arange(P + 1)[:, None] < n        # the band's unused tail is left alone
    # the product of every entry with the indicators of its column and row, bit for bit (negative entries of a
    # kinematic row or column become −0.0, as the product gives)
    free = np.ones(band.shape[1])
    free[fixed] = 0.0
    product = band * free[None, :]
    for d in range(1, P + 1):
        product[d, :n - d] *= free[d:]
    product[0, fixed] = 1.0
    assert np.array_equal(constrain_band(np, band, fixed)[used], expected[used])
    assert band.tobytes() == product.tobytes()
    backend = emulated_cuda_backend()
    device_band = constrain_band(backend.xp, backend.from_host(_strand_band(np.random.default_rng(10), LENGTHS)[0]),
                                 backend.from_host(fixed))
    assert np.array_equal(backend.to_host(device_band)[used], expected[used])


def test_a_deferred_check_reads_nothing_and_keeps_the_test_for_later():
    """On a device a matrix positive definite by construction (DER's Gauss–Newton matrix) is factored without
    reading the positive-definiteness test back (under the complete guard, which refuses any read); the test is
    kept as a device bool, read with the substep's other flags: true for a sound matrix, false where a NaN entry
    spoils a strand's block (no exception inside the substep). Checked at once, the same factorization reads."""
    rng = np.random.default_rng(8)
    band, _ = _strand_band(rng, LENGTHS)
    spoiled = band.copy()
    spoiled[0, 70] = np.nan
    backend = emulated_cuda_backend()
    blocks = StrandBlocks(backend.xp, np.cumsum(LENGTHS), P + 1)
    factors = []
    with substep_guard("a deferred factorization"), refusing_synchronizations():
        for matrix in (band, spoiled):
            factors.append(BandedCholesky(backend.xp, backend.from_host(matrix), blocks, deferred_check=True))
        with pytest.raises(PortabilityError):
            BandedCholesky(backend.xp, backend.from_host(band), blocks)
    assert [bool(backend.to_host(factor.valid)) for factor in factors] == [True, False]

"""The PD tet local step in Warp kernels (solvers/pd/kernels/tet.py) against the selector path it replaces:
Aᵀ W p(A q) of the tet strain and volume batches with their own projections (projections.py), at rest, in and
beyond the strain band, with inverted tets, painted weights and tets without a volume constraint."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.solvers.pd import constraints as pdc
from solver_server.solvers.pd.solver import tet_local_step
from tests.physics.scenes import box_tets

BACKEND = get_backend("cpu")


def _batches(limits, poisson_of):
    vertices, tets, _, _ = box_tets((4, 3, 3), (0.4, 0.3, 0.3))
    tets = tets.astype(np.int64)
    rng = np.random.default_rng(5)
    young = rng.uniform(1e4, 1e5, len(tets))
    strain = pdc.tet_strain(vertices, tets, young, np.tile(limits, (len(tets), 1)))
    volume = pdc.tet_volume(vertices, tets, young, poisson_of(len(tets), rng))
    return vertices, [batch for batch in (strain, volume) if batch is not None]


def _selector_rhs(batches, positions):
    total = np.zeros_like(positions)
    for batch in batches:
        state = (batch.selector @ positions).reshape(batch.count, batch.rows, 3)
        total += batch.weighted_transpose() @ batch.project(np, state, positions).reshape(-1, 3)
    return total


def _deformed(vertices, rng, inverted: int):
    """A stretched, sheared, rotated copy with noise; the first ``inverted`` vertices pushed through their tets."""
    angle = 0.7
    rotation = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1.0]])
    shear = np.array([[1.2, 0.15, 0.0], [0.0, 0.85, 0.1], [0.0, 0.0, 1.05]])
    positions = vertices @ (rotation @ shear).T + rng.normal(scale=0.01, size=vertices.shape)
    positions[:inverted] = positions[:inverted] * [1.0, 1.0, -1.0] + [0.0, 0.0, 0.05]
    return np.ascontiguousarray(positions)


@pytest.mark.parametrize("limits", [[1.0, 1.0], [0.9, 1.1]])
@pytest.mark.parametrize("poisson", ["all", "some", "none"])
@pytest.mark.parametrize("inverted", [0, 12])
def test_kernel_rhs_equals_the_selector_path(limits, poisson, inverted):
    draws = {"all": lambda count, rng: np.full(count, 0.3),
             "some": lambda count, rng: np.where(rng.random(count) < 0.5, 0.45, 0.0),
             "none": lambda count, rng: np.zeros(count)}
    vertices, batches = _batches(np.array(limits), draws[poisson])
    positions = _deformed(vertices, np.random.default_rng(2), inverted)
    local, covered = tet_local_step(BACKEND, batches, len(vertices))
    assert len(covered) == len(batches)
    base = np.random.default_rng(1).normal(size=positions.shape)
    expected = base + _selector_rhs(batches, positions)
    scale = np.abs(expected - base).max()
    rhs = base.copy()
    local.add_rhs(positions, rhs)
    np.testing.assert_allclose(rhs, expected, rtol=0, atol=1e-8 * scale)


def test_rest_state_gives_no_force_and_layouts_agree_bit_for_bit():
    vertices, batches = _batches(np.array([0.9, 1.1]), lambda count, rng: np.full(count, 0.3))
    rest_rhs = np.zeros_like(vertices)
    local, _ = tet_local_step(BACKEND, batches, len(vertices))
    local.add_rhs(np.ascontiguousarray(vertices), rest_rhs)
    # at rest P = F = I for every tet: Aᵀ W p(A q) = Aᵀ W A q, the batches' normal matrices times q
    expected = sum(batch.normal_matrix() @ vertices for batch in batches)
    np.testing.assert_allclose(rest_rhs, expected, rtol=0, atol=1e-9 * np.abs(expected).max())
    positions = _deformed(vertices, np.random.default_rng(4), 12)
    results = []
    for per_item in (False, True):
        local, _ = tet_local_step(BACKEND, batches, len(vertices))
        local.per_item = per_item
        rhs = np.zeros_like(positions)
        local.add_rhs(positions, rhs)
        results.append(rhs)
    np.testing.assert_array_equal(results[0], results[1])

"""The PD triangle-strain local step in Warp kernels (solvers/pd/kernels/triangle.py) against the selector path
it replaces: Aᵀ W p(A q) with the batch's own projection (projections.project_strain_2d), stretched, compressed,
sheared and rotated cloth in and beyond the band, nearly flat-folded triangles; a collinear triangle projects to
singular values in the band; both launch layouts agree bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.solvers.pd import constraints as pdc
from solver_server.solvers.pd.kernels.triangle import TriangleStrainLocal
from tests.physics.scenes import grid

BACKEND = get_backend("cpu")


def _batch(limits):
    vertices, triangles, _ = grid(12, 10, size=0.6)
    rng = np.random.default_rng(11)
    batch = pdc.triangle_strain(vertices, triangles.astype(np.int64), rng.uniform(50.0, 500.0, len(triangles)),
                                np.tile(limits, (len(triangles), 1)))
    return vertices, batch


def _local(batch, count):
    return TriangleStrainLocal(BACKEND, batch.triangles, batch.rest_inverse, batch.limits, batch.weights, count)


def _selector_rhs(batch, positions):
    state = (batch.selector @ positions).reshape(batch.count, 2, 3)
    return batch.weighted_transpose() @ batch.project(np, state, positions).reshape(-1, 3)


def _deformed(vertices, seed):
    rng = np.random.default_rng(seed)
    angle = 0.5
    rotation = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(angle), -np.sin(angle)], [0.0, np.sin(angle), np.cos(angle)]])
    positions = vertices @ (rotation @ np.diag([1.2, 0.8, 1.0])).T
    positions[:, 2] += 0.05 * np.sin(8.0 * vertices[:, 0])               # folds
    positions += rng.normal(scale=0.01, size=vertices.shape)
    positions[5] = 0.5 * (positions[4] + positions[6]) + 1e-7             # nearly collinear corners
    return np.ascontiguousarray(positions)


@pytest.mark.parametrize("limits", [[1.0, 1.0], [0.9, 1.1], [0.5, 2.0]])
def test_kernel_rhs_equals_the_selector_path(limits):
    vertices, batch = _batch(np.array(limits))
    positions = _deformed(vertices, 3)
    base = np.random.default_rng(1).normal(size=positions.shape)
    expected = base + _selector_rhs(batch, positions)
    rhs = base.copy()
    _local(batch, len(vertices)).add_rhs(positions, rhs)
    np.testing.assert_allclose(rhs, expected, rtol=0.0, atol=1e-9 * np.abs(expected - base).max())


def test_collinear_triangle_projects_into_the_band_and_layouts_agree():
    vertices, batch = _batch(np.array([0.9, 1.1]))
    positions = _deformed(vertices, 5)
    first = batch.triangles[0]
    positions[first[2]] = 2.0 * positions[first[1]] - positions[first[0]]  # exactly collinear: rank-1 F
    local = _local(batch, len(vertices))
    results = []
    for per_item in (False, True):
        local.per_item = per_item
        rhs = np.zeros_like(positions)
        local.add_rhs(positions, rhs)
        results.append((rhs, local.forces.copy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    # the collinear triangle's projection P = H Dmᵀ / ω has both singular values in [0.9, 1.1]
    forces = results[0][1].reshape(-1, 2, 3)[0].T                         # (3, 2): ω P Dm⁻ᵀ
    projection = forces @ np.linalg.inv(batch.rest_inverse[0]).T / batch.weights[0]
    assert np.all((np.linalg.svd(projection, compute_uv=False) > 0.9 - 1e-9)
                  & (np.linalg.svd(projection, compute_uv=False) < 1.1 + 1e-9))

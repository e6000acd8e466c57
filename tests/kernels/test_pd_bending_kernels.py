"""The PD bending local step in Warp kernels (solvers/pd/kernels/bending.py) against the selector path it replaces:
Lᵀ W p(L q) with the batch's own projection (eq. 3-14: rest mean curvature along the current ring normal) on a
curved rest shape with painted rigidity, deformed; a flat rest shape adds nothing; layouts agree bit for bit."""

from __future__ import annotations

import numpy as np

from solver_server.backend import get_backend
from solver_server.solvers.pd import constraints as pdc
from solver_server.solvers.pd.kernels.bending import BendingLocal
from tests.physics.scenes import grid

BACKEND = get_backend("cpu")


def _batch(curved: bool):
    vertices, triangles, _ = grid(11, 9, size=0.5)
    if curved:
        vertices[:, 2] = 0.3 * np.sin(3.0 * vertices[:, 0]) + 0.2 * vertices[:, 1] ** 2     # a curved rest shape
    triangles = triangles.astype(np.int64)
    areas = pdc.triangle_areas(vertices, triangles)
    vertex_areas = np.bincount(triangles.ravel(), weights=np.repeat(areas / 3.0, 3), minlength=len(vertices))
    rigidity = np.random.default_rng(2).uniform(1e-4, 1e-3, len(vertices))
    return vertices, pdc.bending(vertices, triangles, rigidity, vertex_areas)


def _local(batch, count):
    return BendingLocal(BACKEND, batch.triangles, batch.interior, batch.selector, batch.weights,
                        batch.signed_magnitude, batch.curved, count)


def _deformed(vertices):
    rng = np.random.default_rng(8)
    positions = vertices * [1.05, 0.95, 1.3] + rng.normal(scale=0.01, size=vertices.shape)
    return np.ascontiguousarray(positions)


def test_kernel_rhs_equals_the_selector_path_on_a_curved_rest_shape():
    vertices, batch = _batch(curved=True)
    assert batch.curved
    positions = _deformed(vertices)
    state = (batch.selector @ positions).reshape(batch.count, 1, 3)
    contribution = batch.weighted_transpose() @ batch.project(np, state, positions).reshape(-1, 3)
    base = np.random.default_rng(1).normal(size=positions.shape)
    rhs = base.copy()
    _local(batch, len(vertices)).add_rhs(positions, rhs)
    assert np.abs(contribution).max() > 0
    np.testing.assert_allclose(rhs, base + contribution, rtol=0.0, atol=1e-12 * np.abs(contribution).max())


def test_flat_rest_shape_adds_nothing_and_layouts_agree():
    vertices, flat = _batch(curved=False)
    assert not flat.curved
    rhs = np.ones_like(vertices)
    _local(flat, len(vertices)).add_rhs(_deformed(vertices), rhs)
    np.testing.assert_array_equal(rhs, np.ones_like(vertices))
    vertices, batch = _batch(curved=True)
    positions = _deformed(vertices)
    results = []
    for per_item in (False, True):
        local = _local(batch, len(vertices))
        local.per_item = per_item
        rhs = np.zeros_like(positions)
        local.add_rhs(positions, rhs)
        results.append(rhs)
    np.testing.assert_array_equal(results[0], results[1])

"""The PD edge-strain local step in a Warp kernel (solvers/pd/kernels/local.py) against the selector path it
replaces: Aᵀ W p(A q) with the batch's own projection, in and beyond the strain band, stiffened weights."""

from __future__ import annotations

import numpy as np

from solver_server.backend import get_backend
from solver_server.kernels import interop
from solver_server.solvers.pd import constraints as pdc
from solver_server.solvers.pd.kernels.local import EdgeStrainLocal
from tests.physics.scenes import grid

BACKEND = get_backend("cpu")


def _batch_and_positions(limits):
    vertices, triangles, _ = grid(12, 9, size=0.7)
    rng = np.random.default_rng(7)
    stretch = rng.uniform(200.0, 2000.0, len(triangles))
    batch = pdc.edge_strain(vertices, triangles, stretch, np.tile(limits, (len(triangles), 1)))
    batch.weights = batch.weights * rng.uniform(1.0, 3.0, batch.count)       # as stiffen_near_pins does
    positions = vertices * [1.15, 0.9, 1.0] + rng.normal(scale=0.01, size=vertices.shape)
    return batch, positions


def _selector_rhs(batch, positions):
    state = (batch.selector @ positions).reshape(batch.count, 1, 3)
    return batch.weighted_transpose() @ batch.project(np, state, positions).reshape(-1, 3)


def test_kernel_rhs_equals_the_selector_path():
    for limits in ([1.0, 1.0], [0.95, 1.05]):
        batch, positions = _batch_and_positions(np.array(limits))
        local = EdgeStrainLocal(BACKEND, batch.edges, batch.limits[:, 0] * batch.rest_length,
                                batch.limits[:, 1] * batch.rest_length, batch.weights, len(positions))
        base = np.random.default_rng(1).normal(size=positions.shape)
        rhs = base.copy()
        local.add_rhs(np.ascontiguousarray(positions), rhs)
        expected = base + _selector_rhs(batch, positions)
        np.testing.assert_allclose(rhs, expected, rtol=1e-12, atol=1e-9 * np.abs(expected).max())


def test_one_thread_and_thread_per_particle_layouts_agree_bit_for_bit():
    batch, positions = _batch_and_positions(np.array([0.95, 1.05]))
    results = []
    for per_item in (False, True):
        local = EdgeStrainLocal(BACKEND, batch.edges, batch.limits[:, 0] * batch.rest_length,
                                batch.limits[:, 1] * batch.rest_length, batch.weights, len(positions))
        local.per_item = per_item
        rhs = np.zeros_like(positions)
        local.add_rhs(np.ascontiguousarray(positions), rhs)
        results.append(rhs)
    np.testing.assert_array_equal(results[0], results[1])


def test_items_cut_over_cpu_threads_give_the_same_bits(monkeypatch):
    """launch_items(split=True): the edges and particles cut over 1, 2 and 3 CPU threads (ranges of at least
    SPLIT_MIN_ITEMS) give the one-launch right-hand side bit for bit."""
    vertices, triangles, _ = grid(80, 80, size=1.0)
    rng = np.random.default_rng(3)
    batch = pdc.edge_strain(vertices, triangles, rng.uniform(200.0, 2000.0, len(triangles)),
                            np.tile([0.95, 1.05], (len(triangles), 1)))
    positions = np.ascontiguousarray(vertices * [1.1, 0.95, 1.0] + rng.normal(scale=0.005, size=vertices.shape))
    assert batch.count >= 2 * interop.SPLIT_MIN_ITEMS
    results = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("TANGLE_KERNEL_THREADS", threads)
        local = EdgeStrainLocal(BACKEND, batch.edges, batch.limits[:, 0] * batch.rest_length,
                                batch.limits[:, 1] * batch.rest_length, batch.weights, len(positions))
        rhs = np.zeros_like(positions)
        local.add_rhs(positions, rhs)
        results.append(rhs)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])

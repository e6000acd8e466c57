"""EdgeStrainLimit on its own: mass-weighted shortening, pinned ends fixed, faults left alone."""

from __future__ import annotations

import numpy as np
import scipy.sparse

from solver_server.backend import get_backend
from solver_server.solvers.pd.strain_limit import FAULT_RATIO, EdgeStrainLimit

BACKEND = get_backend("cpu")


def _chain(count):
    edges = np.stack([np.arange(count - 1), np.arange(1, count)], axis=1)
    rows = np.repeat(np.arange(count - 1), 2)
    selector = scipy.sparse.csr_matrix((np.tile([1.0, -1.0], count - 1), (rows, edges.ravel())),
                                       shape=(count - 1, count))
    return edges, selector


def test_single_edge_moves_by_inverse_mass():
    """Edge of length 2 m, limit 1 m, masses 1 kg and 3 kg: the ends move 0.75 m and 0.25 m, the
    centre of mass stays."""
    edges, selector = _chain(2)
    limit = EdgeStrainLimit(BACKEND, edges, selector, np.array([1.0]), np.array([1.0, 1.0 / 3.0]),
                            rounds=1, passes_per_round=1, relaxation=1.0)
    q = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    out, _, left = limit.apply(np, q)
    np.testing.assert_allclose(out[:, 0], [0.75, 1.75])
    assert left == 0
    np.testing.assert_allclose(q[:, 0], [0.0, 2.0])  # input untouched


def test_pinned_chain_is_pulled_within_its_limit_and_the_pin_stays():
    edges, selector = _chain(4)
    inverse_mass = np.array([0.0, 1.0, 1.0, 1.0])                 # particle 0 pinned
    q = np.zeros((4, 3))
    q[:, 2] = -1.3 * np.arange(4)                                 # every edge 30 % too long
    lengths = {}
    for rounds in (1, 8):
        limit = EdgeStrainLimit(BACKEND, edges, selector, np.ones(3), inverse_mass, rounds=rounds, passes_per_round=8)
        out, _, _ = limit.apply(np, q)
        lengths[rounds] = np.linalg.norm(out[1:] - out[:-1], axis=1)
        np.testing.assert_array_equal(out[0], q[0])
    # Jacobi approaches the limit from above, geometrically: 12 % after 8 passes, 2e-5 after 64
    assert lengths[1].max() < 1.15
    assert lengths[8].max() < 1.0 + 1e-4


def test_short_edges_are_left_alone():
    edges, selector = _chain(3)
    q = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.9, 0.0, 0.0]])
    limit = EdgeStrainLimit(BACKEND, edges, selector, np.ones(2), np.ones(3))
    out, rounds, left = limit.apply(np, q)
    np.testing.assert_array_equal(out, q)
    assert rounds == 0 and left == 0


def test_a_blown_up_point_is_left_to_the_fault_check():
    edges, selector = _chain(3)
    q = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0 * FAULT_RATIO, 0.0, 0.0]])
    limit = EdgeStrainLimit(BACKEND, edges, selector, np.ones(2), np.array([0.0, 1.0, 1.0]))
    out, _, left = limit.apply(np, q)
    np.testing.assert_array_equal(out, q)
    assert left == 1

"""EdgeStrainLimit on its own: mass-weighted shortening, pinned ends fixed, faults left alone, colour
classes, contact planes, and the CPU's one-launch sweeps equal to the per-class launches CUDA runs."""

from __future__ import annotations

import numpy as np

from solver_server.backend import get_backend
from solver_server.solvers.pd.limit_kernels import colour_edges
from solver_server.solvers.pd.strain_limit import FAULT_RATIO, EdgeStrainLimit
from tests.physics.scenes import grid
from solver_server.solvers.pd.constraints import unique_edges

BACKEND = get_backend("cpu")


def _chain(count):
    return np.stack([np.arange(count - 1), np.arange(1, count)], axis=1)


def test_single_edge_moves_by_inverse_mass():
    """Edge of length 2 m, limit 1 m, masses 1 kg and 3 kg: the ends move 0.75 m and 0.25 m, the
    centre of mass stays."""
    limit = EdgeStrainLimit(BACKEND, _chain(2), np.array([1.0]), np.array([1.0, 1.0 / 3.0]),
                            rounds=1, sweeps_per_round=1)
    q = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    out, _, left = limit.apply(np, q)
    np.testing.assert_allclose(out[:, 0], [0.75, 1.75])
    assert left == 0
    np.testing.assert_allclose(q[:, 0], [0.0, 2.0])  # input untouched


def test_pinned_chain_is_pulled_within_its_limit_and_the_pin_stays():
    inverse_mass = np.array([0.0, 1.0, 1.0, 1.0])                 # particle 0 pinned
    q = np.zeros((4, 3))
    q[:, 2] = -1.3 * np.arange(4)                                 # every edge 30 % too long
    lengths = {}
    for sweeps in (1, 64):
        limit = EdgeStrainLimit(BACKEND, _chain(4), np.ones(3), inverse_mass, rounds=1, sweeps_per_round=sweeps)
        out, _, _ = limit.apply(np, q)
        lengths[sweeps] = np.linalg.norm(out[1:] - out[:-1], axis=1)
        np.testing.assert_array_equal(out[0], q[0])
    assert lengths[1].max() > 1.01                                  # one sweep does not finish a chain
    assert lengths[64].max() < 1.0 + 2e-4                          # within the kernel's tolerance (1e-4)


def test_short_edges_are_left_alone():
    q = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.9, 0.0, 0.0]])
    limit = EdgeStrainLimit(BACKEND, _chain(3), np.ones(2), np.ones(3))
    out, rounds, left = limit.apply(np, q)
    np.testing.assert_array_equal(out, q)
    assert rounds == 0 and left == 0


def test_a_blown_up_point_is_left_to_the_fault_check():
    q = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0 * FAULT_RATIO, 0.0, 0.0]])
    limit = EdgeStrainLimit(BACKEND, _chain(3), np.ones(2), np.array([0.0, 1.0, 1.0]))
    out, _, left = limit.apply(np, q)
    np.testing.assert_array_equal(out, q)
    assert left == 1


def test_colour_classes_cover_every_edge_once_and_never_share_a_particle():
    _, triangles, _ = grid(30, 30)
    edges, _ = unique_edges(triangles)
    order, class_start = colour_edges(edges, 900)
    assert sorted(order.tolist()) == list(range(len(edges)))
    for first, stop in zip(class_start[:-1], class_start[1:]):
        ends = edges[order[first:stop]].ravel()
        assert len(np.unique(ends)) == len(ends)
    assert len(class_start) - 1 <= 12        # a grid's particles have 6 edges at most: greedy-like counts


def test_a_particle_on_a_contact_plane_slides_along_it_instead_of_going_below():
    """An edge from a pinned particle at (0, 0, 1) to a free one resting on the plane z = 0 at x = 2 (limit
    1.5 m): without the plane the free end is pulled straight towards the pin, through the floor level
    z = 0 by no more than the edge's own direction allows; with it, it stays at z >= 0 and slides in x."""
    q = np.array([[0.0, 0.0, 1.0], [2.0, 0.0, 0.0]])
    limit = EdgeStrainLimit(BACKEND, _chain(2), np.array([1.5]), np.array([0.0, 1.0]), rounds=1,
                            sweeps_per_round=20)
    free, _, _ = limit.apply(np, q)
    assert free[1, 2] > 0.0                                  # pulled up towards the pin (it is above)
    q_below = np.array([[0.0, 0.0, -1.0], [2.0, 0.0, 0.0]])  # pin below the floor: pulled down without planes
    free, _, _ = limit.apply(np, q_below)
    assert free[1, 2] < -0.1
    planes = (np.array([-1, 1], np.int32), np.zeros((2, 3)), np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 1.0]]))
    held, _, left = limit.apply(np, q_below, planes=planes)
    assert held[1, 2] >= -1e-12
    assert np.linalg.norm(held[1] - held[0]) <= 1.5 * (1.0 + 2e-4) and left == 0
    assert held[1, 0] < 2.0 - 0.3                             # it slid along the floor towards the pin


def test_one_launch_sweeps_equal_the_per_class_launches():
    """The CPU path (every class in one launch) and the CUDA path (a launch per class, run here on the CPU
    device) visit the same edges in the same order: the same positions bit for bit."""
    vertices, triangles, _ = grid(20, 20, size=1.0)
    edges, _ = unique_edges(triangles)
    rest = np.linalg.norm(vertices[edges[:, 0]] - vertices[edges[:, 1]], axis=1)
    rng = np.random.default_rng(3)
    q = vertices + rng.normal(scale=0.01, size=vertices.shape)
    inverse_mass = rng.uniform(0.5, 2.0, len(vertices))
    inverse_mass[0] = 0.0
    results = []
    for parallel in (False, True):
        limit = EdgeStrainLimit(BACKEND, edges, 1.02 * rest, inverse_mass, rounds=2, sweeps_per_round=6)
        limit.parallel = parallel
        limit.sweeps_per_round = 6
        out, _, _ = limit.apply(np, q)
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])

"""EdgeStrainLimit on its own: mass-weighted shortening, pinned ends fixed, faults left alone, the
incidence lists, contact planes, frozen particles, and the CPU's one-thread launches equal to the
thread-per-item launches CUDA runs."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.kernels import cuda_layout
from solver_server.solvers.pd.incidence import incidence
from solver_server.solvers.pd.kernels.limit_sweep import colour_edges
from solver_server.solvers.pd.strain_limit import FAULT_RATIO, EdgeStrainLimit
from solver_server.simulation import Simulation
from tests.physics.scenes import cloth_object, grid, run, scene
from solver_server.solvers.pd.constraints import unique_edges

BACKEND = get_backend("cpu")


def _chain(count):
    return np.stack([np.arange(count - 1), np.arange(1, count)], axis=1)


@pytest.fixture(params=["cpu layout", "cuda layout"])
def layout(request):
    """Each test in the CPU layout (host decisions) and in CUDA's (the device-resident rounds)."""
    with cuda_layout() if request.param == "cuda layout" else contextlib.nullcontext():
        yield request.param


def test_single_edge_moves_by_inverse_mass(layout):
    """Edge of length 2 m, limit 1 m, masses 1 kg and 3 kg: the ends move 0.75 m and 0.25 m, the
    centre of mass stays."""
    limit = EdgeStrainLimit(BACKEND, _chain(2), np.array([1.0]), np.array([1.0, 1.0 / 3.0]),
                            rounds=1, passes_per_round=1, relaxation=1.0)
    q = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    out, _, left = limit.apply(np, q)
    np.testing.assert_allclose(out[:, 0], [0.75, 1.75])
    assert left == 0
    np.testing.assert_allclose(q[:, 0], [0.0, 2.0])  # input untouched


def test_pinned_chain_is_pulled_within_its_limit_and_the_pin_stays(layout):
    inverse_mass = np.array([0.0, 1.0, 1.0, 1.0])                 # particle 0 pinned
    q = np.zeros((4, 3))
    q[:, 2] = -1.3 * np.arange(4)                                 # every edge 30 % too long
    lengths = {}
    for passes in (8, 128):
        limit = EdgeStrainLimit(BACKEND, _chain(4), np.ones(3), inverse_mass, rounds=1, passes_per_round=passes)
        out, _, _ = limit.apply(np, q)
        lengths[passes] = np.linalg.norm(out[1:] - out[:-1], axis=1)
        np.testing.assert_array_equal(out[0], q[0])
    # Jacobi with averaging approaches the limit from above, geometrically: 18 % after 8 passes (from 30 %)
    assert 1.01 < lengths[8].max() < 1.2
    assert lengths[128].max() < 1.0 + 2e-4                         # the kernel's tolerance is 1e-4


def test_short_edges_are_left_alone(layout):
    """(The CPU layout stops at the first round that finds nothing; CUDA's runs its rounds as no-ops.)"""
    q = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.9, 0.0, 0.0]])
    limit = EdgeStrainLimit(BACKEND, _chain(3), np.ones(2), np.ones(3))
    out, rounds, left = limit.apply(np, q)
    np.testing.assert_array_equal(out, q)
    assert rounds == (0 if layout == "cpu layout" else limit.rounds) and left == 0


def test_a_blown_up_point_is_left_to_the_fault_check(layout):
    q = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0 * FAULT_RATIO, 0.0, 0.0]])
    limit = EdgeStrainLimit(BACKEND, _chain(3), np.ones(2), np.array([0.0, 1.0, 1.0]))
    out, _, left = limit.apply(np, q)
    np.testing.assert_array_equal(out, q)
    assert left == 1


def test_a_call_after_a_fault_corrects_again(layout):
    """The fault leaves that call's state alone; the next call, without it, shortens its edges as a fresh limit
    does (the device layout's halt is per call)."""
    def limit():
        return EdgeStrainLimit(BACKEND, _chain(3), np.ones(2), np.array([0.0, 1.0, 1.0]))

    faulted = limit()
    faulted.apply(np, np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.0 * FAULT_RATIO, 0.0, 0.0]]))
    q = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [2.5, 0.0, 0.0]])
    out, _, _ = faulted.apply(np, q)
    assert np.linalg.norm(out[2] - out[1]) < 1.01
    np.testing.assert_array_equal(out, limit().apply(np, q)[0])


def test_incidence_lists_every_edge_at_both_ends_with_its_sign():
    edges = np.array([[0, 1], [1, 2], [0, 2], [2, 3]])
    start, edge, sign = incidence(edges, 5)
    assert start.tolist() == [0, 2, 4, 7, 8, 8]                 # particle 4 has no edge
    for particle in range(5):
        for k in range(start[particle], start[particle + 1]):
            first, second = edges[edge[k]]
            assert particle in (first, second)
            assert sign[k] == (-1.0 if particle == first else 1.0)
    assert sorted(edge.tolist()) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_a_particle_on_a_contact_plane_slides_along_it_instead_of_going_below(layout):
    """An edge from a pinned particle at (0, 0, 1) to a free one resting on the plane z = 0 at x = 2 (limit
    1.5 m): without the plane the free end is pulled straight towards the pin, through the floor level
    z = 0 by no more than the edge's own direction allows; with it, it stays at z >= 0 and slides in x."""
    q = np.array([[0.0, 0.0, 1.0], [2.0, 0.0, 0.0]])
    limit = EdgeStrainLimit(BACKEND, _chain(2), np.array([1.5]), np.array([0.0, 1.0]), rounds=1,
                            passes_per_round=20, relaxation=1.0)
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


def test_colour_classes_cover_every_edge_once_and_never_share_a_particle():
    _, triangles, _ = grid(30, 30)
    edges, _ = unique_edges(triangles)
    order, class_start = colour_edges(edges, 900)
    assert sorted(order.tolist()) == list(range(len(edges)))
    for first, stop in zip(class_start[:-1], class_start[1:]):
        ends = edges[order[first:stop]].ravel()
        assert len(np.unique(ends)) == len(ends)
    assert len(class_start) - 1 <= 12        # a grid's particles have 6 edges at most


def test_gauss_seidel_sweeps_one_launch_equal_the_per_class_launches():
    vertices, triangles, _ = grid(20, 20, size=1.0)
    edges, _ = unique_edges(triangles)
    rest = np.linalg.norm(vertices[edges[:, 0]] - vertices[edges[:, 1]], axis=1)
    q = vertices + np.random.default_rng(5).normal(scale=0.01, size=vertices.shape)
    results = []
    for parallel in (False, True):
        limit = EdgeStrainLimit(BACKEND, edges, 1.02 * rest, np.ones(len(vertices)), passes_per_round=5)
        with cuda_layout() if parallel else contextlib.nullcontext():
            assert limit.parallel == parallel
            results.append(limit.sweep(np, q))
    assert np.abs(results[0] - q).max() > 1e-3
    np.testing.assert_array_equal(results[0], results[1])


def test_frozen_particles_do_not_move():
    q = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [4.0, 0.0, 0.0]])
    limit = EdgeStrainLimit(BACKEND, _chain(3), np.ones(2), np.ones(3), rounds=1, passes_per_round=16,
                            relaxation=1.0)
    out = limit.sweep(np, q, frozen=np.array([False, True, False]))
    np.testing.assert_array_equal(out[1], q[1])
    np.testing.assert_allclose(np.linalg.norm(out[1:] - out[:-1], axis=1), 1.0, atol=2e-4)


def test_one_thread_launches_equal_the_thread_per_item_launches():
    """The CPU path (one thread looping over all items) and the CUDA path (a thread per item, run here on
    the CPU device in CUDA's layout, as on the emulated device) compute the same sums in the same order: the same positions bit for bit."""
    vertices, triangles, _ = grid(20, 20, size=1.0)
    edges, _ = unique_edges(triangles)
    rest = np.linalg.norm(vertices[edges[:, 0]] - vertices[edges[:, 1]], axis=1)
    rng = np.random.default_rng(3)
    q = vertices + rng.normal(scale=0.01, size=vertices.shape)
    inverse_mass = rng.uniform(0.5, 2.0, len(vertices))
    inverse_mass[0] = 0.0
    planes = (np.arange(len(vertices), dtype=np.int32), q - [0.0, 0.0, 0.005],
              np.tile([0.0, 0.0, 1.0], (len(vertices), 1)))
    results = []
    for parallel in (False, True):
        limit = EdgeStrainLimit(BACKEND, edges, 1.02 * rest, inverse_mass, rounds=2, passes_per_round=6)
        with cuda_layout() if parallel else contextlib.nullcontext():
            assert limit.parallel == parallel
            out, _, _ = limit.apply(np, q, planes=planes)
        results.append(out)
    assert np.abs(results[0] - q).max() > 1e-3                  # the pass did something
    np.testing.assert_array_equal(results[0], results[1])


def _pulled_strip(pull: float):
    """A 0.4 m strip of cloth (limits 1, 1.1) pinned along both short ends, one end's pins dragged ``pull`` [m]
    along the strip over frames 2-6 (drive vertices): the frame stats of every frame."""
    vertices, triangles, index = grid(9, 3, size=0.4, height=1.0)
    vertices[:, 1] *= 0.25
    pins = np.concatenate([index[0], index[-1]])
    cloth = cloth_object(vertices, triangles, pins=pins.tolist(), params={"strain_limits": [1.0, 1.1]},
                         object_id="Strip", animated=True, matrix_world=np.eye(4))
    pulled_end = np.isin(np.arange(len(vertices)), index[-1])

    def drive(frame):
        moved = vertices.copy()
        moved[pulled_end, 0] += pull * min(max(frame - 1, 0), 5) / 5.0
        return {"Strip": {"matrix_world": np.eye(4), "vertices": moved}}

    return [stats for _, _, stats in run(Simulation(scene([cloth], frame_end=8), BACKEND), drive)]


def test_a_frame_says_which_cloth_its_pins_stretched_past_the_limit():
    """Pins dragged 25 % apart stretch the strip beyond its hard limit (its σmax, 1.1) whatever the limit does:
    the frame stats count the edges beyond it by more than 2 % of their length, name the object and give the worst
    stretch; 5 % apart stays within the limit and reports nothing."""
    stretched = _pulled_strip(0.1)[-1]
    assert stretched["stretch_beyond_limit"] > 0
    assert stretched["stretch_beyond_limit_objects"] == ["Strip"]
    assert stretched["stretch_worst"] > 1.1 + 0.02 + 0.02
    assert all("stretch_beyond_limit" not in stats for stats in _pulled_strip(0.02))


@pytest.mark.parametrize("limits, hard", [((1.0, 1.1), 1.1), ((1.0, 1.0), 1.02), ((0.9, 1.01), 1.02)])
def test_the_hard_limit_is_the_artists_sigma_max_or_the_slack_for_an_inextensible_cloth(limits, hard):
    """Limits (1, 1.1) stop cloth edges at 1.1 × their rest length (not 1.1 + the slack); a cloth that may not
    stretch (σmax 1) or hardly (1.01) gets the slack (0.02) as room to move."""
    vertices, triangles, _ = grid(4, 4, size=0.3, height=1.0)
    cloth = cloth_object(vertices, triangles, params={"strain_limits": list(limits)})
    solver = Simulation(scene([cloth], frame_end=2), BACKEND).groups[0].solver
    edges = np.asarray(solver.strain_limit.edges)
    rest = np.linalg.norm(vertices[edges[:, 0]] - vertices[edges[:, 1]], axis=1)
    np.testing.assert_allclose(np.asarray(solver.strain_limit.max_length) / rest, hard, rtol=1e-12)


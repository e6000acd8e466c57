"""Exact Delassus operator W = J A⁻¹ Jᵀ and projected Gauss–Seidel in contact space (contact_space.py)."""

import numpy as np
import pytest
import scipy.sparse

from solver_server.solvers.der import banded, contact_space
from solver_server.solvers.der.banded import BandedCholesky, constrain_band, strand_blocks_of_model
from solver_server.solvers.der.contact_space import DelassusOperator
from solver_server.solvers.der.energy import elastic_gradient_hessian
from solver_server.solvers.der.model import DerMaterial, build_model
from solver_server.solvers.der.state import rest_state, transported_configuration

from solver_server.emulated_device import emulated_cuda_backend, substep_guard

from .helpers import straight

MATERIAL = DerMaterial(radius=5e-5, young_modulus=3e9, shear_modulus=1e9, density=1300.0, damping=0.5)
H = 1.0 / 120.0


def _system_parts(seed=1):
    """Five bent strands of uneven length: rest points (N, 3), strand offsets, the band of A (Gauss–Newton
    elastic Hessian · h² + masses) with their clamped roots constrained, and the clamped DOFs."""
    lengths = [9, 14, 6, 11, 8]
    points = np.vstack([straight(n, 0.01 * n, origin=(0.0, 0.02 * k, 0.0)) for k, n in enumerate(lengths)])
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    model = build_model(np, points, offsets, MATERIAL)
    generator = np.random.default_rng(seed)
    config = transported_configuration(np, model, rest_state(np, model),
                                       points + generator.normal(scale=2e-3, size=points.shape),
                                       generator.normal(scale=0.2, size=model.n_edges))
    _, band = elastic_gradient_hessian(np, model, config, gauss_newton=True)
    band *= H * H
    band[0] += model.mass
    roots = model.strand_offsets[:-1]
    fixed = np.concatenate([model.position_dofs[roots].ravel(), model.position_dofs[roots + 1].ravel()])
    constrain_band(np, band, fixed)
    return points, offsets, band, fixed


def _system(seed=1):
    """The model of _system_parts, the factor of A, A densely and the kinematic DOF mask."""
    points, offsets, band, fixed = _system_parts(seed)
    model = build_model(np, points, offsets, MATERIAL)
    dense = np.zeros((model.n_dofs, model.n_dofs))
    for d in range(band.shape[0]):
        index = np.arange(model.n_dofs - d)
        dense[index + d, index] = band[d, index]
        dense[index, index + d] = band[d, index]
    dof_fixed = np.zeros(model.n_dofs, dtype=bool)
    dof_fixed[fixed] = True
    return model, BandedCholesky(np, band, strand_blocks_of_model(np, lambda a: a, model)), dense, dof_fixed


def _contacts(model, generator, pairs=14, points=5, disjoint=False):
    """Random edge–edge contacts between edges (also two of one strand) and vertex contacts, each with a
    free (not clamped) vertex.  disjoint: no two contacts share an edge or a vertex (a well-posed problem;
    otherwise contacts may repeat or contradict each other)."""
    edge_vertex = model.edge_vertex
    roots = model.strand_offsets[:-1]
    clamped = np.zeros(model.n_vertices, dtype=bool)
    clamped[roots] = clamped[roots + 1] = True
    free_edges = np.nonzero(~clamped[edge_vertex + 1])[0]
    if disjoint:   # every other free edge, so that no two chosen edges share a vertex
        position = edge_vertex[free_edges] - model.strand_offsets[model.edge_strand[free_edges]]
        free_edges = free_edges[position % 2 == 0]
        chosen = generator.choice(free_edges, size=2 * pairs + points, replace=False)
    rows, weights = [], []
    for k in range(pairs):
        a, b = chosen[2 * k:2 * k + 2] if disjoint else generator.choice(free_edges, size=2, replace=False)
        s, t = generator.uniform(size=2)
        rows.append([edge_vertex[a], edge_vertex[a] + 1, edge_vertex[b], edge_vertex[b] + 1])
        weights.append([1 - s, s, -(1 - t), -t])
    point_vertices = edge_vertex[chosen[2 * pairs:]] + 1 if disjoint \
        else generator.choice(np.nonzero(~clamped)[0], size=points, replace=False)
    for vertex in point_vertices:
        rows.append([vertex] * 4)
        weights.append([1.0, 0.0, 0.0, 0.0])
    return np.asarray(rows, dtype=np.int64), np.asarray(weights)


def _normals(n, seed=0):
    normal = np.random.default_rng(seed).normal(size=(n, 3))
    return normal / np.linalg.norm(normal, axis=1, keepdims=True)


def _approaching_contacts(system_seed, contact_seed, normal_seed):
    """A well-posed contact problem on _system(system_seed): (model, factor, dof_fixed, vertices, weights,
    normals (n, 3), normal targets (n,) [m/s], approaching relative velocities (n, 3) [m/s])."""
    model, factor, _, dof_fixed = _system(seed=system_seed)
    generator = np.random.default_rng(contact_seed)
    vertices, weights = _contacts(model, generator, pairs=7, points=4, disjoint=True)
    n = vertices.shape[0]
    normal = _normals(n, seed=normal_seed)
    target = np.abs(generator.normal(scale=0.05, size=n))
    relative = generator.normal(scale=0.05, size=(n, 3)) - 0.1 * normal
    return model, factor, dof_fixed, vertices, weights, normal, target, relative


def _dense_delassus(model, dense, dof_fixed, vertices, weights):
    inverse = np.linalg.inv(dense)
    inverse[dof_fixed, :] = 0.0
    inverse[:, dof_fixed] = 0.0
    jacobian = np.zeros((3 * vertices.shape[0], model.n_dofs))
    for c in range(vertices.shape[0]):
        for slot in range(4):
            for axis in range(3):
                jacobian[3 * c + axis, model.vertex_dof[vertices[c, slot]] + axis] += weights[c, slot]
    return jacobian @ inverse @ jacobian.T


@pytest.mark.parametrize("kernel_path", [False, True])
def test_operator_equals_the_dense_delassus_matrix(monkeypatch, kernel_path):
    monkeypatch.setattr(banded, "FORCE_KERNEL_PATH", kernel_path)
    model, factor, dense, dof_fixed = _system()
    assert factor.on_kernel_path == kernel_path
    generator = np.random.default_rng(5)
    vertices, weights = _contacts(model, generator)
    operator = DelassusOperator(np, model, factor, vertices, weights, dof_fixed, _normals(vertices.shape[0]))
    expected = _dense_delassus(model, dense, dof_fixed, vertices, weights)
    impulses = generator.normal(size=(vertices.shape[0], 3))
    scale = np.abs(expected).max()
    np.testing.assert_allclose(operator.apply(impulses).ravel(), expected @ impulses.ravel(), atol=1e-10 * scale * 3)
    for c in range(vertices.shape[0]):
        np.testing.assert_allclose(operator.diagonal[c], expected[3 * c:3 * c + 3, 3 * c:3 * c + 3],
                                   atol=1e-10 * scale)


def test_colouring_separates_contacts_that_share_a_strand(monkeypatch):
    """The colouring of the colour sweeps (CUDA's; the CPU kernel sweeps contact after contact, uncoloured)."""
    monkeypatch.setattr(contact_space, "SEQUENTIAL_ON_CPU", False)
    model, factor, _, dof_fixed = _system()
    vertices, weights = _contacts(model, np.random.default_rng(2), pairs=30)
    operator = DelassusOperator(np, model, factor, vertices, weights, dof_fixed, _normals(vertices.shape[0]))
    strands = [set(model.vertex_strand[vertices[c][weights[c] != 0.0]]) for c in range(vertices.shape[0])]
    for c in range(vertices.shape[0]):
        for d in range(c):
            if strands[c] & strands[d]:
                assert operator.colour[c] != operator.colour[d]
    assert operator.colours >= max(sum(s in found for found in strands) for s in range(model.n_strands))


def test_gauss_seidel_solves_the_linear_contact_problem():
    """Converged sweeps satisfy Signorini–Coulomb on the linear model: u_N ≥ target, λ in the cone, λ_N > 0
    only where u_N = target, and sticking contacts (‖λ_T‖ < μ λ_N) do not slide."""
    model, factor, dense, dof_fixed = _system(seed=3)
    generator = np.random.default_rng(11)
    vertices, weights = _contacts(model, generator, pairs=7, points=4, disjoint=True)
    n = vertices.shape[0]
    normal = generator.normal(size=(n, 3))
    normal /= np.linalg.norm(normal, axis=1, keepdims=True)
    operator = DelassusOperator(np, model, factor, vertices, weights, dof_fixed, normal)
    target = np.abs(generator.normal(scale=0.05, size=n))
    mu = np.full(n, 0.4)
    relative = generator.normal(scale=0.05, size=(n, 3)) - 0.1 * normal     # approaching
    impulse, sweeps, change = operator.gauss_seidel(relative, np.zeros((n, 3)), target, mu, 2000, np.full(n, 1e-13))
    assert change <= 1.0 and sweeps < 2000
    velocity = relative + operator.apply(impulse)
    u_normal = np.einsum("nc,nc->n", velocity, normal)
    r_normal = np.einsum("nc,nc->n", impulse, normal)
    tangential = impulse - r_normal[:, None] * normal
    sliding = velocity - u_normal[:, None] * normal
    scale = np.abs(relative).max()
    assert np.all(r_normal >= 0.0)
    assert np.all(np.linalg.norm(tangential, axis=1) <= mu * r_normal + 1e-12)
    assert np.all(u_normal >= target - 1e-9 * scale)
    pushing = r_normal > 1e-9 * r_normal.max()
    np.testing.assert_allclose(u_normal[pushing], target[pushing], atol=1e-9 * scale)
    sticking = pushing & (np.linalg.norm(tangential, axis=1) < 0.99 * mu * r_normal)
    assert sticking.any() and pushing.sum() < n
    np.testing.assert_allclose(sliding[sticking], 0.0, atol=1e-9 * scale)
    # sliding contacts: friction on the cone's edge, against the sliding (the seed's projection scales the
    # sticking impulse onto the disc, eq. 3.5, so it is not exactly antiparallel to the sliding velocity)
    slipping = pushing & ~sticking
    assert slipping.any()
    np.testing.assert_allclose(np.linalg.norm(tangential[slipping], axis=1), mu[slipping] * r_normal[slipping],
                               rtol=1e-9)
    assert np.all(np.einsum("nc,nc->n", tangential[slipping], sliding[slipping]) < 0.0)


@pytest.mark.parametrize("max_colours", [1, 2])
def test_capped_colouring_shares_colours_and_converges_to_the_same_solution(monkeypatch, max_colours):
    """Fewer colours than the contacts on one strand need: contacts share a colour with neighbours, step
    with their block scaled by the number sharing, and the sweeps still reach the frictionless problem's
    unique solution (W positive definite for disjoint contacts) — the colour sweeps (CUDA's)."""
    monkeypatch.setattr(contact_space, "SEQUENTIAL_ON_CPU", False)
    model, factor, _, dof_fixed = _system(seed=4)
    generator = np.random.default_rng(8)
    vertices, weights = _contacts(model, generator, pairs=7, points=4, disjoint=True)
    n = vertices.shape[0]
    normal = _normals(n, seed=3)
    exact = DelassusOperator(np, model, factor, vertices, weights, dof_fixed, normal)
    capped = DelassusOperator(np, model, factor, vertices, weights, dof_fixed, normal, max_colours=max_colours)
    assert exact.colours > max_colours and capped.colours == max_colours
    assert np.all(exact.sharing == 1.0) and capped.sharing.max() > 1.0
    strands = [set(model.vertex_strand[vertices[c][weights[c] != 0.0]]) for c in range(n)]
    for c in range(n):   # sharing: the most contacts of c's colour on one of c's strands
        expected = max(sum(1 for d in range(n) if capped.colour[d] == capped.colour[c] and s in strands[d])
                       for s in strands[c])
        assert capped.sharing[c] == expected
    target = np.abs(generator.normal(scale=0.05, size=n))
    relative = generator.normal(scale=0.05, size=(n, 3)) - 0.1 * normal
    solutions = []
    for operator in (exact, capped):
        impulse, sweeps, change = operator.gauss_seidel(relative, np.zeros((n, 3)), target, np.zeros(n), 20000,
                                                        np.full(n, 1e-14))
        assert change <= 1.0 and sweeps < 20000
        solutions.append(impulse)
    np.testing.assert_allclose(solutions[1], solutions[0], atol=1e-8 * np.abs(solutions[0]).max())
    velocity = relative + exact.apply(solutions[0])
    assert np.all(np.einsum("nc,nc->n", velocity, normal) >= target - 1e-9)


@pytest.mark.parametrize("kernel", [True, False])
def test_operator_and_sweeps_run_on_the_strict_device_backend(monkeypatch, kernel):
    """Device arrays only, no device -> host copy inside the substep (CuPy-like strict backend): the
    same W and the same Gauss–Seidel impulses as on numpy, with the CPU kernel's sequential sweeps and with the
    colour sweeps (capped so that colours are shared)."""
    monkeypatch.setattr(banded, "FORCE_KERNEL_PATH", True)
    monkeypatch.setattr(contact_space, "SEQUENTIAL_ON_CPU", kernel)
    model, factor, dof_fixed, vertices, weights, normal, target, relative = _approaching_contacts(6, 9, 5)
    n = vertices.shape[0]
    mu, tolerance = np.full(n, 0.4), np.full(n, 1e-12)
    host = DelassusOperator(np, model, factor, vertices, weights, dof_fixed, normal, max_colours=3)
    expected = host.gauss_seidel(relative, np.zeros((n, 3)), target, mu, 300, tolerance)

    backend = emulated_cuda_backend()
    xp, up = backend.xp, backend.from_host
    points, offsets, band, _ = _system_parts(seed=6)
    device_model = build_model(xp, up(points), up(offsets), MATERIAL)
    device_factor = BandedCholesky(xp, up(band), strand_blocks_of_model(xp, backend.to_host, device_model))
    with substep_guard("a Gauss-Seidel contact solve"):
        operator = DelassusOperator(xp, device_model, device_factor, up(vertices), up(weights), up(dof_fixed),
                                    up(normal), max_colours=3)
        impulse, sweeps, change = operator.gauss_seidel(up(relative), xp.zeros((n, 3)), up(target), up(mu), 300,
                                                        up(tolerance))
    assert sweeps == expected[1]
    np.testing.assert_allclose(backend.to_host(impulse), expected[0], rtol=1e-9, atol=1e-15)


def _sweep_reference(operator, relative, start, target, mu, sweeps, tolerance):
    """Projected Gauss–Seidel written out in Python, group after group (the arithmetic of contact_kernels): a group's
    contacts step at once from the same relative velocities, then their blocks change the velocities of the
    contacts they reach.  A group is one contact for the CPU kernel's sequential sweeps, one colour for the
    colour sweeps (whose contacts step with their own block times their colour's sharing).  Returns (impulses
    (n, 3), sweeps done, largest change of one group's step at one contact / tolerance)."""
    from solver_server.solvers.der.contact_space import _clamp_to_disc, _local_step_maps

    n, frames = operator.n, operator.frames
    local = {(int(r), int(c)): frames[r].T @ block @ frames[c]
             for r, c, block in zip(operator.pair_first, operator.pair_second, operator.blocks)}
    maps = _local_step_maps(np, np.stack([operator.sharing[c] * local[c, c] for c in range(n)]))
    groups = [[c] for c in range(n)] if operator.sequential else \
        [np.nonzero(operator.colour == colour)[0].tolist() for colour in range(operator.colours)]
    u = np.einsum("nia,ni->na", frames, relative)
    given = np.einsum("nia,ni->na", frames, start)
    lam = _clamp_to_disc(np, given.copy(), mu)
    for (r, c), block in local.items():
        u[r] += block @ (lam[c] - given[c])
    goal = np.zeros((n, 3))
    goal[:, 0] = target
    for done in range(1, sweeps + 1):
        largest = 0.0
        for group in groups:
            delta = {}
            for c in group:
                new = _clamp_to_disc(np, (lam[c] + maps[c] @ (goal[c] - u[c]))[None], mu[c:c + 1])[0]
                delta[c], lam[c] = new - lam[c], new
            changes = {}
            for (r, column), block in local.items():
                if column in delta:
                    changes[r] = changes.get(r, np.zeros(3)) + block @ delta[column]
            for r, change in changes.items():
                u[r] += change
                largest = max(largest, float(np.abs(change).max() / tolerance[r]))
        if largest <= 1.0:
            break
    return np.einsum("nia,na->ni", frames, lam), done, largest


def _assert_sweeps_match_reference(operator, relative, start, target, mu, tolerances, change_rtol):
    """The operator's Gauss–Seidel (at most 300 sweeps) against _sweep_reference: the same number of sweeps (more
    than one), the largest change to change_rtol, impulses to 1e-9, and some impulse non-zero."""
    impulse, sweeps, change = operator.gauss_seidel(relative, start, target, mu, 300, tolerances)
    expected, expected_sweeps, expected_change = _sweep_reference(operator, relative, start, target, mu, 300,
                                                                  tolerances)
    assert sweeps == expected_sweeps and sweeps > 1
    assert change == pytest.approx(expected_change, rel=change_rtol, abs=1e-9)
    np.testing.assert_allclose(impulse, expected, rtol=1e-9, atol=1e-12 * np.abs(expected).max())
    assert np.abs(expected).max() > 0.0


@pytest.mark.parametrize("tolerance", [1e-12, 1e-4])
def test_the_sweep_kernel_is_sequential_gauss_seidel(tolerance):
    """contact_kernels.sequential_sweeps (all sweeps in one CPU launch, contact after contact, no colours)
    against the same sweeps written out in Python: the same number of sweeps and impulses to rounding, from a
    warm start partly outside the cones, run to convergence and stopped early by a loose tolerance."""
    model, factor, dof_fixed, vertices, weights, normal, target, relative = _approaching_contacts(7, 12, 6)
    n = vertices.shape[0]
    start = np.random.default_rng(4).normal(scale=1e-6, size=(n, 3))
    operator = DelassusOperator(np, model, factor, vertices, weights, dof_fixed, normal)
    assert operator.sequential and operator.colour is None
    _assert_sweeps_match_reference(operator, relative, start, target, np.full(n, 0.4), np.full(n, tolerance),
                                   change_rtol=1e-6)


@pytest.mark.parametrize("graph", [False, True])
@pytest.mark.parametrize("tolerance", [1e-12, 1e-4])
def test_the_colour_sweeps_are_gauss_seidel_colour_after_colour(monkeypatch, graph, tolerance):
    """The colour sweeps (CUDA's: contact_kernels.colour_steps and colour_effects, two launches per colour, here
    on the CPU) against the same sweeps written out in Python, with colours capped so that contacts share them:
    the same number of sweeps and impulses to rounding, launched one by one and replayed as one recorded graph
    whose while-loop stops the sweeps on the device."""
    monkeypatch.setattr(contact_space, "SEQUENTIAL_ON_CPU", False)
    monkeypatch.setattr(contact_space, "COLOUR_SWEEP_GRAPH", graph)
    model, factor, dof_fixed, vertices, weights, normal, target, relative = _approaching_contacts(7, 12, 6)
    n = vertices.shape[0]
    start = np.random.default_rng(4).normal(scale=1e-6, size=(n, 3))
    operator = DelassusOperator(np, model, factor, vertices, weights, dof_fixed, normal, max_colours=3)
    assert not operator.sequential and operator._sweeps.graph == graph
    assert operator.colours == 3 and operator.sharing.max() > 1.0
    # a second solve on the same operator (a contact round solving again) replays what the first recorded; (the
    # largest change of a converged last sweep is a difference of velocities near rounding: change_rtol)
    for relative, start in ((relative, start), (0.5 * relative[::-1].copy(), np.zeros((n, 3)))):
        _assert_sweeps_match_reference(operator, relative, start, target, np.full(n, 0.4), np.full(n, tolerance),
                                       change_rtol=1e-4)


def test_a_contact_set_records_its_colour_sweeps_once_over_its_factors(monkeypatch):
    """A contact round refactors the matrix and builds the operator again on the same contact set: the graph that
    the set's first solve recorded serves the solves on the later factors (one recording per set, not per factor;
    on CUDA a recording is a graph capture and instantiation), and each solve sweeps with its own factor's blocks
    (it matches its own operator's reference sweeps)."""
    monkeypatch.setattr(contact_space, "SEQUENTIAL_ON_CPU", False)
    monkeypatch.setattr(contact_space, "COLOUR_SWEEP_GRAPH", True)
    recordings = []
    original = contact_space.capture

    def recorded(device, record):
        recordings.append(device)
        return original(device, record)

    monkeypatch.setattr(contact_space, "capture", recorded)
    model, _, dof_fixed, vertices, weights, normal, target, relative = _approaching_contacts(7, 12, 6)
    n = vertices.shape[0]
    start = np.random.default_rng(4).normal(scale=1e-6, size=(n, 3))
    structure, diagonals = None, []
    for seed in (7, 8, 9):
        factor = _system(seed=seed)[1]
        operator = DelassusOperator(np, model, factor, vertices, weights, dof_fixed, normal, max_colours=3,
                                    structure=structure)
        structure = operator.structure
        diagonals.append(operator.diagonal)
        _assert_sweeps_match_reference(operator, relative, start, target, np.full(n, 0.4), np.full(n, 1e-12),
                                       change_rtol=1e-4)
    assert len(recordings) == 1
    assert not np.allclose(diagonals[0], diagonals[1])       # the factors differ, so their blocks do


def test_the_colour_sweeps_stop_at_the_sweep_limit(monkeypatch):
    """With a tolerance no sweep meets, the colour sweeps stop after exactly the allowed number (the device-side
    count of sweep_end), graph or not, and report a change above the tolerance."""
    monkeypatch.setattr(contact_space, "SEQUENTIAL_ON_CPU", False)
    model, factor, dof_fixed, vertices, weights, normal, target, relative = _approaching_contacts(7, 12, 6)
    n = vertices.shape[0]
    for graph in (False, True):
        monkeypatch.setattr(contact_space, "COLOUR_SWEEP_GRAPH", graph)
        operator = DelassusOperator(np, model, factor, vertices, weights, dof_fixed, normal, max_colours=2)
        for limit in (1, 4):
            _, sweeps, change = operator.gauss_seidel(relative, np.zeros((n, 3)), target, np.full(n, 0.4), limit,
                                                      np.full(n, 1e-30))
            assert sweeps == limit and change > 1.0


def test_sequential_and_coloured_sweeps_reach_the_same_solution(monkeypatch):
    """The CPU kernel's uncoloured sweeps and the colour sweeps (CUDA's) converge to the same
    impulses on a frictionless problem, whose solution is unique; the sequential sweeps need fewer sweeps
    than colours capped below what the strands need."""
    model, factor, dof_fixed, vertices, weights, normal, target, relative = _approaching_contacts(7, 12, 6)
    n = vertices.shape[0]
    results = []
    for kernel in (True, False):
        monkeypatch.setattr(contact_space, "SEQUENTIAL_ON_CPU", kernel)
        operator = DelassusOperator(np, model, factor, vertices, weights, dof_fixed, normal, max_colours=2)
        results.append(operator.gauss_seidel(relative, np.zeros((n, 3)), target, np.zeros(n), 20000,
                                             np.full(n, 1e-14)))
    (sequential, sequential_sweeps, _), (coloured, coloured_sweeps, _) = results
    assert sequential_sweeps < coloured_sweeps < 20000
    np.testing.assert_allclose(sequential, coloured, atol=1e-8 * np.abs(coloured).max())


def _colouring_rounds_reference(n, first, second, max_colours):
    """The colouring's rounds written with numpy (the array form it had before its kernel): per round, every
    uncoloured contact that beats each uncoloured neighbour's priority takes the round's colour; then the
    contacts left are dealt out over the colours in index order.  Returns (colours, number dealt out)."""
    colour = np.full(n, -1)
    priority = np.bincount(first, minlength=n) * (n + 1.0) + (n - np.arange(n))
    for round_number in range(max_colours):
        uncoloured = colour < 0
        live = uncoloured[first] & uncoloured[second]
        beaten = np.zeros(n, dtype=bool)
        beaten[first[live & (priority[second] > priority[first])]] = True
        colour[uncoloured & ~beaten] = round_number
    left = np.nonzero(colour < 0)[0]
    colour[left] = np.arange(left.shape[0]) % max_colours
    return colour, left.shape[0]


@pytest.mark.parametrize("max_colours", [1, 3, 24])
def test_the_colouring_kernel_equals_the_rounds_of_independent_sets(max_colours):
    """contact_kernels.colour_round (a launch per round, all rounds run) gives the colours of the rounds written
    with numpy, on random coupling graphs with cliques (contacts on one strand) and stray pairs, capped or not."""
    from solver_server.solvers.der.contact_space import _greedy_colouring

    generator = np.random.default_rng(max_colours)
    checked = 0
    for _ in range(5):
        n = int(generator.integers(1, 200))
        strand = generator.integers(0, max(1, n // 6), size=n)
        same = strand[:, None] == strand[None, :]
        stray = generator.uniform(size=(n, n)) < 0.01
        coupled = (same | stray | stray.T) & ~np.eye(n, dtype=bool)
        first, second = np.nonzero(coupled)                     # both orders, first ascending
        expected, dealt = _colouring_rounds_reference(n, first, second, max_colours)
        colour = _greedy_colouring(np, n, first, second, max_colours)
        np.testing.assert_array_equal(colour, expected)
        if dealt == 0:       # the rounds coloured every contact: no coupled pair shares a colour
            assert np.all(colour[first] != colour[second])
        checked += dealt == 0
    assert checked or max_colours < 24


@pytest.mark.parametrize("sequential", [True, False])
def test_an_operator_on_a_new_factor_reuses_its_contact_sets_structure(monkeypatch, sequential):
    """A contact round refactors the matrix and builds the operator again on the same contact set: built with the
    first operator's structure (pairs, frames, colouring, sweep layout), it equals an operator built afresh on the
    new factor, in its blocks and in a solve, and shares the structure's arrays."""
    monkeypatch.setattr(contact_space, "SEQUENTIAL_ON_CPU", sequential)
    model, factor, _, dof_fixed = _system(seed=1)
    _, other_factor, _, _ = _system(seed=4)
    generator = np.random.default_rng(9)
    vertices, weights = _contacts(model, generator, pairs=20)
    normal = _normals(vertices.shape[0])
    first = DelassusOperator(np, model, factor, vertices, weights, dof_fixed, normal)
    reused = DelassusOperator(np, model, other_factor, vertices, weights, dof_fixed, normal, structure=first.structure)
    fresh = DelassusOperator(np, model, other_factor, vertices, weights, dof_fixed, normal)
    assert reused.structure is first.structure and reused.pair_first is first.pair_first
    assert not np.allclose(reused.blocks, first.blocks)
    np.testing.assert_array_equal(reused.blocks, fresh.blocks)
    np.testing.assert_array_equal(reused.diagonal, fresh.diagonal)
    n = vertices.shape[0]
    relative = generator.normal(size=(n, 3))
    target = generator.uniform(0.0, 0.1, size=n)
    mu = np.full(n, 0.3)
    solves = [operator.gauss_seidel(relative, np.zeros((n, 3)), target, mu, 40, np.full(n, 1e-9))
              for operator in (reused, fresh)]
    for got, want in zip(solves[0], solves[1]):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))

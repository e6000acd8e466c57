"""The DER line search's backtracking in one Warp launch (kernel_search.KernelLineSearch, a thread per strand)
against the backtracking written out on whole arrays: for every strand, trials α = 1, ½, ¼, … of the Newton
direction (bent onto the length-preserving path where the strand takes it), the objective g(v + α d) from the
problem's own evaluation and objective, the first trial that passes Armijo taken. Curly strands of different
lengths, soft pins, strands not searched, a path that bends some strands and a step too long for the first
trials."""

import numpy as np

from solver_server.solvers.der.integrator import ImplicitEulerSolver, SoftPins, _StepProblem
from solver_server.solvers.der.kernel_search import KernelLineSearch
from solver_server.solvers.der.model import DerMaterial, build_model
from solver_server.solvers.der.retraction import LengthPreservingPath
from solver_server.solvers.der.settings import NewtonSettings
from solver_server.solvers.der.solver import clamped_root_vertices
from solver_server.solvers.der.state import rest_state

from .helpers import BACKEND, GRAVITY, dof_strand

MATERIAL = DerMaterial(radius=2e-4, young_modulus=1e9, shear_modulus=4e8, density=1300.0, damping=0.5)


def _curls(counts=(9, 14, 6, 11)):
    rng = np.random.default_rng(4)
    strands = []
    for index, count in enumerate(counts):
        angle = np.cumsum(rng.uniform(0.2, 0.6, count))
        points = np.stack([0.01 * np.arange(count), 0.004 * np.cos(angle), 0.004 * np.sin(angle)], axis=1)
        strands.append(points + [0.0, 0.02 * index, 0.0])
    offsets = np.concatenate([[0], np.cumsum(counts)])
    return np.concatenate(strands), offsets


def _reference(problem, settings, v, direction, target, current, slope, searching, path):
    """The backtracking on whole arrays: (α (S,), accepted (S,) bool, accepted velocities (n_dofs,))."""
    alpha = np.where(searching, 1.0, 0.0)
    accepted = ~searching
    accepted_v = v.copy()
    start_edges = None if path is None else path[0].edges_at(v)
    open_rows = searching.copy()
    model = problem.model
    owner = dof_strand(model)
    for _ in range(settings.max_backtracks):
        if not open_rows.any():
            break
        trial_v = v + alpha[owner] * direction
        if path is not None:
            trial_v = path[0].bend(trial_v, start_edges, path[1] & open_rows)
        potential = problem.evaluate(trial_v)[0]
        ok = open_rows & (problem.objective(trial_v, target, potential) <= current + settings.armijo * alpha * slope)
        accepted_v = np.where(ok[owner], trial_v, accepted_v)
        accepted |= ok
        open_rows &= ~ok
        alpha = np.where(open_rows, alpha * settings.backtrack, alpha)
    return np.where(accepted, alpha, 0.0), accepted, accepted_v


def _search_case(soft_pins: bool, bend: bool, scale: float, pins_in_direction: bool = True):
    points, offsets = _curls()
    model = build_model(np, points, offsets, MATERIAL)
    settings = NewtonSettings()
    integrator = ImplicitEulerSolver(np, BACKEND.to_host, BACKEND.from_host, model, settings)
    fixed = model.position_dofs[clamped_root_vertices(np, model)].ravel()
    state = rest_state(np, model)
    rng = np.random.default_rng(11)
    state.velocities = rng.normal(scale=0.3, size=state.velocities.shape)
    state.velocities[clamped_root_vertices(np, model)] = 0.0
    pins = None
    if soft_pins:
        vertices = np.array([8, 3, 20, 12])                    # unsorted, two strands
        pins = SoftPins(vertices, model.position_dofs[vertices], np.full(4, 2e4),
                        model.rest_positions[vertices] + [0.0, 0.0, 0.01])
    h = 1.0 / 96.0
    problem = _StepProblem.of(integrator, state, h, GRAVITY, fixed, pins, None)
    v = problem.v_t.copy()
    point = problem.evaluate(v)
    target = problem.free_velocity
    gradient = model.mass * (v - target) + problem.damping * model.mass * v + h * point[1]
    if pins is not None and pins_in_direction:
        pulled = pins.dofs.ravel()
        gradient[pulled] += h * np.repeat(pins.stiffness, 3) * ((problem.q_t + h * v)[pulled] - pins.targets.ravel())
    factor = integrator._factor(point[2], h, fixed, problem.damping, type("Stats", (), {"factorizations": 0,
                                "bend_twist_assemblies": 0, "projected_hessian": False})(),
                                 pins if pins_in_direction else None)
    direction = -scale * factor.solve(gradient)
    direction[fixed] = 0.0
    current = problem.objective(v, target, point[0])
    slope = np.bincount(dof_strand(model), weights=gradient * direction, minlength=model.n_strands)
    searching = slope < 0.0
    searching[2] = False                                       # a strand not searched
    path = (LengthPreservingPath(np, model, state.positions, h, fixed), np.array([True, False, True, True])) \
        if bend else None
    return problem, settings, v, direction, target, current, slope, searching, path


def test_the_kernel_backtracking_equals_the_whole_array_backtracking():
    cases = ((False, False, 1.0, True), (True, True, 1.0, True), (True, False, 40.0, True), (False, True, 40.0, True),
             (True, False, 1.0, False))
    for soft_pins, bend, scale, pinned in cases:
        case = _search_case(soft_pins, bend, scale, pinned)
        problem = case[0]
        alpha, accepted, accepted_v = KernelLineSearch(np, problem.model).search(*case[:7], case[7], case[8])
        expected_alpha, expected_accepted, expected_v = _reference(*case)
        np.testing.assert_array_equal(accepted, expected_accepted, err_msg=str((soft_pins, bend, scale)))
        np.testing.assert_allclose(alpha, expected_alpha, rtol=0, atol=0, err_msg=str((soft_pins, bend, scale)))
        np.testing.assert_allclose(accepted_v, expected_v, rtol=0, atol=1e-12)
        searching = case[7]
        assert accepted[~searching].all() and (alpha[~searching] == 0.0).all()
        if scale > 1.0:
            assert (alpha[searching & accepted] < 1.0).any()       # the long step backtracked
        elif not soft_pins:
            assert (alpha[searching] == 1.0).any()                  # the Newton step taken whole
        if not pinned:
            # a direction blind to the soft pins: their springs hold a pinned strand back
            assert alpha[0] < alpha[3]


def test_evaluating_only_the_moved_strands_gives_the_whole_evaluation_bit_for_bit():
    """After a line search the strands that did not move keep the start point's frames, energies and gradient
    entries, and only the moved ones are evaluated again (``_StepProblem.evaluate(v, moved, base)``, the CPU path
    where few strands move): the same potential, gradient and frames as evaluating every strand, soft pins
    included."""
    problem, _, v, direction, *_ = _search_case(True, False, 1.0)
    base = problem.evaluate(v)
    moved = np.array([True, False, False, True])
    owner = dof_strand(problem.model)
    trial = np.where(moved[owner], v + 0.5 * direction, v)
    whole = problem.evaluate(trial)
    part = problem.evaluate(trial, moved, base)
    assert whole[0].tobytes() == part[0].tobytes() and whole[1].tobytes() == part[1].tobytes()
    for name in ("positions", "theta", "reference_u", "reference_twist"):
        assert getattr(whole[2], name).tobytes() == getattr(part[2], name).tobytes(), name
    assert not np.array_equal(whole[0], base[0])                 # the moved strands' potentials did change

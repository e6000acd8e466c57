"""Force-transport Cosserat strands (seed 002): torques, statics vs analytic references, curls, stability."""

import math

import numpy as np
import pytest
from scipy.integrate import solve_bvp

from solver_server.solvers.cosserat import CosseratControl, CosseratSettings, CosseratSolver
from solver_server.solvers.cosserat import quaternion as quat
from solver_server.solvers.guides.layout import StrandLayout
from solver_server.solvers.particles import AnalyticColliders

GRAVITY = np.array([0.0, 0.0, -9.81])


def straight(segments, length=1.0, strands=1):
    rest = np.zeros((strands, segments + 1, 3))
    rest[:, :, 0] = np.linspace(0.0, length, segments + 1)
    rest[:, :, 1] = np.arange(strands)[:, None] * 0.1
    return rest


def make(rest, gravity=GRAVITY, **settings):
    strands, points = rest.shape[:2]
    solver = CosseratSolver(rest, StrandLayout.uniform(strands, points), CosseratSettings(**settings), gravity)
    return solver, solver.initial_state()


def settle(solver, state, seconds, dt=1.0 / 96.0, control=None):
    control = control or CosseratControl(state.root_positions.copy(), state.root_rotations.copy())
    for _ in range(int(round(seconds / dt))):
        solver.step(state, state, control, None, dt)
    return state


def test_stiffness_torques_are_the_negative_energy_gradient():
    rng = np.random.default_rng(1)
    rest = np.cumsum(rng.normal(size=(2, 7, 3)) * 0.05 + [0.0, 0.0, 0.1], axis=1)
    solver, _ = make(rest, young_modulus=1e7, shear_modulus=4e6, radius=1e-3)
    q = solver.rest_orientations.copy()
    for i in range(q.shape[1]):
        turn = quat.normalize(np.concatenate([np.ones((2, 1)), rng.normal(size=(2, 3)) * 0.1], axis=1))
        q[:, i] = quat.multiply(turn, q[:, i])
    torque = solver.stiffness_torques(q)
    eps = 1e-6
    for i in range(q.shape[1]):
        for k in range(3):
            half = np.zeros((2, 4))
            half[:, 0] = 1.0
            half[:, 1 + k] = eps / 2.0
            plus, minus = q.copy(), q.copy()
            plus[:, i] = quat.multiply(quat.normalize(half), q[:, i])
            minus[:, i] = quat.multiply(quat.conjugate(quat.normalize(half)), q[:, i])
            gradient = (solver.energy(plus) - solver.energy(minus)) / (2.0 * eps)
            np.testing.assert_allclose(torque[:, i, k], -gradient, rtol=1e-5, atol=1e-12)
    assert np.all(solver.energy(solver.rest_orientations) == 0.0)


def test_small_deflection_cantilever_matches_euler_bernoulli():
    # 1 m, r = 5 mm, E = 10 GPa: w L⁴ / (8 EI) = 2.55 cm (2.5 % of L, small deflection)
    radius, density, young = 5e-3, 1300.0, 1e10
    solver, state = make(straight(50), radius=radius, density=density, young_modulus=young,
                         shear_modulus=young / 2.6, damping=20.0)
    settle(solver, state, 1.8)
    tip = solver.positions(state)[0, -1]
    w = density * math.pi * radius ** 2 * 9.81
    bend = young * math.pi * radius ** 4 / 4.0
    expected = w / (8.0 * bend)
    assert abs(-tip[2] - expected) < 0.10 * expected
    assert np.abs(state.joint_velocities).max() < 1e-6, "did not settle to a static shape"


def heavy_elastica_tip(load_per_length, bend_stiffness, length):
    """Independent reference: large-deflection heavy cantilever, φ' = M/EI, M' = −w (L − s) cos φ,
    φ(0) = 0, M(L) = 0; returns the tip (x, z) with z downward negative."""
    s = np.linspace(0.0, length, 400)

    def rhs(s, y):
        return np.vstack([y[1] / bend_stiffness, -load_per_length * (length - s) * np.cos(y[0])])

    def bc(a, b):
        return np.array([a[0], b[1]])

    guess = np.zeros((2, s.size))
    solution = solve_bvp(rhs, bc, s, guess, tol=1e-8, max_nodes=100000)
    assert solution.success
    fine = np.linspace(0.0, length, 20001)
    phi = solution.sol(fine)[0]
    x = np.trapz(np.cos(phi), fine)
    z = -np.trapz(np.sin(phi), fine)
    return x, z


def test_heavy_strand_statics_match_the_large_deflection_elastica():
    # E = 100 MPa, r = 5 mm: w L³ / EI ≈ 20, a strongly bent 1 m strand (seed Fig. 5.1 regime)
    radius, density, young, segments = 5e-3, 1300.0, 1e8, 50
    solver, state = make(straight(segments), radius=radius, density=density, young_modulus=young,
                         shear_modulus=young / 2.0, damping=5.0)
    settle(solver, state, 3.0)
    assert np.abs(state.joint_velocities).max() < 1e-3      # critically damped (5/s) creep, ~mm/s at the tip
    tip = solver.positions(state)[0, -1]
    clamp = 1.0 / segments            # segment 0 is clamped, the free part starts at its tip
    x_ref, z_ref = heavy_elastica_tip(density * math.pi * radius ** 2 * 9.81, young * math.pi * radius ** 4 / 4.0,
                                      1.0 - clamp)
    reference = np.array([clamp + x_ref, z_ref])
    assert np.hypot(tip[0] - reference[0], tip[2] - reference[1]) < 0.05, (tip, reference)


def helix(turns=3, points=49, radius=0.02, length=0.3):
    t = np.linspace(0.0, 1.0, points)
    angle = 2.0 * np.pi * turns * t
    rest = np.stack([radius * (np.cos(angle) - 1.0), radius * np.sin(angle), -length * t], axis=-1)
    return rest[None]


def test_curly_rest_shape_is_preserved_without_gravity():
    rest = helix()
    solver, state = make(rest, gravity=np.zeros(3), young_modulus=1e8, shear_modulus=4e7, radius=1e-3)
    settle(solver, state, 0.5)
    np.testing.assert_allclose(solver.positions(state), rest, atol=1e-9)


def test_curl_survives_gravity_and_springs_back_when_gravity_is_removed():
    rest = helix()
    solver, state = make(rest, young_modulus=1e9, shear_modulus=4e8, radius=2e-3, damping=10.0)
    settle(solver, state, 0.6)
    sagged = solver.positions(state)
    assert np.abs(sagged - rest).max() > 1e-4, "gravity did not load the curl"
    solver.gravity = np.zeros(3)
    settle(solver, state, 1.5)
    np.testing.assert_allclose(solver.positions(state), rest, atol=2e-4)


@pytest.mark.parametrize("segments", [50, 100, 200])
@pytest.mark.parametrize("young", [1e6, 1e7, 1e8])
def test_default_step_is_stable(segments, young):
    """Released horizontal 1 m strands (wisp radius 5 mm and a single 50 µm hair), default max_step,
    default damping: finite, bounded speeds and no large rise above the release height over 0.31 s.

    The bound is loose on purpose (a soft strand's tip whips to ~10 m/s with its energy conserved,
    docs/fast_hair.md; test_cosserat_dynamics.py bounds energy and speed); an unstable step grows
    without bound."""
    rest = straight(segments, strands=2)
    layout = StrandLayout.uniform(2, segments + 1)
    for radius in (5e-3, 5e-5):
        settings = CosseratSettings(young_modulus=young, shear_modulus=young / 2.6, radius=radius)
        solver = CosseratSolver(rest, layout, settings, GRAVITY)
        state = solver.initial_state()
        control = CosseratControl(state.root_positions.copy(), state.root_rotations.copy())
        dt = 1.0 / 96.0
        previous = solver.positions(state)
        for _ in range(30):
            solver.step(state, state, control, None, dt)
            positions = solver.positions(state)
            assert np.all(np.isfinite(positions))
            assert positions[..., 2].max() < 0.15, "a passive strand rose far above its release height"
            speed = np.linalg.norm(positions - previous, axis=-1).max() / dt
            assert speed < 60.0
            previous = positions


def test_strand_rests_on_a_sphere_collider():
    rest = straight(30, length=0.6)
    solver, state = make(rest, radius=2e-3, young_modulus=1e7, shear_modulus=4e6, damping=5.0)
    colliders = AnalyticColliders(sphere_centers=np.array([[0.35, 0.0, -0.12]]), sphere_radii=np.array([0.1]))
    control = CosseratControl(state.root_positions.copy(), state.root_rotations.copy(), colliders)
    contacts = 0
    for _ in range(96):
        contacts += solver.step(state, state, control, None, 1.0 / 96.0)["contacts"]
        distance, _ = colliders.signed_distance(solver.positions(state))
        assert distance.min() > -0.01
    assert contacts > 0


def test_root_translation_carries_the_strand_and_rotation_turns_it():
    rest = straight(20, length=0.4)
    solver, state = make(rest, radius=2e-3, young_modulus=1e9, shear_modulus=4e8, damping=5.0, gravity_scale=0.0)
    dt = 1.0 / 96.0
    target = state.root_positions + [0.0, 0.0, 0.1]
    quarter = np.array([[math.cos(math.pi / 4), 0.0, 0.0, math.sin(math.pi / 4)]])     # 90° about z
    for k in range(96):
        alpha = min(1.0, (k + 1) / 48)
        rotation = quat.normalize(np.array([[1.0, 0.0, 0.0, 0.0]]) * (1 - alpha) + quarter * alpha)
        solver.step(state, state, CosseratControl(state.root_positions * 0 + target, rotation), None, dt)
    settle(solver, state, 1.0, control=CosseratControl(target, quarter))
    tip = solver.positions(state)[0, -1]
    np.testing.assert_allclose(tip, [0.0, 0.4, 0.1], atol=5e-3)


def test_heavy_strand_statics_match_the_der_solver():
    """The Cosserat static shape of a 1 m strand under gravity vs our DER solver's (same
    discretization: 50 segments, first segment clamped). Measured: 0.6 mm apart at the tip."""
    der = pytest.importorskip("solver_server.solvers.der")
    from solver_server.backend import get_backend

    radius, density, young, segments = 5e-3, 1300.0, 1e8, 50
    rest = straight(segments)
    solver, state = make(rest, radius=radius, density=density, young_modulus=young, shear_modulus=young / 2.0,
                         damping=5.0)
    settle(solver, state, 3.0)
    cosserat = solver.positions(state)[0]

    material = der.DerMaterial(radius=radius, young_modulus=young, shear_modulus=young / 2.0, density=density,
                               damping=4.0)
    model = der.build_model(np, rest[0], np.array([0, segments + 1]), material)
    rod = der.DerSolver(model, get_backend("cpu"), der.NewtonSettings(max_iterations=20, tolerance=1e-8,
                                                                      quasi_newton=False))
    rod_state = der.rest_state(np, model)
    targets = rest[0][np.asarray(rod.fixed_vertices)]
    for _ in range(120):
        out = rod_state.copy()
        rod.step(rod_state, out, der.DerControl(vertex_targets=targets), None, 0.03)
        rod_state = out
    reference = np.asarray(rod_state.positions)
    assert np.abs(cosserat - reference).max() < 0.05 * 1.0          # within 5 % of the length
    assert np.linalg.norm(cosserat[-1] - reference[-1]) < 0.01     # measured 0.6 mm


def test_quaternions_from_rotation_matrices():
    from scipy.spatial.transform import Rotation

    matrices = np.concatenate([Rotation.random(200, random_state=4).as_matrix(),
                               np.array([np.eye(3), np.diag([1.0, -1.0, -1.0]), np.diag([-1.0, 1.0, -1.0]),
                                         np.diag([-1.0, -1.0, 1.0])])])
    q = quat.from_matrices(matrices)
    rebuilt = np.stack([quat.axis(q, k) for k in range(3)], axis=-1)
    np.testing.assert_allclose(rebuilt, matrices, atol=1e-12)


def test_lay_onto_turns_the_chosen_strands_onto_laid_nodes_and_moves_their_anchors():
    """A strand laid out of a shell keeps its segment lengths, so turning its free segments onto the laid nodes
    from the root out meets every one of them; the velocities stay, the other strands are untouched, and the
    chosen strands' contact anchors move to the laid nodes (the next query starts there)."""
    rest = straight(6, length=0.3, strands=2)
    solver, state = make(rest, radius=1e-3)
    before = solver.positions(state).copy()
    velocities = state.joint_velocities.copy()
    state.collider_anchor = before.copy()
    laid = before.copy()
    pivot = laid[1, 3]
    turn = np.array([[math.cos(0.7), 0.0, -math.sin(0.7)], [0.0, 1.0, 0.0], [math.sin(0.7), 0.0, math.cos(0.7)]])
    laid[1, 4:] = pivot + (laid[1, 4:] - pivot) @ turn.T              # the last three segments turned up
    laid[1, 6] = laid[1, 5] + np.linalg.norm(rest[1, 6] - rest[1, 5]) * np.array([0.0, 1.0, 0.0])  # tip sideways
    chosen = np.array([False, True])
    solver.lay_onto(state, laid, chosen)
    after = solver.positions(state)
    np.testing.assert_allclose(after[1], laid[1], atol=1e-12)
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(state.joint_velocities, velocities)
    np.testing.assert_array_equal(state.collider_anchor, laid)

"""Time integration of DER strands against analytic results (no contact)."""

import dataclasses

import numpy as np
import pytest

from solver_server.solvers.der.settings import NewtonSettings
from solver_server.solvers.der.model import DerMaterial

from solver_server.solvers.der.state import rest_state

from .helpers import HAIR, make, run, straight, total_energy


@pytest.mark.parametrize("quasi_newton", [False, True])
def test_cantilever_tip_deflection_matches_euler_bernoulli(quasi_newton):
    """Clamped horizontal rod under its own weight: δ = w L⁴ / (8 E I) for small deflection.

    The clamp fixes the first edge; the first bend element's Voronoi cell starts half an edge before
    vertex 1, so the bending length is L − l/2 (l: segment length)."""
    n, length = 21, 0.2
    material = DerMaterial(radius=1e-3, young_modulus=2e9, shear_modulus=1e9, density=1000.0)
    model, solver, state = make(straight(n, length), [0, n], material,
                                NewtonSettings(quasi_newton=quasi_newton, max_iterations=300, tolerance=1e-12))
    state, _ = run(solver, state, steps=6, dt=10.0)          # huge implicit steps: static equilibrium
    segment = length / (n - 1)
    bending_length = length - 0.5 * segment
    load = material.density * np.pi * material.radius ** 2 * 9.81
    stiffness = material.young_modulus * np.pi * material.radius ** 4 / 4
    expected = load * bending_length ** 4 / (8 * stiffness)
    deflection = -state.positions[-1, 2]
    assert expected / bending_length < 0.05                     # small-deflection regime
    assert abs(deflection - expected) / expected < 0.10
    assert np.allclose(state.positions[:2], model.rest_positions[:2])


def test_pretwisted_clamped_rod_relaxes_its_twist():
    n = 12
    model, solver, state = make(straight(n, 0.05), [0, n], dataclasses.replace(HAIR, damping=50.0))
    state.theta = 0.4 * np.arange(model.n_edges)                   # 0.4 rad of twist per vertex
    state.theta[0] = 0.0                                           # the clamped first edge
    initial_twist = np.abs(np.diff(state.theta)).max()
    state, _ = run(solver, state, steps=30, dt=2e-3, gravity=np.zeros(3))
    twist = np.diff(state.theta) + state.reference_twist
    assert initial_twist == pytest.approx(0.4)
    assert np.abs(twist).max() < 1e-3 * initial_twist
    assert np.abs(state.theta).max() < 1e-3


def _helix(n_turns=2.0, n=41, radius=0.01, pitch=0.01):
    angle = np.linspace(0.0, 2 * np.pi * n_turns, n)
    return np.stack((radius * np.cos(angle), radius * np.sin(angle), -pitch * angle / (2 * np.pi)), axis=1)


def _curvature(points):
    e0, e1 = points[1:-1] - points[:-2], points[2:] - points[1:-1]
    cos_angle = np.einsum("nc,nc->n", e0, e1) / np.linalg.norm(e0, axis=1) / np.linalg.norm(e1, axis=1)
    return np.arccos(np.clip(cos_angle, -1, 1))


@pytest.mark.parametrize("keep_rest_curvature", [True, False])
def test_curly_strand_hangs_as_a_helix(keep_rest_curvature):
    """A clamped helix keeps its curl under gravity; with its rest curvature removed it straightens."""
    points = _helix()
    material = DerMaterial(radius=2e-4, young_modulus=3e9, shear_modulus=1e9, density=1300.0, damping=20.0)
    model, solver, state = make(points, [0, len(points)], material)
    if not keep_rest_curvature:
        model.rest_bend[:] = 0.0
    state, _ = run(solver, state, steps=40, dt=5e-3)
    ratio = _curvature(state.positions)[2:].mean() / _curvature(points)[2:].mean()
    if keep_rest_curvature:
        assert ratio > 0.9
        assert np.abs(state.positions - points).max() < 0.2 * 0.01     # within 20 % of the helix radius
    else:
        assert ratio < 0.3


def test_energy_does_not_grow_in_a_free_undamped_swing():
    """A strand pinned at its root only swings down from horizontal: implicit Euler may only dissipate."""
    n = 11
    model, solver, state = make(straight(n, 0.1), [0, n], HAIR, NewtonSettings(quasi_newton=False, tolerance=1e-10),
                                fixed_vertices=[0], fixed_edges=[])
    energies = [total_energy(model, state)]
    state, _ = run(solver, state, steps=80, dt=2e-3,
                   every=lambda index, s: energies.append(total_energy(model, s)))
    energies = np.array(energies)
    scale = np.abs(model.vertex_mass.sum() * 9.81 * 0.1)
    assert state.positions[-1, 2] < -0.05                          # it really swung down
    assert np.all(np.diff(energies) <= 1e-9 * scale)
    assert energies[-1] > energies[0] - 0.05 * scale              # and did not just damp out


def test_soft_pin_carries_the_strand_weight_like_a_spring():
    """A free strand hanging from one zero-length spring (seed §4.1) of stiffness k sinks by m g / k."""
    n, stiffness = 8, 2e-3
    model, solver, state = make(straight(n, 0.05, direction=(0.0, 0.0, -1.0)), [0, n],
                                dataclasses.replace(HAIR, damping=20.0), fixed_vertices=[], fixed_edges=[],
                                soft_pins=([0], stiffness))
    state, _ = run(solver, state, steps=8, dt=2.0)                 # large implicit steps: static equilibrium
    expected = model.vertex_mass.sum() * 9.81 / stiffness
    sink = model.rest_positions[0, 2] - state.positions[0, 2]
    assert expected > 1e-3
    assert sink == pytest.approx(expected, rel=1e-3)
    assert np.allclose(state.positions[:, :2], 0.0, atol=1e-9)


def test_clamped_roots_follow_root_positions_and_directions():
    """DerControl root position + direction per strand: the first two points land exactly on them."""
    from solver_server.solvers.der.state import DerControl
    points = np.concatenate((straight(6, 0.05), straight(6, 0.05, origin=(0.0, 0.01, 0.0))))
    model, solver, state = make(points, [0, 6, 12], HAIR)
    roots = np.array([[0.001, 0.0, 0.002], [0.0, 0.011, 0.001]])
    directions = np.array([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    out = state.copy()
    solver.step(state, out, DerControl(root_positions=roots, root_directions=directions), None, 1e-3)
    segment = 0.05 / 5
    assert np.allclose(out.positions[[0, 6]], roots, atol=1e-12)
    assert np.allclose(out.positions[[1, 7]], roots + segment * directions, atol=1e-12)


def _rotation_about(axis, angle):
    """(3, 3) rotation by angle [rad] about the unit axis (Rodrigues)."""
    k = np.array([[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]])
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


@pytest.mark.parametrize("turn", [0.5 * np.pi, -2.5])
def test_clamped_root_twist_follows_the_edge_directors(turn):
    """A curl turns with its root: a helix (no gravity) whose clamped root frame turns by `turn` about the
    first edge ends as the rest helix turned rigidly about that edge (a zero-energy state of the clamp);
    without the directors nothing moves (the fixed twist angle keeps its value)."""
    from solver_server.solvers.der.state import DerControl
    points = _helix(n_turns=1.5, n=31)
    material = DerMaterial(radius=2e-4, young_modulus=3e9, shear_modulus=1e9, density=1300.0, damping=20.0)
    model, solver, state = make(points, [0, len(points)], material)
    axis = (points[1] - points[0]) / np.linalg.norm(points[1] - points[0])
    rest_director = model.rest_u[0]
    fixed_targets = points[:2]
    steps = 40
    for index in range(steps + 20):
        angle = turn * min(index + 1, steps) / steps
        control = DerControl(vertex_targets=fixed_targets,
                             edge_directors=(_rotation_about(axis, angle) @ rest_director)[None, :])
        out = state.copy()
        solver.step(state, out, control, None, 5e-3, gravity=np.zeros(3))
        state = out
    expected = points[0] + (points - points[0]) @ _rotation_about(axis, turn).T
    size = np.linalg.norm(points - points[0], axis=1).max()
    assert np.abs(expected - points).max() > 0.3 * size                  # the turn really moves the curl
    assert np.abs(state.positions - expected).max() < 0.01 * size
    assert state.theta[0] == pytest.approx(turn, abs=1e-9)                # the root's twist angle itself

    unturned, _ = run(solver, rest_state(np, model), steps=5, dt=5e-3, gravity=np.zeros(3),
                      control=DerControl(vertex_targets=fixed_targets))
    assert np.abs(unturned.positions - points).max() < 1e-9 * size


def test_edge_directors_are_checked():
    from solver_server.solvers.der.state import DerControl
    points = straight(6, 0.05)
    model, solver, state = make(points, [0, 6], HAIR)
    out = state.copy()
    with pytest.raises(ValueError, match=r"edge_directors must be \(1, 3\)"):
        solver.step(state, out, DerControl(edge_directors=np.zeros((2, 3))), None, 1e-3)
    with pytest.raises(ValueError, match="fixed edge 0 .* along the edge"):
        solver.step(state, out, DerControl(edge_directors=np.array([[1.0, 0.0, 0.0]])), None, 1e-3)
    # the same test on the host, before the directors go to a device (the step then reads nothing for it)
    targets = solver.vertex_targets(None, state)
    with pytest.raises(ValueError, match="fixed edge 0 .* along the edge"):
        solver.check_edge_directors(np.array([[1.0, 0.0, 0.0]]), targets)
    with pytest.raises(ValueError, match="fixed edge 0 .* along the edge"):
        solver.check_edge_directors(np.array([[np.nan, 1.0, 0.0]]), targets)
    solver.check_edge_directors(np.array([[1.0, 1e-3, 0.0]]), targets)     # a part across the edge: fine
    _, loose, _ = make(points, [0, 6], HAIR, fixed_vertices=[0], fixed_edges=[0])
    with pytest.raises(ValueError, match="edge 0 has a free vertex"):
        loose.step(state, out, DerControl(edge_directors=np.array([[0.0, 1.0, 0.0]])), None, 1e-3)


def test_settled_strands_stop_being_searched_without_changing_the_motion(monkeypatch):
    """A strand hanging at rest converges in the first iterations while two horizontal strands swing down:
    it is no longer searched (integrator.SETTLED_FRACTION), and the motion is the one of searching every
    strand until the end."""
    from solver_server.solvers.der import integrator
    points = np.vstack([straight(11, 0.05, direction=(0.0, 0.0, -1.0), origin=(0.0, -0.01, 0.0)),
                        straight(11, 0.05, origin=(0.0, 0.01, 0.0)), straight(11, 0.05, origin=(0.0, 0.02, 0.0))])
    settings = NewtonSettings(tolerance=1e-9, quasi_newton=True, quasi_newton_matrix="gauss_newton", refresh_interval=1)

    def swing():
        model, solver, state = make(points, [0, 11, 22, 33], HAIR, settings)
        return run(solver, state, steps=6, dt=5e-3)

    settling_state, settling_stats = swing()
    monkeypatch.setattr(integrator, "SETTLED_FRACTION", 0.0)
    searching_state, searching_stats = swing()
    assert settling_state.positions[21, 2] < -0.001                     # the horizontal strands swing
    assert max(stats["settled_strands"] for stats in settling_stats) >= 1
    assert all(stats["settled_strands"] == 0 for stats in searching_stats)
    np.testing.assert_allclose(settling_state.positions, searching_state.positions, atol=1e-10)

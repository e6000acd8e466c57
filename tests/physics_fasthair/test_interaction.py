"""Swept-sphere strand interaction (seed 002 §4.3, eqs. 4.3–4.4)."""

import numpy as np

from solver_server.solvers.cosserat import CosseratControl, CosseratSettings, CosseratSolver
from solver_server.solvers.cosserat.interaction import SweptSphereInteraction
from solver_server.solvers.guides.layout import StrandLayout
from solver_server.solvers.strand_geometry import segment_closest_parameters


def test_closest_points_of_segments():
    """Crossing, end-to-end, parallel and zero-length pairs (the last two without a NaN)."""
    p1 = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    q1 = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    p2 = np.array([[0.25, -1.0, 0.1], [2.0, 0.0, 1.0], [0.5, 1.0, 0.0], [0.3, 0.0, 1.0]])
    q2 = np.array([[0.25, 1.0, 0.1], [3.0, 0.0, 1.0], [2.5, 1.0, 0.0], [0.3, 0.0, 1.0]])
    s, t = segment_closest_parameters(np, p1, q1, p2, q2)
    np.testing.assert_allclose(s, [0.25, 1.0, 0.5, 0.0])
    np.testing.assert_allclose(t, [0.5, 0.0, 0.0, 0.0])


def crossing_pair(gap):
    """Two 2-segment strands crossing at right angles, centre segments `gap` apart in z."""
    positions = np.zeros((2, 3, 3))
    positions[0, :, 0] = [-0.1, 0.0, 0.1]
    positions[1, :, 1] = [-0.1, 0.0, 0.1]
    positions[1, :, 2] = gap
    positions[0, :, 1] = 0.001          # strand 0's closest point at its node 1 (s = 1 on segment 0)
    return positions


def test_repulsion_and_viscous_forces_follow_eqs_4_3_and_4_4():
    inner, outer, stiffness, damping = 0.002, 0.004, 3.0, 0.5
    interaction = SweptSphereInteraction(inner, outer, stiffness, damping, np.ones((2, 2), bool))
    positions = crossing_pair(0.003)
    velocities = np.zeros_like(positions)
    velocities[0] = [0.0, 0.0, 0.2]
    forces, pairs = interaction.forces(positions, velocities)
    assert pairs >= 1
    total_on_0 = forces[0].sum(axis=0)
    p_inner, p_outer = 2 * inner - 0.003, 2 * outer - 0.003
    expected_z = -stiffness * p_inner - damping * p_outer * 0.2
    # every segment pair of the two strands that overlaps contributes; here all four pairs meet at the crossing
    assert total_on_0[2] < 0.0
    np.testing.assert_allclose(forces.sum(axis=(0, 1)), 0.0, atol=1e-15)      # action = reaction
    single = SweptSphereInteraction(inner, outer, stiffness, damping, np.array([[True, False], [True, False]]))
    positions = np.zeros((2, 3, 3))
    positions[0, :2, 0] = [-0.1, 0.1]
    positions[1, :2, 1] = [-0.1, 0.1]
    positions[1, :2, 2] = 0.003
    positions[:, 2] = positions[:, 1]
    forces, pairs = single.forces(positions, velocities)
    assert pairs == 1
    np.testing.assert_allclose(forces[0].sum(axis=0), [0.0, 0.0, expected_z], rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(forces[0, 0, 2], forces[0, 1, 2])             # split at s = 1/2
    far = crossing_pair(0.01)
    assert interaction.forces(far, velocities)[1] == 0


def test_overlapping_strands_are_pushed_apart_to_the_inner_radius():
    rest = np.zeros((2, 21, 3))
    rest[:, :, 2] = -np.linspace(0.0, 0.4, 21)
    rest[1, :, 0] = 0.001                                       # 1 mm apart, inner radii 2 mm each
    settings = CosseratSettings(radius=1e-3, young_modulus=1e7, shear_modulus=4e6, damping=5.0,
                                interaction_inner_radius=0.002, interaction_outer_radius=0.003,
                                interaction_stiffness=0.5, interaction_damping=0.05)
    solver = CosseratSolver(rest, StrandLayout.uniform(2, 21), settings, [0.0, 0.0, 0.0])
    state = solver.initial_state()
    control = CosseratControl(state.root_positions.copy(), state.root_rotations.copy())
    for _ in range(96):
        stats = solver.step(state, state, control, None, 1.0 / 96.0)
    tips = solver.positions(state)[:, -1]
    assert np.linalg.norm(tips[0] - tips[1]) > 0.0035
    assert stats["interaction_pairs"] >= 0

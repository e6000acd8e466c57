"""The particle model's turning-angle springs (without them, particle hair renders kinked).

The accelerations are −∇ of Σ ½ k L̄² (θ − θ̄)² per unit mass (finite differences); they vanish on any rigid
motion of the rest shape; on a head, strands that kinked beyond 90° without them stay below 60°.
"""

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.simulation import Simulation
from solver_server.solvers.guides.layout import StrandLayout
from solver_server.solvers.particles import ParticleHairSettings, ParticleHairSolver
from tests.physics.scenes import run, scene

def _curly(strands=2, points=7):
    """(S, P, 3) curved rest strands (a helix) with uneven segment lengths."""
    t = np.cumsum(np.random.default_rng(7).uniform(0.5, 1.5, (strands, points)), axis=1) * 0.4
    return np.stack([0.02 * np.cos(t), 0.02 * np.sin(t), 0.01 * t], axis=-1) + np.arange(strands)[:, None, None] * 0.1


def _solver(rest, stiffness=3.0e4, painted=None):
    settings = ParticleHairSettings(angle_stiffness=stiffness, bend_stiffness=0.0)
    strands, points = rest.shape[:2]
    return ParticleHairSolver(rest, StrandLayout.uniform(strands, points), settings, np.zeros(3), painted=painted)


def _energy(solver, positions):
    angles = solver._turning_angles(np, positions)
    return 0.5 * np.sum(solver.angle_coefficient * (angles - solver.rest_angles) ** 2)


def test_angle_accelerations_are_minus_the_energy_gradient():
    rng = np.random.default_rng(1)
    rest = _curly()
    solver = _solver(rest, painted={"particle_angle_stiffness": rng.uniform(0.5, 2.0, rest.shape[:2])})
    bent = rest + rng.normal(scale=3e-3, size=rest.shape)
    acceleration = solver.angle_accelerations(bent)
    step = 1e-7
    numeric = np.zeros_like(bent)
    for index in np.ndindex(bent.shape):
        plus, minus = bent.copy(), bent.copy()
        plus[index] += step
        minus[index] -= step
        numeric[index] = -(_energy(solver, plus) - _energy(solver, minus)) / (2 * step)
    assert np.abs(acceleration).max() > 1.0
    np.testing.assert_allclose(acceleration, numeric, rtol=1e-5, atol=1e-6 * np.abs(numeric).max())


def test_a_rigidly_moved_rest_shape_feels_no_angle_force():
    rest = _curly()
    solver = _solver(rest)
    angle = 0.7
    rotation = np.array([[np.cos(angle), 0, np.sin(angle)], [0, 1, 0], [-np.sin(angle), 0, np.cos(angle)]])
    moved = rest @ rotation.T + [0.3, -0.2, 1.0]
    assert np.abs(solver.angle_accelerations(moved)).max() < 1e-6
    bent = rest + np.random.default_rng(2).normal(scale=1e-3, size=rest.shape)
    assert np.abs(solver.angle_accelerations(bent)).max() > 1.0


def _max_turn_over_frames(angle_stiffness):
    """Largest angle [deg] between consecutive segments of 24 particle strands grown from the top of a head
    and falling over it for 1 s, over every frame."""
    direction = np.random.default_rng(3).normal(size=(24, 3))
    direction[:, 2] = np.abs(direction[:, 2]) + 0.3
    direction /= np.linalg.norm(direction, axis=1)[:, None]
    points = (np.array([0.0, 0.0, 1.0]) + 0.1 * direction)[:, None, :] \
        + np.linspace(0.0, 0.12, 10)[None, :, None] * direction[:, None, :]
    hair = {"id": "Hair", "kind": "hair", "points": points.reshape(-1, 3), "strand_offsets": np.arange(0, 241, 10),
            "params": {"model": "particles", "particle_angle_stiffness": angle_stiffness}}
    head = {"id": "Head", "kind": "collider", "shape": {"type": "sphere", "center": [0.0, 0.0, 1.0], "radius": 0.1}}
    worst = 0.0
    for _, positions, _ in run(Simulation(scene([hair, head], frame_end=24), get_backend("cpu"))):
        segments = np.diff(positions["Hair"].reshape(24, 10, 3), axis=1)
        segments /= np.linalg.norm(segments, axis=-1)[..., None]
        cosine = np.clip(np.sum(segments[:, 1:] * segments[:, :-1], axis=-1), -1.0, 1.0)
        worst = max(worst, float(np.degrees(np.arccos(cosine)).max()))
    return worst


@pytest.mark.parametrize("angle_stiffness, kinks", [(0.0, True), (None, False)])
def test_particle_strands_falling_over_a_head_do_not_kink(angle_stiffness, kinks):
    from solver_server.sim.params import defaults

    stiffness = defaults("hair")["particle_angle_stiffness"] if angle_stiffness is None else angle_stiffness
    worst = _max_turn_over_frames(stiffness)
    if kinks:
        assert worst > 90.0, worst          # the seed's second-neighbour springs alone fold the strands
    else:
        assert worst < 60.0, worst

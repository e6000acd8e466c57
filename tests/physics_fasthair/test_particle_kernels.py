"""The particle hair substep kernel (one sweep per strand, solver_server/solvers/particles/kernels.py) against
the same step written as whole-array numpy (particle_reference.py): uneven curly strands of different
lengths (padding), painted springs, one and two pinned root points, root motion and a teleport (the rigid
blend), segments beyond the distance clamp, wind, a sphere collider; and the split over CPU threads gives
the one-launch numbers bit for bit."""

import numpy as np
import pytest

from solver_server.kernels import interop
from solver_server.solvers.particles import (AnalyticColliders, ParticleHairSettings, ParticleHairSolver, StrandControl,
                                             WindSettings)
from tests.physics_fasthair.particle_reference import (angle_accelerations, reference_step,
                                                       spring_accelerations)
from tests.physics_fasthair.strands import curly_strands

GRAVITY = np.array([0.0, 0.0, -9.81])


def _curly_strands(counts=(9, 5, 12, 3)):
    return curly_strands(counts, seed=4, steps=(0.5, 1.5, 0.5), radius=0.02, spacing=0.1, drop=0.012)


def _solver(pinned, **settings):
    rest, layout = _curly_strands()
    painted = {name: np.random.default_rng(5).uniform(0.5, 2.0, rest.shape[:2])
               for name in ("particle_stiffness", "particle_bend_stiffness", "particle_angle_stiffness")}
    values = dict(pinned_points=pinned, damping=0.8, max_stretch=1.05, rest_speed=1e-3,
                  wind=WindSettings(direction=(1.0, 0.0, 0.0), strength=3.0, amplitude=2.0, period=0.5))
    values.update(settings)
    return ParticleHairSolver(rest, layout, ParticleHairSettings(**values), GRAVITY, painted=painted)


def test_spring_and_angle_accelerations_match_the_numpy_formulas():
    solver = _solver(2)
    bent = solver.rest_positions + np.random.default_rng(6).normal(scale=4e-3, size=solver.rest_positions.shape)
    np.testing.assert_allclose(solver.spring_accelerations(bent), spring_accelerations(solver, bent), rtol=1e-9,
                               atol=1e-9 * np.abs(spring_accelerations(solver, bent)).max())
    expected = angle_accelerations(solver, bent)
    assert np.abs(expected).max() > 1.0
    np.testing.assert_allclose(solver.angle_accelerations(bent), expected, rtol=1e-9, atol=1e-9 * np.abs(expected).max())


@pytest.mark.parametrize("pinned", [1, 2])
@pytest.mark.parametrize("with_sphere", [False, True])
def test_kernel_steps_equal_the_whole_array_reference(pinned, with_sphere):
    solver = _solver(pinned)
    colliders = AnalyticColliders.from_scene([{"id": "Ball", "shape": {"type": "sphere", "center": [0.2, 0.0, -0.1],
                                                                  "radius": 0.04}}]) if with_sphere else AnalyticColliders()
    state = solver.initial_state()
    positions, velocities, rigidity, time = state.positions, state.velocities, state.rigidity, state.time
    roots = solver.rest_positions[:, :pinned].copy()
    dt = 1.0 / 96.0
    clamped = stretched = False
    contacts = 0
    for step in range(12):
        roots = roots + np.array([0.004, 0.0, 0.002 * np.sin(step)])     # root motion (0.4 m/s)
        if step == 5:
            roots = roots + np.array([0.0, 0.5, 0.0])                   # a teleport: 48 m/s
        expected = reference_step(solver, positions, velocities, rigidity, time, roots, colliders, dt)
        stats = solver.step(state, state, StrandControl(roots.copy(), colliders), None, dt)
        scale = max(1.0, float(np.abs(expected[0]).max()))
        np.testing.assert_allclose(state.positions, expected[0], rtol=0, atol=1e-9 * scale, err_msg=f"step {step}")
        np.testing.assert_allclose(state.velocities, expected[1], rtol=0,
                                   atol=1e-7 * max(1.0, float(np.abs(expected[1]).max())), err_msg=f"step {step}")
        np.testing.assert_allclose(state.rigidity, expected[2], rtol=1e-12)
        assert state.time == pytest.approx(expected[3])
        positions, velocities, rigidity, time = expected
        stretched |= stats["max_stretch"] > 1.0
        clamped |= stats["max_stretch"] >= 1.05 - 1e-9
        if step == 5:
            assert stats["teleported_strands"] == 4
        contacts += stats["contacts"]
    assert stats["substeps"] > 1 and stretched and clamped
    assert (contacts > 0) == with_sphere


def test_the_split_over_cpu_threads_gives_one_launchs_numbers(monkeypatch):
    rest, layout = _curly_strands(counts=(9, 5, 12, 3, 7, 8, 6))
    settings = ParticleHairSettings(max_stretch=1.05)
    runs = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("TANGLE_KERNEL_THREADS", threads)
        assert interop.cpu_kernel_threads() == int(threads)
        solver = ParticleHairSolver(rest, layout, settings, GRAVITY)
        state = solver.initial_state()
        roots = rest[:, :2] + np.array([0.0, 0.0, 0.01])
        for _ in range(4):
            solver.step(state, state, StrandControl(roots, None), None, 1.0 / 48.0)
        runs.append(state.positions)
    assert np.abs(runs[0] - rest).max() > 1e-3
    for other in runs[1:]:
        assert np.array_equal(other, runs[0])

"""The Cosserat step on Warp kernels (solver_server/solvers/cosserat/kernels.py: a thread per strand, the
articulated-body recursion looping over its segments) against the same step as whole-array xp code
(cosserat_reference.py): curly strands of different lengths (padding), painted moduli and density, a
moving and turning root, a sphere collider, strand–strand interaction, extra node forces and wind, through
steps with and without the mid-velocity corrector and with steps that a fast strand splits for itself; and the
split over CPU threads gives the one-launch numbers bit for bit."""

import numpy as np

from solver_server.kernels import interop
from solver_server.solvers.cosserat import CosseratControl, CosseratSettings, CosseratSolver
from solver_server.solvers.cosserat import quaternion as quat
from solver_server.solvers.particles import AnalyticColliders, WindSettings
from tests.physics_fasthair.cosserat_reference import reference_step
from tests.physics_fasthair.strands import curly_strands

GRAVITY = np.array([0.0, 0.0, -9.81])


def _curly_strands(counts=(14, 9, 17)):
    return curly_strands(counts, seed=8, steps=(0.6, 1.4, 0.45), radius=0.015, spacing=0.03, drop=0.02)


def _pair():
    """Two identical solvers (the collider start and the interaction's Verlet list are solver state)."""
    rest, layout = _curly_strands()
    painted = {name: np.random.default_rng(9).uniform(0.5, 2.0, rest.shape[:2])
               for name in ("young_modulus", "shear_modulus", "density")}
    settings = CosseratSettings(radius=1e-3, young_modulus=2e7, shear_modulus=8e6, damping=0.5, max_step=2e-3,
                                interaction_inner_radius=0.004, interaction_outer_radius=0.008,
                                wind=WindSettings(direction=(0.0, 1.0, 0.0), strength=2.0, amplitude=1.0, period=0.3))
    return [CosseratSolver(rest, layout, settings, GRAVITY, painted=painted) for _ in range(2)]


def test_kernel_steps_equal_the_whole_array_reference():
    kernel_solver, reference_solver = _pair()
    kernel_state, reference_state = kernel_solver.initial_state(), reference_solver.initial_state()
    sphere = AnalyticColliders.from_scene([{"id": "Ball", "shape": {"type": "sphere", "center": [0.0, 0.0, -0.155],
                                                              "radius": 0.035}}])
    strands, points = kernel_solver.rest_root.shape[0], kernel_solver.lengths.shape[1] + 1
    extra = np.zeros((strands, points, 3))
    extra[:, -3:, 0] = 2e-4                                       # a small push on the tips [N]
    root_positions = kernel_state.root_positions.copy()
    contacts = pairs = refined = 0
    corrected = plain = 0
    for step in range(16):
        angle = 0.25 * step                                       # the root turns about z and moves
        root_positions = root_positions + np.array([0.002, 0.0, 0.001 * np.cos(step)])
        rotation = np.tile([np.cos(angle / 2), 0.0, 0.0, np.sin(angle / 2)], (strands, 1))
        control = CosseratControl(root_positions.copy(), rotation, sphere if step >= 4 else None,
                                  extra if step % 3 == 0 else None)
        stats = kernel_solver.step(kernel_state, kernel_state, control, None, 1.0 / 96.0)
        expected = reference_step(reference_solver, reference_state, control, 1.0 / 96.0)
        for key in ("substeps", "contacts", "interaction_pairs", "strand_parts"):
            assert stats[key] == expected[key], (step, key)
        np.testing.assert_allclose(kernel_solver.positions(kernel_state), reference_solver.positions(reference_state),
                                   rtol=0, atol=1e-9, err_msg=f"step {step}")
        np.testing.assert_allclose(kernel_state.joint_velocities, reference_state.joint_velocities, rtol=0,
                                   atol=1e-7 * max(1.0, np.abs(reference_state.joint_velocities).max()))
        corrected += stats["corrected_strands"]
        plain += stats["corrected_strands"] < stats["strand_parts"]     # some parts without the corrector
        contacts += stats["contacts"]
        pairs += stats["interaction_pairs"]
        refined += stats["strand_parts"] > 3 * stats["substeps"]        # some strand split a step
    assert contacts > 0 and pairs > 0 and corrected > 0 and plain > 0 and refined > 0


def test_the_split_over_cpu_threads_gives_one_launchs_numbers(monkeypatch):
    runs = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("TANGLE_KERNEL_THREADS", threads)
        assert interop.cpu_kernel_threads() == int(threads)
        solver = _pair()[0]
        state = solver.initial_state()
        turned = quat.normalize(state.root_rotations + np.array([0.0, 0.3, 0.0, 0.0]))
        for _ in range(3):
            solver.step(state, state, CosseratControl(state.root_positions.copy(), turned), None, 1.0 / 96.0)
        runs.append(solver.positions(state))
    assert np.abs(runs[0] - solver.positions(solver.initial_state())).max() > 1e-3
    for other in runs[1:]:
        assert np.array_equal(other, runs[0])

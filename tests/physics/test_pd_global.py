"""Global-step solvers: (A-)Jacobi with Chebyshev converge to the Cholesky solution or report divergence."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse

from solver_server.backend import get_backend
from solver_server.simulation import Simulation
from solver_server.solvers.pd.global_solve import CholeskySolve, JacobiSolve

from .scenes import cloth_object, grid, run, scene

BACKEND = get_backend("cpu")


def _cloth_system():
    vertices, triangles, index = grid(12, 12)
    sim = Simulation(scene([cloth_object(vertices, triangles, pins=[index[0, -1], index[-1, -1]])]), BACKEND)
    return sim.groups[0].solver.system_matrix


@pytest.mark.parametrize("order, iterations", [(1, 600), (2, 300), (3, 200)])
def test_a_jacobi_converges_to_cholesky(order, iterations):
    matrix = _cloth_system()
    rhs = np.random.default_rng(order).standard_normal((matrix.shape[0], 3))
    reference, _ = CholeskySolve(BACKEND, matrix).solve(rhs)
    solver = JacobiSolve(BACKEND, matrix.tocsr(), order=order, iterations=iterations, chebyshev_start=10, gamma=1.0)
    assert solver.spectral_radius < 1.0
    solution, report = solver.solve(rhs)
    assert not report.diverged
    assert np.linalg.norm(solution - reference) / np.linalg.norm(reference) < 1e-6
    np.testing.assert_allclose(np.sqrt(report.residual**2), report.residual)


def test_higher_order_needs_fewer_sweeps():
    matrix = _cloth_system()
    rhs = np.random.default_rng(7).standard_normal((matrix.shape[0], 3))
    reference, _ = CholeskySolve(BACKEND, matrix).solve(rhs)
    errors = []
    for order in (1, 2, 3):
        solution, _ = JacobiSolve(BACKEND, matrix.tocsr(), order=order, iterations=60, chebyshev_start=10,
                                  gamma=1.0).solve(rhs)
        errors.append(np.linalg.norm(solution - reference) / np.linalg.norm(reference))
    assert errors[0] > errors[1] > errors[2]


def test_chebyshev_accelerates_jacobi():
    matrix = _cloth_system()
    rhs = np.random.default_rng(3).standard_normal((matrix.shape[0], 3))
    reference, _ = CholeskySolve(BACKEND, matrix).solve(rhs)
    plain, _ = JacobiSolve(BACKEND, matrix.tocsr(), iterations=150, chebyshev_start=10**6).solve(rhs)
    fast, _ = JacobiSolve(BACKEND, matrix.tocsr(), iterations=150, chebyshev_start=10, gamma=1.0).solve(rhs)
    error = lambda x: np.linalg.norm(x - reference) / np.linalg.norm(reference)  # noqa: E731
    assert error(fast) < 0.1 * error(plain)


def test_divergence_is_reported():
    """SPD but not diagonally dominant: ρ(D⁻¹B) = 1.8, Jacobi must diverge and say so."""
    matrix = scipy.sparse.csr_matrix(np.array([[1.0, 0.9, 0.9], [0.9, 1.0, 0.9], [0.9, 0.9, 1.0]]))
    solver = JacobiSolve(BACKEND, matrix, order=1, iterations=40)
    assert solver.spectral_radius == pytest.approx(1.8, rel=1e-3)
    _, report = solver.solve(np.ones((3, 1)))
    assert report.diverged


def test_simulation_with_a_jacobi_matches_cholesky():
    vertices, triangles, index = grid(10, 10)
    pins = [index[0, -1], index[-1, -1]]
    results = {}
    for mode in ("cholesky", "a_jacobi"):
        # the hard strain limit is a thresholded pass after the global steps: it would turn the 1e-7
        # differences between the two solves into edge-by-edge on/off differences, so it is off here
        settings = {"global": mode, "order": 2, "jacobi_iterations": 200, "gamma": 1.0, "strain_limit_iterations": 0}
        sim = Simulation(scene([cloth_object(vertices, triangles, pins=pins)], frame_end=7, solver={"pd": settings}),
                         BACKEND)
        frames = run(sim)
        results[mode] = frames[-1][1]["Cloth"]
        if mode == "a_jacobi":
            assert frames[-1][2]["global_residual"] < 1e-6
            assert "global_fallback" not in frames[-1][2]
    np.testing.assert_allclose(results["a_jacobi"], results["cholesky"], atol=1e-5)


def test_diverging_jacobi_falls_back_to_cholesky():
    """Over-relaxation γ = 1.9 makes the Jacobi iteration matrix (1 − γ)I + γR have eigenvalues below
    −1 on a cloth (R has eigenvalues near −ρ): the solve diverges, the solver reports it in the
    stats and continues with Cholesky, matching a Cholesky run."""
    vertices, triangles, index = grid(10, 10)
    pins = [index[0, -1], index[-1, -1]]
    settings = {"global": "jacobi", "jacobi_iterations": 60, "gamma": 1.9, "chebyshev_start": 1000}
    frames = run(Simulation(scene([cloth_object(vertices, triangles, pins=pins)], frame_end=4,
                                  solver={"pd": settings}), BACKEND))
    assert frames[-1][2]["global_fallback"] == "cholesky"
    reference = run(Simulation(scene([cloth_object(vertices, triangles, pins=pins)], frame_end=4), BACKEND))
    assert np.all(np.isfinite(frames[-1][1]["Cloth"]))
    np.testing.assert_allclose(frames[-1][1]["Cloth"], reference[-1][1]["Cloth"], atol=2e-3)


def test_on_a_device_a_divergence_after_the_first_frame_is_caught_at_the_frame_end():
    """On the emulated CUDA device the first frame tests every Jacobi solve on the host; later frames keep the test
    on the device and read it once at the frame's end. A solve that starts to diverge in frame 3 (γ raised to
    1.9 by hand) switches the solver to Cholesky from frame 4 on, reported in frame 3's stats, and the substeps
    of frames 2 and 3 read nothing back."""
    from solver_server.devices import backend_for
    from solver_server.emulated_device import SYNCS

    vertices, triangles, index = grid(10, 10)
    settings = {"global": "jacobi", "jacobi_iterations": 60, "chebyshev_start": 1000}
    simulation = Simulation(scene([cloth_object(vertices, triangles, pins=[index[0, -1], index[-1, -1]])],
                                  frame_end=6, solver={"pd": settings}), backend_for("cuda-emulated"))
    solver = simulation.groups[0].solver
    simulation.initial_frame()
    assert "global_fallback" not in simulation.advance(None)[2] and solver.convergence_seen
    SYNCS.clear()
    assert "global_fallback" not in simulation.advance(None)[2]
    jacobi = solver.global_solver
    jacobi.gamma, jacobi._captured = 1.9, None                 # the replayed sweeps are recorded anew with γ
    assert simulation.advance(None)[2]["global_fallback"] == "cholesky"
    assert not SYNCS, SYNCS
    assert solver.global_solver is solver.cholesky and solver.fell_back
    _, positions, stats = simulation.advance(None)
    assert stats["global_fallback"] == "cholesky" and np.all(np.isfinite(positions["Cloth"]))

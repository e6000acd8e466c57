"""The (A-)Jacobi global step's Warp kernels (solvers/pd/kernels/jacobi.py): one Chebyshev sweep equals its
sparse-matrix formula, and the CPU (row ranges over threads) and CUDA (thread per row) layouts give the same
solve bit for bit."""

from __future__ import annotations

import numpy as np

from solver_server.backend import get_backend
from solver_server.simulation import Simulation
from solver_server.solvers.pd.global_solve import JacobiSolve
from solver_server.solvers.pd.kernels.jacobi import CsrKernelMatrix
from tests.physics.scenes import cloth_object, grid, scene

BACKEND = get_backend("cpu")


def _system():
    vertices, triangles, index = grid(100, 100)      # 10 000 rows: two ranges of rows on two CPU threads
    simulation = Simulation(scene([cloth_object(vertices, triangles, pins=[index[0, -1], index[-1, -1]])]), BACKEND)
    return simulation.groups[0].solver.system_matrix


def test_a_sweep_equals_its_matrix_formula():
    matrix = _system()
    rng = np.random.default_rng(4)
    x, beta, previous = (np.ascontiguousarray(rng.normal(size=(matrix.shape[0], 3))) for _ in range(3))
    out = np.empty_like(x)
    CsrKernelMatrix(np, matrix).sweep(x, beta, previous, 1.7, 0.9, out)
    expected = 1.7 * (0.9 * (matrix @ x + beta - x) + x - previous) + previous
    np.testing.assert_allclose(out, expected, rtol=0.0, atol=1e-12 * np.abs(expected).max())
    np.testing.assert_allclose(CsrKernelMatrix(np, matrix).product(np, x), matrix @ x, rtol=0.0,
                               atol=1e-12 * np.abs(matrix @ x).max())


def test_cpu_and_cuda_layouts_solve_bit_for_bit(monkeypatch):
    matrix = _system()
    rhs = np.random.default_rng(5).normal(size=(matrix.shape[0], 3))
    results = []
    for per_item, threads in ((False, "1"), (False, "2"), (True, "1")):
        monkeypatch.setenv("TANGLE_KERNEL_THREADS", threads)
        solver = JacobiSolve(BACKEND, matrix, order=2, iterations=40, chebyshev_start=5, gamma=0.9)
        for operator in (solver.matrix, solver.iteration_matrix, solver.beta_operator):
            operator.per_item = per_item
        solution, report = solver.solve(rhs)
        assert not report.diverged
        results.append(solution)
    for other in results[1:]:
        np.testing.assert_array_equal(results[0], other)


def test_sweeps_replayed_as_a_captured_graph_equal_the_launched_ones():
    """The graph path (CUDA's default) recorded on the CPU: every solve, from any start, gives the launched
    sweeps' numbers bit for bit (its weights and buffers are fixed at capture; the inputs are copied in)."""
    matrix = _system()
    rng = np.random.default_rng(6)
    launched = JacobiSolve(BACKEND, matrix, order=2, iterations=25, chebyshev_start=5, gamma=0.9, graph=False)
    replayed = JacobiSolve(BACKEND, matrix, order=2, iterations=25, chebyshev_start=5, gamma=0.9, graph=True)
    assert replayed.graph and not launched.graph
    for initial in (None, rng.normal(size=(matrix.shape[0], 3)), rng.normal(size=(matrix.shape[0], 3))):
        rhs = rng.normal(size=(matrix.shape[0], 3))
        expected, expected_report = launched.solve(rhs, initial)
        got, report = replayed.solve(rhs, initial)
        np.testing.assert_array_equal(got, expected)
        assert report.iterations == expected_report.iterations == 25
        assert report.residual == expected_report.residual
        got[:] = np.nan     # a returned solution is the caller's: the next solve must not depend on it
    assert replayed._captured is not None

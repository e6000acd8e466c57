"""benchmarks.global_solves measures the PD global step's solve by other methods than CHOLMOD's: each must solve the
cloth's actual system (the permutation of the symmetric factor is easy to get backwards)."""

from __future__ import annotations

from benchmarks.global_solves import cloth_system, solves, symmetric_factor
from solver_server.backend import get_backend


def test_every_measured_solve_solves_the_cloth_system():
    matrix, rhs, exact, warm = cloth_system(15)
    results = solves(get_backend("cpu"), matrix, rhs, exact, warm, symmetric_factor(matrix), repeats=1,
                     tolerance=1e-12)
    assert set(results) == {"cholespy", "triangular", "cg"}
    assert results["cholespy"][1] < 1e-12 and results["triangular"][1] < 1e-12
    # CG to a relative residual of 1e-12 on a matrix of condition ~1e4: well within a micrometre
    assert results["cg"][1] < 1e-6 and results["cg"][2] > 1

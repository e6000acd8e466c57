"""The PD global step's linear solve on each device, by the methods a capturable substep could use.

Scene: seed 001's cloth (``benchmarks.gpu.cloth_scene``, 141 × 141 vertices pinned at two corners, 2 substeps at
24 fps), its system matrix K = M/h² + Σ ω AᵀA with the pins eliminated, exactly as ``PDSolver`` factors it. Right-hand
sides: the three coordinate columns of K x for positions x of the draped cloth (a frame of the scene), the previous
substep's solution perturbed as a warm start.

Per device (CPU always; CUDA when CuPy and a GPU are there), ms per solve of the three right-hand sides
(best of ``--repeats``, synchronized) and the largest error against the direct solve [m]:

- ``cholespy``: CHOLMOD's factor and its solve on the device (Tangle's default; on CUDA its triangular solves run
  on the legacy stream, outside any captured graph);
- ``triangular``: the same ordering's factor L D Lᵀ taken from scipy's SuperLU in symmetric mode, solved by two
  sparse triangular solves on the device (CuPy's ``spsolve_triangular``: cuSPARSE on CUDA, on CuPy's stream);
- ``cg``: conjugate gradients with the Jacobi preconditioner, warm-started from the perturbed previous solution, to a
  relative residual of ``--tolerance`` (CuPy's or scipy's ``cg``); the iterations are printed.

    .venv/bin/python -m benchmarks.global_solves [--resolution 141] [--repeats 5] [--tolerance 1e-8]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from benchmarks.gpu import cloth_scene
from solver_server.backend import BackendError, get_backend
from solver_server.simulation import Simulation


def cloth_system(resolution: int):
    """(K (n, n) csr with the pins eliminated, right-hand sides (n, 3), their direct solution (n, 3), a warm start
    (n, 3)) of the seed cloth after two frames."""
    simulation = Simulation(cloth_scene(resolution, 2), get_backend("cpu"))
    simulation.initial_frame()
    simulation.advance(None)
    solver = simulation.groups[0].solver
    matrix = solver.system_matrix.tocsr()
    positions = np.asarray(simulation.groups[0].state.positions, dtype=np.float64)
    rhs = matrix @ positions
    exact = scipy.sparse.linalg.spsolve(matrix.tocsc(), rhs)
    warm = exact + 1e-4 * np.random.default_rng(3).standard_normal(exact.shape)
    return matrix, rhs, exact, warm


def symmetric_factor(matrix):
    """(L (n, n) unit lower, U (n, n) upper, permutation (n,)) with Pr K Pc = L U from SuperLU in symmetric mode
    (a fill-reducing ordering of K + Kᵀ, diagonal pivots)."""
    lu = scipy.sparse.linalg.splu(matrix.tocsc(), permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                                  options={"SymmetricMode": True})
    if not np.array_equal(lu.perm_r, lu.perm_c):
        raise RuntimeError("SuperLU pivoted off the diagonal: not a symmetric factor")
    return lu.L.tocsr(), lu.U.tocsr(), lu.perm_c


def best_ms(function, repeats: int, synchronize) -> tuple[float, object]:
    result = function()
    synchronize()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        result = function()
        synchronize()
        best = min(best, (time.perf_counter() - started) * 1e3)
    return best, result


def solves(backend, matrix, rhs, exact, warm, factors, repeats: int, tolerance: float) -> dict:
    """name -> (ms per solve of the three right-hand sides, largest error against ``exact`` [m], CG iterations per
    right-hand side or None) of every method (module docstring) on ``backend``."""
    xp = backend.xp
    synchronize = (lambda: xp.cuda.Stream.null.synchronize()) if backend.name == "cuda" else (lambda: None)
    if backend.name == "cuda":
        import cupyx.scipy.sparse as device_sparse  # noqa: PLC0415
        import cupyx.scipy.sparse.linalg as device_linalg  # noqa: PLC0415
    else:
        device_sparse, device_linalg = scipy.sparse, scipy.sparse.linalg
    on_device = lambda array: xp.asarray(array)  # noqa: E731
    device_rhs = on_device(rhs)
    results = {}

    def record(name, timed, iterations=None):
        ms, solution = timed
        host = backend.to_host(solution) if backend.name == "cuda" else np.asarray(solution)
        results[name] = (ms, float(np.abs(host - exact).max()), iterations)

    solve = backend.factorized(matrix)
    record("cholespy", best_ms(lambda: solve(device_rhs), repeats, synchronize))

    lower, upper, permutation = factors
    device_lower, device_upper = device_sparse.csr_matrix(lower), device_sparse.csr_matrix(upper)
    order = on_device(permutation)
    inverse = on_device(np.argsort(permutation))

    def triangular():
        # SuperLU's Pr K Pc = L U: row i of K is row permutation[i] of the factor, unknown i is its permutation[i]
        forward = device_linalg.spsolve_triangular(device_lower, device_rhs[inverse], lower=True, unit_diagonal=True)
        return device_linalg.spsolve_triangular(device_upper, forward, lower=False)[order]
    record("triangular", best_ms(triangular, repeats, synchronize))

    device_matrix = device_sparse.csr_matrix(matrix)
    inverse_diagonal = 1.0 / on_device(matrix.diagonal())
    preconditioner = device_linalg.LinearOperator(matrix.shape, matvec=lambda v: inverse_diagonal * v.ravel())
    device_warm = on_device(warm)
    counts = []

    def conjugate_gradients():
        columns, iterations = [], 0
        for k in range(3):
            seen = [0]

            def count(_, seen=seen):
                seen[0] += 1
            arguments = {"x0": device_warm[:, k], "M": preconditioner, "maxiter": 20000, "callback": count}
            try:
                column, _ = device_linalg.cg(device_matrix, device_rhs[:, k], rtol=tolerance, **arguments)
            except TypeError:    # a CuPy that still names the relative tolerance tol
                column, _ = device_linalg.cg(device_matrix, device_rhs[:, k], tol=tolerance, **arguments)
            columns.append(column)
            iterations += seen[0]
        counts.append(iterations / 3)
        return xp.stack(columns, axis=1)
    timed = best_ms(conjugate_gradients, repeats, synchronize)
    record("cg", timed, counts[-1])
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resolution", type=int, default=141)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tolerance", type=float, default=1e-8, help="CG's relative residual")
    args = parser.parse_args(argv)
    matrix, rhs, exact, warm = cloth_system(args.resolution)
    factors = symmetric_factor(matrix)
    print(f"seed cloth {args.resolution} x {args.resolution}: {matrix.shape[0]} rows, {matrix.nnz} entries, factor "
          f"{factors[0].nnz + factors[1].nnz} entries; diagonal {matrix.diagonal().min():.3g} .. "
          f"{matrix.diagonal().max():.3g}")
    backends = [get_backend("cpu")]
    try:
        backends.append(get_backend("cuda"))
    except BackendError as exc:
        print(f"CUDA not available: {exc}")
    for backend in backends:
        for name, (ms, error, iterations) in solves(backend, matrix, rhs, exact, warm, factors, args.repeats,
                                                    args.tolerance).items():
            extra = "" if iterations is None else \
                f" ({iterations:.0f} iterations per right-hand side to a relative residual of {args.tolerance:g})"
            print(f"  {backend.name:5s} {name:11s} {ms:8.2f} ms per solve of 3 right-hand sides, error {error:.1e} m"
                  f"{extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Global step of Projective Dynamics (seed §4): solve K x = b for the free particles.

K = M/h² + Σ_c ω_c A_cᵀ A_c is the same for x, y and z, so one (n_free, n_free) matrix is
factored once and solved with a (n_free, 3) right-hand side. Fully pinned particles are
eliminated: their targets move to the right-hand side (b_F − K_FP x_P), so animated pins never
trigger a refactorization; only a change of the constraint set or pin set does.

Solvers:
- ``CholeskySolve``: prefactored sparse direct solve (default, seed §4.2).
- ``JacobiSolve``: Jacobi / A-Jacobi of order l (x ← Rˡ x + Σ_{j<l} Rʲ D⁻¹ b, R = D⁻¹B; seed
  §4.3.2, eq. 4-8) with Chebyshev acceleration (S, γ, ρ; eqs. 4-11, 4-12), a Warp kernel launch per sweep
  (``kernels.jacobi``: the seed's GPU path). Divergence
  (growing residual or non-finite values) is detected; the caller falls back to Cholesky.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse

from ...kernels import capture, replay
from .kernels.jacobi import CsrKernelMatrix


@dataclass
class SolveReport:
    """iterations run, final relative residual ‖b − Kx‖/‖b‖, and whether it diverged."""

    iterations: int = 0
    residual: float = 0.0
    diverged: bool = False


def chebyshev_weight(k: int, start: int, rho: float, omega: float) -> float:
    """ω_{k+1} of the Chebyshev semi-iteration (seed eq. 4-12): 1 before S, then 2/(2 − ρ²), then
    4/(4 − ρ²ω)."""
    if k < start:
        return 1.0
    if k == start:
        return 2.0 / (2.0 - rho * rho)
    return 4.0 / (4.0 - rho * rho * omega)


class CholeskySolve:
    """Prefactored sparse SPD solve of K_FF (host-built, device-resident via the backend)."""

    name = "cholesky"

    def __init__(self, backend, matrix_free: scipy.sparse.csr_matrix):
        self.backend = backend
        self.solve_factor = backend.factorized(matrix_free)

    def solve(self, rhs, initial=None) -> tuple[object, SolveReport]:
        return self.solve_factor(rhs), SolveReport(iterations=1)


class JacobiSolve:
    """(A-)Jacobi with Chebyshev acceleration on K_FF.

    order l in 1..3; iterations: Jacobi sweeps of Rˡ per global step; S: Chebyshev start
    iteration; gamma: under-relaxation γ; rho: spectral radius estimate of Rˡ (estimated by
    power iteration when None). Divergence: relative residual grows above its start value ×
    ``divergence_factor`` or becomes non-finite. graph: replay the sweeps as one captured graph
    (``kernels.capture``; default on CUDA, where a launch's host time exceeds a sweep's GPU time); the CPU
    default launches each sweep with its rows over the CPU threads.
    """

    name = "jacobi"

    def __init__(self, backend, matrix_free: scipy.sparse.csr_matrix, order: int = 1, iterations: int = 50,
                 chebyshev_start: int = 10, gamma: float = 0.9, rho: float | None = None,
                 divergence_factor: float = 1e3, graph: bool | None = None):
        if order not in (1, 2, 3):
            raise ValueError(f"A-Jacobi order must be 1, 2 or 3, got {order}")
        self.backend = backend
        self.order = order
        self.iterations = int(iterations)
        self.chebyshev_start = int(chebyshev_start)
        self.gamma = float(gamma)
        self.divergence_factor = divergence_factor
        matrix = scipy.sparse.csr_matrix(matrix_free)
        diagonal = matrix.diagonal()
        inv_diag = 1.0 / diagonal
        off = scipy.sparse.diags(diagonal) - matrix            # B = D − K
        jacobi = (scipy.sparse.diags(inv_diag) @ off).tocsr()   # R = D⁻¹B
        power = scipy.sparse.identity(matrix.shape[0], format="csr")
        beta_terms = []
        for _ in range(order):
            beta_terms.append(power)
            power = (power @ jacobi).tocsr()
        beta_operator = sum(beta_terms[1:], beta_terms[0]) @ scipy.sparse.diags(inv_diag)  # Σ_{j<l} Rʲ D⁻¹
        self.spectral_radius = self._spectral_radius(power)      # of Rˡ; ≥ 1 means (A-)Jacobi diverges
        self.rho = float(rho) if rho is not None else min(self.spectral_radius, 0.9999)
        xp = backend.xp
        self.matrix = CsrKernelMatrix(xp, matrix)
        self.iteration_matrix = CsrKernelMatrix(xp, power)
        self.beta_operator = CsrKernelMatrix(xp, beta_operator)
        self.graph = backend.name != "cpu" if graph is None else bool(graph)
        self._captured = None      # (graph, its buffers, the buffer holding its result) once recorded
        self.diverged_since_read = backend.xp.zeros((), dtype=bool)   # deferred solves' divergence (device)

    def _sweeps(self, x, beta, previous, spare, split: bool = True):
        """The ``iterations`` Chebyshev sweeps from x (previous: x too, spare: scratch; all (n, 3) on the
        device, overwritten): returns the one of the three buffers that holds the result."""
        omega = 1.0
        for k in range(self.iterations):
            omega = chebyshev_weight(k, self.chebyshev_start, self.rho, omega)
            self.iteration_matrix.sweep(x, beta, previous, omega, self.gamma, spare, split=split)
            previous, x, spare = x, spare, previous
        return x

    def _replay_sweeps(self, x, beta):
        """``_sweeps`` as one graph replay (``kernels.capture``, recorded on the first solve over buffers of its
        own; the weights ω_k are the same every solve): a global step costs one launch instead of
        ``iterations``. Returns a new array."""
        if self._captured is None:
            buffers = [self.backend.xp.empty_like(x) for _ in range(4)]          # x, β, previous, spare
            graph, result = capture(self.iteration_matrix.device,
                                    lambda: self._sweeps(*buffers, split=False))
            self._captured = (graph, buffers, result)
        graph, (start, beta_buffer, previous, _), result = self._captured
        start[...] = x
        previous[...] = x
        beta_buffer[...] = beta
        replay(graph, self.iteration_matrix.device)
        return result.copy()

    @staticmethod
    def _spectral_radius(operator, steps: int = 60) -> float:
        rng = np.random.default_rng(0)
        vector = rng.standard_normal(operator.shape[0])
        estimate = 0.0
        for _ in range(steps):
            nxt = operator @ vector
            norm = np.linalg.norm(nxt)
            if norm == 0:
                return 0.0
            estimate = norm / np.linalg.norm(vector)
            vector = nxt / norm
        return float(estimate)

    def solve(self, rhs, initial=None, deferred: bool = False) -> tuple[object, SolveReport]:
        """x ≈ K⁻¹ rhs for rhs (n, 3) (or (n,), (n, 1), (n, 2): padded to three columns) from ``initial`` (same
        shape; default β): ``iterations`` sweeps, each one launch of ``kernels.jacobi.chebyshev_sweep``; returns
        (x, SolveReport). ``deferred``: the divergence test stays on the device (``diverged_since_read``, read by
        the caller once a frame), a diverged solve returns its start instead, and the report's residual is a 0-d
        device array; else both are read here."""
        xp = self.backend.xp
        columns = 1 if rhs.ndim == 1 else rhs.shape[1]
        if columns != 3:
            if columns > 3:
                raise ValueError(f"JacobiSolve.solve takes at most 3 right-hand sides, got {columns}")
            padded = lambda values: xp.concatenate(  # noqa: E731
                [values.reshape(-1, columns), xp.zeros((values.shape[0], 3 - columns))], axis=1)
            x, report = self.solve(padded(rhs), None if initial is None else padded(initial), deferred)
            return x[:, :columns].reshape(rhs.shape), report
        rhs = xp.ascontiguousarray(rhs, dtype=xp.float64)
        beta = self.beta_operator.product(xp, rhs)
        x = beta.copy() if initial is None else xp.array(initial, dtype=xp.float64, order="C")
        start_residual = xp.linalg.norm(rhs - self.matrix.product(xp, x))
        start = x.copy() if deferred else None
        x = self._replay_sweeps(x, beta) if self.graph else self._sweeps(x, beta, x.copy(), xp.empty_like(x))
        residual = xp.linalg.norm(rhs - self.matrix.product(xp, x))
        if deferred:
            scale = xp.maximum(xp.linalg.norm(rhs), 1e-300)
            relative, start_relative = residual / scale, start_residual / scale
            diverged = ~xp.isfinite(relative) | (relative > xp.maximum(start_relative, 1e-12) * self.divergence_factor) \
                | (relative > 1.0)
            self.diverged_since_read = self.diverged_since_read | diverged
            # a diverged solve leaves its start (the last iterate): the frame stays sane until its end switches
            return xp.where(diverged, start, x), SolveReport(iterations=self.iterations, residual=relative)
        # the three norms reach the host together: one device synchronization per solve
        rhs_norm, start_residual, residual = (float(value) for value in xp.stack(
            [xp.linalg.norm(rhs), start_residual, residual]).tolist())
        rhs_norm = rhs_norm or 1.0
        start_residual, residual = start_residual / rhs_norm, residual / rhs_norm
        report = SolveReport(iterations=self.iterations, residual=residual)
        report.diverged = (not np.isfinite(residual)) or residual > max(start_residual, 1e-12) * self.divergence_factor \
            or residual > 1.0
        return x, report

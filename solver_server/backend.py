"""The one place that picks the array module: numpy/scipy on CPU, cupy/cupyx on CUDA, and the Warp
device of the job's kernels (``Backend.warp_device``).

Solver code is written once against ``backend.xp`` (numpy-compatible) and
``backend.sparse`` (scipy.sparse-compatible) and moves data across the host/device
boundary only through :meth:`Backend.to_host` / :meth:`Backend.from_host`.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import scipy.sparse
import scipy.sparse.linalg

from .collision import broad_phase

try:  # optional: CHOLMOD sparse Cholesky (pip install cholespy)
    import cholespy as _cholespy
except ImportError:  # pragma: no cover - depends on the environment
    _cholespy = None

CHOLESKY_BACKEND = os.environ.get("TANGLE_CHOLESKY", "cholespy")  # "cholespy" (if installed) | "superlu"

# Broad phase (collision.broad_phase): "auto" = scipy's k-d tree for numpy arrays (3-9x faster than the
# grid in numpy at 20k-100k points, docs/gpu.md) and the xp hash grid for device arrays; "grid" = the
# grid everywhere; "kdtree" = the k-d tree everywhere, device arrays copied to the host and back (the
# pre-grid behaviour, kept for comparisons: it is a host round trip on every query).
BROAD_PHASE = os.environ.get("TANGLE_BROAD_PHASE", "auto")


def _cholespy_factor(backend: "Backend", matrix) -> Callable:
    """CHOLMOD factorization via cholespy; solve(rhs (n,) or (n, k)) on the backend's device."""
    coo = scipy.sparse.coo_matrix(matrix)
    n = coo.shape[0]
    xp = backend.xp
    rows = xp.asarray(coo.row.astype(np.int32))
    cols = xp.asarray(coo.col.astype(np.int32))
    data = xp.asarray(coo.data.astype(np.float64))
    solver = _cholespy.CholeskySolverD(n, rows, cols, data, _cholespy.MatrixType.COO)

    def solve(rhs):
        vector = rhs.ndim == 1
        right = xp.ascontiguousarray(rhs[:, None] if vector else rhs, dtype=xp.float64)   # no copy if it is one
        out = xp.empty_like(right)                                                        # every entry written
        solver.solve(right, out)
        return out[:, 0] if vector else out

    return solve


CG_TOLERANCE = 1e-10   # relative residual ‖b − A x‖ / ‖b‖ of the device-side solve
CG_MAX_ITERATIONS = 2000
CG_CHECK_EVERY = 4     # iterations between convergence tests (each one is a device -> host sync)


def conjugate_gradient_factor(backend: "Backend", matrix, tolerance: float = CG_TOLERANCE,
                              max_iterations: int = CG_MAX_ITERATIONS) -> Callable:
    """Device-side solve of a sparse SPD matrix (n, n) by Jacobi-preconditioned conjugate gradients.

    Needs only sparse matrix-vector products and elementwise ``xp`` math, so every operation runs on
    the backend's device (``cupyx.scipy.sparse.linalg.factorized`` would factor on the host with SuperLU
    and copy every right-hand side across). All columns of an (n, k) right-hand side iterate together;
    the iteration stops when every column's relative residual is below ``tolerance``. The convergence
    test is a device -> host synchronization, so it runs every ``CG_CHECK_EVERY`` iterations, and only
    from a few iterations before the count the previous solve needed (the PD solves of one matrix,
    warm-started, need similar counts): about 2 tests per solve instead of one every 4 iterations. Returns
    ``solve(rhs (n,) or (n, k)) -> same shape``; raises ``FloatingPointError`` if it does not converge
    within ``max_iterations``.
    """
    xp = backend.xp
    host = scipy.sparse.csr_matrix(matrix, dtype=np.float64)
    device_matrix = backend.sparse.csr_matrix(host) if backend.name != "cpu" else host
    inverse_diagonal = backend.from_host(1.0 / host.diagonal())
    previous = {"iterations": 0}   # iterations the last solve needed

    def converged(residual, rhs_norm) -> bool:
        return bool((xp.sqrt((residual * residual).sum(axis=0)) <= tolerance * rhs_norm).all())

    def solve(rhs):
        vector = rhs.ndim == 1
        right = rhs[:, None] if vector else rhs
        preconditioner = inverse_diagonal[:, None]
        x = right * preconditioner
        residual = right - device_matrix @ x
        rhs_norm = xp.sqrt((right * right).sum(axis=0))
        rhs_norm = xp.where(rhs_norm > 0.0, rhs_norm, 1.0)
        z = residual * preconditioner
        direction = z.copy()
        rz = (residual * z).sum(axis=0)
        first_test = max(previous["iterations"] - CG_CHECK_EVERY, 0)
        for iteration in range(max_iterations):
            if iteration >= first_test and (iteration - first_test) % CG_CHECK_EVERY == 0 \
                    and converged(residual, rhs_norm):
                previous["iterations"] = iteration
                return x[:, 0] if vector else x
            product = device_matrix @ direction
            curvature = (direction * product).sum(axis=0)
            alpha = rz / xp.where(curvature > 0.0, curvature, 1.0)
            x = x + alpha * direction
            residual = residual - alpha * product
            z = residual * preconditioner
            rz_next = (residual * z).sum(axis=0)
            direction = z + (rz_next / xp.where(rz > 0.0, rz, 1.0)) * direction
            rz = rz_next
        raise FloatingPointError(f"device conjugate-gradient solve did not reach relative residual {tolerance:g} "
                                 f"in {max_iterations} iterations (matrix {host.shape[0]}x{host.shape[0]})")

    return solve


def repeat_each(xp, values, counts, total: int | None = None):
    """``values[i]`` repeated ``counts[i]`` times: numpy.repeat with an array of counts, on any device.

    CuPy's ``repeat`` refuses a device array of counts, so this uses a sorted search instead.
    values (n, ...), counts (n,) non-negative integers -> (counts.sum(), ...); ``total``: counts.sum() where the
    caller knows it on the host already (else it is read from the device).
    """
    total = int(counts.sum()) if total is None else total
    owner = xp.searchsorted(xp.cumsum(counts), xp.arange(total), side="right")
    return values[owner]


def _kdtree_for(xp) -> bool:
    """Whether the broad phase for arrays of ``xp`` is the host k-d tree (see ``BROAD_PHASE``)."""
    if BROAD_PHASE not in ("auto", "grid", "kdtree"):
        raise BackendError(f"TANGLE_BROAD_PHASE={BROAD_PHASE!r}: expected 'auto', 'grid' or 'kdtree'")
    return BROAD_PHASE == "kdtree" or (BROAD_PHASE == "auto" and xp is np)


def _on_host(xp, function, *arrays_and_args):
    """Run a host (scipy) broad phase on device arrays: download the arrays, upload the int results."""
    def download(value):
        if not hasattr(value, "shape"):
            return value
        if value.ndim == 0:
            return float(value)
        return value if xp is np else xp.asnumpy(value)

    host = [download(value) for value in arrays_and_args]
    result = function(*host)
    if xp is np:
        return result
    return tuple(xp.asarray(r) for r in result) if isinstance(result, tuple) else xp.asarray(result)


def neighbour_pairs(xp, points, radius):
    """Pairs (i, j), i < j, of ``points`` (n, 3) [m] with |p_i − p_j| ≤ radius [m]: (c, 2) int64 on the
    points' device, sorted by (i, j) (scipy ``cKDTree.query_pairs``)."""
    if _kdtree_for(xp):
        return _on_host(xp, broad_phase.kdtree_neighbour_pairs, points, radius)
    return broad_phase.grid_neighbour_pairs(xp, points, radius)


def points_near(xp, queries, points, radius):
    """Every (query, point) pair with |query − point| ≤ radius [m] (``cKDTree.query_ball_point``).

    queries (m, 3), points (n, 3). Returns (query index (c,), point index (c,)) int64 sorted by (query, point)."""
    if _kdtree_for(xp):
        return _on_host(xp, broad_phase.kdtree_points_near, queries, points, radius)
    return broad_phase.grid_points_near(xp, queries, points, radius)


def nearest_within(xp, queries, points, bound, k: int):
    """Per query, its (up to) ``k`` nearest points closer than ``bound`` [m] (``cKDTree.query`` with
    ``distance_upper_bound``). Returns (query index (c,), point index (c,)) int64 ordered by query and,
    on the grid, by distance."""
    if _kdtree_for(xp):
        return _on_host(xp, broad_phase.kdtree_nearest_within, queries, points, bound, k)
    return broad_phase.grid_nearest_within(xp, queries, points, bound, k)


class HostTimer:
    """Wall time since construction (CPU backends: the device is the host)."""

    def __init__(self):
        import time  # noqa: PLC0415

        self._clock = time.perf_counter
        self._start = self._clock()

    def elapsed_ms(self) -> float:
        return (self._clock() - self._start) * 1e3


class CudaEventTimer:
    """GPU time between construction and :meth:`elapsed_ms` measured with CUDA events on the current stream."""

    def __init__(self, cupy_module):
        self._cupy = cupy_module
        self._start = cupy_module.cuda.Event()
        self._start.record()

    def elapsed_ms(self) -> float:
        end = self._cupy.cuda.Event()
        end.record()
        end.synchronize()
        return float(self._cupy.cuda.get_elapsed_time(self._start, end))


class BackendError(RuntimeError):
    """The requested compute device cannot be used."""


@dataclass(frozen=True)
class Backend:
    """Array/sparse modules of one device.

    name: "cpu", "cuda" or "cuda-emulated" (solver_server/emulated_device.py); xp: numpy or cupy (or the emulated
    device's namespace); sparse: scipy.sparse or cupyx.scipy.sparse.
    """

    name: str
    xp: Any
    sparse: Any

    @property
    def warp_device(self) -> str:
        """The Warp device the job's kernels launch on (solver_server/kernels): "cpu", or "cuda:N" for
        CuPy's current device."""
        if self.name != "cuda":
            return "cpu"
        return f"cuda:{int(self.xp.cuda.Device().id)}"

    def to_host(self, array) -> np.ndarray:
        """Device array -> numpy array (no copy on CPU)."""
        if self.name == "cpu":
            return np.asarray(array)
        return self.xp.asnumpy(array)

    def from_host(self, array, dtype=None):
        """numpy array -> device array (float64 unless ``dtype`` is given for float input)."""
        array = np.asarray(array)
        if dtype is not None:
            array = array.astype(dtype, copy=False)
        if self.name == "cpu":
            return array
        return self.xp.asarray(array)

    def factorized(self, matrix) -> Callable:
        """Prefactor a sparse symmetric positive definite matrix (n, n).

        Returns ``solve(rhs)`` for rhs of shape (n,) or (n, k) on this device. Implementation
        (measured on the seed cloth matrix, docs/pd.md): CHOLMOD through ``cholespy`` when it is
        installed (about 3× faster solves than SuperLU here; on CUDA it solves on the GPU), else
        scipy's SuperLU with a symmetric fill-reducing ordering; on CUDA without cholespy, the
        device-side Jacobi-preconditioned conjugate gradient of :func:`conjugate_gradient_factor`.
        """
        if CHOLESKY_BACKEND == "cholespy" and _cholespy is not None:
            try:
                return _cholespy_factor(self, matrix)
            except (RuntimeError, ValueError, TypeError) as exc:  # e.g. not positive definite numerically
                logging.getLogger(__name__).warning("cholespy factorization failed (%s); using SuperLU", exc)
        if self.name == "cpu":
            lu = scipy.sparse.linalg.splu(
                scipy.sparse.csc_matrix(matrix),
                permc_spec="MMD_AT_PLUS_A",
                diag_pivot_thresh=0.0,
                options={"SymmetricMode": True},
            )
            return lu.solve
        return conjugate_gradient_factor(self, matrix)

    def substep_scope(self, where: str):
        """The context one group's substep runs in (``where`` names it); nothing on a real device, the download
        guard and CUDA's launch layouts on the emulated one."""
        return contextlib.nullcontext()

    def neighbour_pairs(self, points, radius):
        """:func:`neighbour_pairs` on this backend's arrays."""
        return neighbour_pairs(self.xp, points, radius)

    def points_near(self, queries, points, radius):
        """:func:`points_near` on this backend's arrays."""
        return points_near(self.xp, queries, points, radius)

    def nearest_within(self, queries, points, bound, k: int):
        """:func:`nearest_within` on this backend's arrays."""
        return nearest_within(self.xp, queries, points, bound, k)

    def start_timer(self):
        """A timer of device work from now: ``.elapsed_ms()`` (CUDA events on GPU, perf_counter on CPU)."""
        return CudaEventTimer(self.xp) if self.name == "cuda" else HostTimer()

    def device_info(self) -> dict:
        """{"name": str, "memory_bytes": int} for the welcome message."""
        if self.name == "cpu":
            import platform  # noqa: PLC0415

            memory = 0
            try:
                memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            except (ValueError, OSError, AttributeError):
                memory = 0
            return {"name": platform.processor() or platform.machine() or "cpu", "memory_bytes": int(memory)}
        device = self.xp.cuda.Device()
        props = self.xp.cuda.runtime.getDeviceProperties(device.id)
        name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
        return {"name": name, "memory_bytes": int(props["totalGlobalMem"])}


def get_backend(device: str = "cpu") -> Backend:
    """Backend for ``device`` ("cpu" or "cuda"). "cuda" without a working CuPy raises BackendError. (The
    command line's devices, the emulated one among them: solver_server/devices.py.)"""
    if device == "cpu":
        return Backend(name="cpu", xp=np, sparse=scipy.sparse)
    if device == "cuda":
        try:
            import cupy  # noqa: PLC0415
            import cupyx.scipy.sparse  # noqa: PLC0415

            cupy.cuda.runtime.getDeviceCount()
        except Exception as exc:  # ImportError or a CUDA runtime error: both mean "no usable GPU"
            raise BackendError(
                f"--device cuda needs CuPy and a working CUDA GPU ({type(exc).__name__}: {exc}); "
                "install the 'gpu' extra (pip install cupy-cuda12x) or use --device cpu"
            ) from exc
        return Backend(name="cuda", xp=cupy, sparse=cupyx.scipy.sparse)
    raise BackendError(f"unknown device {device!r}: expected 'cpu' or 'cuda'")


__all__ = ["Backend", "BackendError", "get_backend", "nearest_within", "neighbour_pairs", "points_near",
           "repeat_each"]

"""The one place that picks the array module: numpy/scipy on CPU, cupy/cupyx on CUDA.

Solver code is written once against ``backend.xp`` (numpy-compatible) and
``backend.sparse`` (scipy.sparse-compatible) and moves data across the host/device
boundary only through :meth:`Backend.to_host` / :meth:`Backend.from_host`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import scipy.sparse
import scipy.sparse.linalg


try:  # optional: CHOLMOD sparse Cholesky (pip install cholespy)
    import cholespy as _cholespy
except ImportError:  # pragma: no cover - depends on the environment
    _cholespy = None

CHOLESKY_BACKEND = os.environ.get("TANGLE_CHOLESKY", "cholespy")  # "cholespy" (if installed) | "superlu"


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
        right = xp.ascontiguousarray((rhs[:, None] if vector else rhs).astype(np.float64))
        out = xp.zeros_like(right)
        solver.solve(right, out)
        return out[:, 0] if vector else out

    return solve


class BackendError(RuntimeError):
    """The requested compute device cannot be used."""


@dataclass(frozen=True)
class Backend:
    """Array/sparse modules of one device.

    name: "cpu" or "cuda"; xp: numpy or cupy; sparse: scipy.sparse or cupyx.scipy.sparse.
    """

    name: str
    xp: Any
    sparse: Any

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
        scipy's SuperLU with a symmetric fill-reducing ordering; on CUDA without cholespy, cupyx.
        """
        if CHOLESKY_BACKEND == "cholespy" and _cholespy is not None:
            return _cholespy_factor(self, matrix)
        if self.name == "cpu":
            lu = scipy.sparse.linalg.splu(
                scipy.sparse.csc_matrix(matrix),
                permc_spec="MMD_AT_PLUS_A",
                diag_pivot_thresh=0.0,
                options={"SymmetricMode": True},
            )
            return lu.solve
        import cupyx.scipy.sparse.linalg as device_linalg  # noqa: PLC0415 (CUDA only)

        return device_linalg.factorized(self.sparse.csr_matrix(matrix))

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
    """Backend for ``device`` ("cpu" or "cuda"). "cuda" without a working CuPy raises BackendError."""
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


__all__ = ["Backend", "BackendError", "get_backend"]

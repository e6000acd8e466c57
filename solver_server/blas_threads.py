"""One BLAS/LAPACK thread per solver thread, unless the user set the thread count.

The solvers' hot paths are batched small products and banded LAPACK calls (DER: `cho_solve_banded` of an
(11, 83 000) band, (B, 5, 11) Gauss–Newton products; PD: sparse solves and per-element 3 × 3 work).  On
such calls OpenBLAS's worker threads mostly spin: on the 2-core box the DER Blender-comparison scene ran
4.81 s per frame with 9.3 s of CPU time under the default (all cores), and 4.13 s per frame with 4.1 s of
CPU time on one thread; the PD cloth benchmark 157 ms → 152 ms per frame.  Jobs of the server run in
threads of one process (jobs.py), so parallel work comes from parallel jobs, not from BLAS.

The thread count is read by the BLAS libraries when they load, i.e. on the first ``import numpy``:
`prefer_single_threaded_blas` must run before that (``python -m solver_server`` and ``python -m
benchmarks...`` call it first thing).  Variables already set in the environment are left alone, so a
pipeline TD can still give BLAS more threads (``OPENBLAS_NUM_THREADS=8 python -m solver_server``).
"""

from __future__ import annotations

import os
import sys

# OpenBLAS (numpy's and scipy's wheels), MKL (conda builds), Accelerate (macOS)
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def prefer_single_threaded_blas(environ=None) -> bool:
    """Default every BLAS thread-count variable not set yet in environ (os.environ) to 1.  Returns False
    and changes nothing when numpy is already imported (its BLAS has read its thread count then)."""
    if "numpy" in sys.modules:
        return False
    environ = os.environ if environ is None else environ
    for name in BLAS_THREAD_VARIABLES:
        environ.setdefault(name, "1")
    return True

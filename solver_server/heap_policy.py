"""Keep the solvers' large temporary arrays on the heap instead of in fresh memory maps (glibc only).

A solver step allocates and frees arrays of several MB many times (DER on 83 000 DOF: the (11, 83 000)
band, (19 000, 66) element slots, (19 000, 11, 11) blocks; every trial of a line search a few more).  glibc's
defaults give such blocks their own mmap, or return the top of the heap to the system once more than twice
the (adaptive) mmap threshold is free, so the next allocation of the same size touches fresh pages again: a
page fault per 4 KiB, on every allocation.  Measured on the 2-core box, DER Blender-comparison scene, 5
contact-free substeps 3.0 → 2.3 s (−23 %), a substep with 1 818 contacts 3.55 → 3.05 s; with
M_TRIM_THRESHOLD set alone (which turns the adaptive mmap threshold off) the same substeps took 6.2 s.

`keep_large_arrays_on_the_heap` therefore sets, through ``mallopt``: blocks up to MMAP_THRESHOLD come from the
heap, the heap keeps up to TRIM_THRESHOLD of free memory at its top, and grows by TOP_PAD at a time.  The cost
is memory: the process keeps its peak working set (up to 1 GiB beyond it) instead of returning it between
steps, which suits a solver server whose steps all need about the same memory.  Only the solver server
process (``python -m solver_server``) and the benchmarks call it, never Blender's process.  A user who set
glibc's own variables (MALLOC_*_ or GLIBC_TUNABLES) keeps them: nothing is changed then.
"""

from __future__ import annotations

import ctypes
import os
import sys

# mallopt parameters (malloc.h)
M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
MMAP_THRESHOLD = 256 << 20   # bytes: larger blocks still get their own mmap
TRIM_THRESHOLD = 1 << 30     # bytes of free heap top kept rather than returned to the system
TOP_PAD = 64 << 20           # bytes added to every heap growth
GLIBC_MALLOC_VARIABLES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")


def keep_large_arrays_on_the_heap(environ=None, platform: str | None = None) -> bool:
    """Apply the policy above to this process.  Returns True when glibc accepted all three settings; False,
    changing nothing, off Linux/glibc or when environ (os.environ) sets one of GLIBC_MALLOC_VARIABLES."""
    environ = os.environ if environ is None else environ
    platform = sys.platform if platform is None else platform
    if not platform.startswith("linux") or any(name in environ for name in GLIBC_MALLOC_VARIABLES):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version   # glibc only: musl's mallopt ignores its arguments
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all([mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1, mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1,
                mallopt(M_TOP_PAD, TOP_PAD) == 1])

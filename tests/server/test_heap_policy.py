"""solver_server.heap_policy: large arrays stay on the heap in the server process (glibc), the user's own
glibc settings win, and nothing happens off Linux."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from solver_server.heap_policy import GLIBC_MALLOC_VARIABLES, keep_large_arrays_on_the_heap

REPOSITORY = Path(__file__).resolve().parents[2]

# bytes in mmapped blocks (mallinfo2().hblkhd) while a 64 MB array is alive, then whether freeing and
# allocating it again reuses the pages (the heap keeps them: its size does not drop in between)
PROBE = """
import ctypes, sys
{setup}
import numpy
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
array = numpy.ones(8_000_000)
mapped = libc.mallinfo2().hblkhd
del array
heap_after_free = libc.mallinfo2().arena
print(mapped >= 64_000_000, heap_after_free >= 64_000_000)
"""


def _probe(setup: str, **preset: str) -> str:
    environment = {key: value for key, value in os.environ.items() if key not in GLIBC_MALLOC_VARIABLES}
    environment.update(preset)
    environment["PYTHONPATH"] = str(REPOSITORY)
    completed = subprocess.run([sys.executable, "-c", PROBE.format(setup=setup)], env=environment,
                               capture_output=True, text=True, timeout=120, cwd=REPOSITORY)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip()


needs_glibc = pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(
    __import__("ctypes").CDLL(None), "mallinfo2"), reason="glibc 2.33+ (mallinfo2) only")


@needs_glibc
def test_large_arrays_come_from_the_heap_and_stay_there():
    # glibc's defaults: a 64 MB block gets its own mmap and is unmapped when freed
    assert _probe("") == "True False"
    assert _probe("from solver_server.heap_policy import keep_large_arrays_on_the_heap as k; assert k()") \
        == "False True"


@needs_glibc
def test_server_entry_point_and_benchmarks_apply_it():
    assert _probe("import solver_server.__main__") == "False True"
    assert _probe("import benchmarks") == "False True"


@needs_glibc
def test_the_users_glibc_settings_win():
    assert _probe("from solver_server.heap_policy import keep_large_arrays_on_the_heap as k; "
                  "assert not k()", MALLOC_TOP_PAD_="0") == "True False"


def test_nothing_happens_off_linux():
    assert keep_large_arrays_on_the_heap(environ={}, platform="darwin") is False
    assert keep_large_arrays_on_the_heap(environ={"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"},
                                         platform="linux") is False

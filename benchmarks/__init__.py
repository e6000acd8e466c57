"""Side-by-side performance runs (not part of the test suite)."""

from solver_server.blas_threads import prefer_single_threaded_blas
from solver_server.heap_policy import keep_large_arrays_on_the_heap

# Tangle runs here as in the server process: one BLAS thread per solver (solver_server/blas_threads.py),
# set before any benchmark module imports numpy, and large arrays kept on the heap (heap_policy.py; Blender,
# where a benchmark runs bpy in the same process, runs under the same allocator settings)
prefer_single_threaded_blas()
keep_large_arrays_on_the_heap()

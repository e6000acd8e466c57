"""Side-by-side performance runs (not part of the test suite)."""

from solver_server.blas_threads import prefer_single_threaded_blas

# Tangle runs here as in the server process: one BLAS thread per solver (solver_server/blas_threads.py);
# before any benchmark module imports numpy
prefer_single_threaded_blas()

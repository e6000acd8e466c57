"""solver_server.blas_threads: one BLAS thread per solver unless the user chose a count, set before numpy
loads (in fresh interpreters: the variables are read once, when the BLAS library loads)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from solver_server.blas_threads import BLAS_THREAD_VARIABLES

REPOSITORY = Path(__file__).resolve().parents[2]


def _run(code: str, **preset: str) -> str:
    environment = {key: value for key, value in os.environ.items() if key not in BLAS_THREAD_VARIABLES}
    environment.update(preset)
    environment["PYTHONPATH"] = str(REPOSITORY)
    completed = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True,
                               timeout=120, cwd=REPOSITORY)
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.strip()


SHOW = "import os; print(' '.join(os.environ.get(name, '-') for name in %r))" % (BLAS_THREAD_VARIABLES,)


def test_defaults_to_one_thread_before_numpy():
    out = _run("from solver_server.blas_threads import prefer_single_threaded_blas as p; print(p()); " + SHOW)
    assert out.splitlines() == ["True", "1 1 1"]


def test_keeps_a_count_the_user_set():
    out = _run("from solver_server.blas_threads import prefer_single_threaded_blas as p; p(); " + SHOW,
               OPENBLAS_NUM_THREADS="3")
    assert out == "3 1 1"


def test_changes_nothing_once_numpy_is_loaded():
    out = _run("import numpy; from solver_server.blas_threads import prefer_single_threaded_blas as p; "
               "print(p()); " + SHOW)
    assert out.splitlines() == ["False", "- - -"]


def test_server_entry_point_and_benchmarks_set_it_first():
    # importing the entry modules runs their first statement, before they import numpy (their main() is
    # not called)
    assert _run("import solver_server.__main__; " + SHOW) == "1 1 1"
    assert _run("import benchmarks.der_vs_blender_hair; " + SHOW) == "1 1 1"

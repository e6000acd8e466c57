"""Shared fixtures.

``solver_server_address``: starts a real ``python -m solver_server`` subprocess on a free loopback
port and yields its address (``tcp://127.0.0.1:PORT``); the process is killed at teardown.
``start_solver_server``: a callable ``(*extra_cli_args) -> ServerProcess`` (``.address``,
``.process``, ``.stderr_lines``) for tests that need the process itself; all are killed at teardown.
``solver_wheelhouse``: a folder of wheels of everything the solver needs (tests/solver_wheelhouse.py).

At the end of the run, any process the run started that is still alive (a solver server, a Blender) fails
the run, named, and is killed (tests/leftover_processes.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # plain `pytest` (not `python -m pytest`) from an uninstalled checkout
    sys.path.insert(0, str(REPO_ROOT))

from tests import leftover_processes  # noqa: E402
from tests.server_process import ServerProcess  # noqa: E402  (needs the repository root on sys.path)

_RUN_TOKEN = leftover_processes.mark_this_run()


def pytest_sessionfinish(session, exitstatus):
    """Fail the run if a process it started is still running (and end it)."""
    if hasattr(session.config, "workerinput"):
        return
    left = leftover_processes.leftovers(_RUN_TOKEN)
    if not left:
        return
    leftover_processes.end(left)
    lines = "\n".join(f"  pid {pid}: {command[:200]}" for pid, command in left)
    session.config.get_terminal_writer().line(f"\nprocesses started by this test run were still running at its end "
                                              f"(now killed):\n{lines}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def start_solver_server():
    started: list[ServerProcess] = []

    def start(*extra_args: str) -> ServerProcess:
        server = ServerProcess(*extra_args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture
def solver_server_address(start_solver_server):
    return start_solver_server().address


@pytest.fixture(scope="session")
def solver_wheelhouse():
    from tests.solver_wheelhouse import solver_wheelhouse as download  # noqa: PLC0415

    try:
        return download()
    except RuntimeError as error:
        pytest.skip(f"no wheels for a clean solver environment (offline?): {error}")


@pytest.fixture
def discarded_environments(tmp_path):
    """``tmp_path`` for a test that builds Python environments in it (about 650 MB each): after the test, passed
    or failed, every folder holding a ``pyvenv.cfg`` under it is deleted, so that a failed test keeps its logs
    and scene files but not its environments, and a run's tests do not fill a small disk."""
    yield tmp_path
    import shutil  # noqa: PLC0415

    for marker in sorted(tmp_path.rglob("pyvenv.cfg")):
        shutil.rmtree(marker.parent, ignore_errors=True)

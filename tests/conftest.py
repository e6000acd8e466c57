"""Shared fixtures.

``solver_server_address``: starts a real ``python -m solver_server`` subprocess on a free loopback
port and yields its address (``tcp://127.0.0.1:PORT``); the process is killed at teardown.
``start_solver_server``: a callable ``(*extra_cli_args) -> ServerProcess`` (``.address``,
``.process``, ``.stderr_lines``) for tests that need the process itself; all are killed at teardown.
``solver_wheelhouse``: a folder of wheels of everything the solver needs (tests/solver_wheelhouse.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # plain `pytest` (not `python -m pytest`) from an uninstalled checkout
    sys.path.insert(0, str(REPO_ROOT))

from tests.server_process import ServerProcess  # noqa: E402  (needs the repository root on sys.path)


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

"""Shared fixtures.

``solver_server_address``: starts a real ``python -m solver_server`` subprocess on a free loopback
port and yields its address (``tcp://127.0.0.1:PORT``); the process is killed at teardown.
``start_solver_server``: a callable ``(*extra_cli_args) -> ServerProcess`` (``.address``,
``.process``, ``.stderr_lines``) for tests that need the process itself; all are killed at teardown.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # plain `pytest` (not `python -m pytest`) from an uninstalled checkout
    sys.path.insert(0, str(REPO_ROOT))
_LISTENING = re.compile(r"tangle-solver listening on (\S+)")


class ServerProcess:
    """A solver server subprocess; ``address`` is known once it printed its listening line."""

    def __init__(self, *extra_args: str, startup_timeout: float = 30.0):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "solver_server", "--bind", "tcp://127.0.0.1:*", "--log-level", "INFO", *extra_args],
            cwd=REPO_ROOT,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self.stderr_lines: list[str] = []
        self.address: str | None = None
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        if not self._ready.wait(startup_timeout) or self.address is None:
            self.stop()
            raise RuntimeError("solver server did not start:\n" + "".join(self.stderr_lines))

    def _read_stderr(self) -> None:
        for line in self.process.stderr:  # keep draining so the pipe never fills
            self.stderr_lines.append(line)
            match = _LISTENING.search(line)
            if match and self.address is None:
                self.address = match.group(1)
                self._ready.set()
        self._ready.set()  # process ended

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.kill()
        return self.process.wait(10)


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

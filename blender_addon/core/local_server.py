"""Start and stop a local solver server subprocess on 127.0.0.1 (used by the demo, the CLI and tests).

Blender-free. The server runs as ``<python> -m solver_server --bind tcp://127.0.0.1:<free port>`` and
is ready once it answers ``hello``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]


def free_tcp_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalServer:
    """``with LocalServer() as address:`` runs a solver server for the block and always stops it.

    python: interpreter that has the ``solver_server`` package (default: this one, run from the
    repository root). startup_timeout [s]: how long to wait for the first ``welcome``.
    """

    def __init__(self, python: str | None = None, startup_timeout: float = 30.0, log_path: Path | None = None):
        self.python = python or sys.executable
        self.startup_timeout = startup_timeout
        self.log_path = log_path
        self.address = f"tcp://127.0.0.1:{free_tcp_port()}"
        self.process: subprocess.Popen | None = None
        self.welcome: dict | None = None
        self._log_file = None

    def start(self) -> str:
        command = [self.python, "-m", "solver_server", "--bind", self.address]
        environment = dict(os.environ)
        environment["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(REPOSITORY_ROOT), environment.get("PYTHONPATH", "")]))
        self._log_file = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(command, cwd=REPOSITORY_ROOT, env=environment,
                                        stdout=self._log_file, stderr=self._log_file)
        try:
            self.welcome = self._wait_until_ready()
        except BaseException:
            self.stop()
            raise
        return self.address

    def _wait_until_ready(self) -> dict:
        from .._protocol import SolverError, solver_client_class

        client_class = solver_client_class()
        deadline = time.monotonic() + self.startup_timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the solver server exited with code {self.process.returncode} while starting "
                                   f"({' '.join(self.process.args)})" +
                                   (f"; see {self.log_path}" if self.log_path else ""))
            try:
                with client_class(self.address, timeout=1.0) as client:
                    return client.hello()
            except SolverError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the solver server at {self.address} did not answer within "
                                       f"{self.startup_timeout:g} s") from None

    def stop(self, grace: float = 5.0) -> int | None:
        """Terminate (SIGTERM, then SIGKILL after ``grace`` s); returns the exit code."""
        process, self.process = self.process, None
        code = None
        if process is not None:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(grace)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(grace)
            code = process.returncode
        if self._log_file not in (None, subprocess.DEVNULL):
            self._log_file.close()
        self._log_file = None
        return code

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

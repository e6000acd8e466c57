"""A real ``python -m solver_server`` subprocess on a free loopback port, for tests and the fuzz script.

Kept out of conftest.py so scripts can import it (``from tests.server_process import ServerProcess``)
without clashing with the other conftest modules pytest has already imported.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
_LISTENING = re.compile(r"tangle-solver listening on (\S+)")


class ServerProcess:
    """A solver server subprocess; ``address`` is known once it printed its listening line."""

    def __init__(self, *extra_args: str, startup_timeout: float = 30.0, command: tuple[str, ...] | None = None,
                 cwd: Path = REPO_ROOT, env: dict | None = None):
        """command: how to run the server (default: this Python's ``-m solver_server`` from the checkout);
        cwd / env: its working folder and environment (default: the repository, this environment)."""
        command = command or (sys.executable, "-m", "solver_server")
        self.process = subprocess.Popen(
            [*command, "--bind", "tcp://127.0.0.1:*", "--log-level", "INFO", *extra_args],
            cwd=cwd,
            env=env,
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


def process_running(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie (ended, not yet reaped by its new parent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        return not Path("/proc").is_dir()


def wait_gone(pid: int, seconds: float) -> bool:
    """Wait up to ``seconds`` for process ``pid`` to end; True when it has."""
    deadline = time.monotonic() + seconds
    while process_running(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not process_running(pid)


def end_process(pid: int) -> None:
    """SIGKILL process ``pid`` if it still runs (a test's cleanup, also when the test failed)."""
    if process_running(pid):
        os.kill(pid, 9)

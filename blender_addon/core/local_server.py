"""Start and stop a local solver server subprocess on 127.0.0.1 (used by the demo, the CLI and tests).

Blender-free. The server runs as ``<python> -m solver_server --bind tcp://127.0.0.1:* --parent-pid <this
process>`` (the OS picks a free port; the server ends when this process ends, however it ends) in a
process group of its own, and is ready once it prints ``tangle-solver listening on <address>`` on stderr.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
_LISTENING = re.compile(r"tangle-solver listening on (\S+)")
# What `python -m solver_server` imports: checked up front so a wrong interpreter gets a clear message.
SERVER_MODULES = ("solver_server", "numpy", "scipy", "zmq", "msgpack")
_CHECK_SCRIPT = ("import importlib.util, sys\n"
                 "missing = [m for m in sys.argv[1:] if importlib.util.find_spec(m) is None]\n"
                 "print(' '.join(missing))\n")


class LocalServerError(RuntimeError):
    """The local solver server cannot be started (wrong interpreter, startup failure)."""


def _environment(extra_paths) -> dict:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = os.pathsep.join(
        filter(None, [*map(str, extra_paths), str(REPOSITORY_ROOT), environment.get("PYTHONPATH", "")]))
    return environment


def check_interpreter(python: str, extra_paths=(), timeout: float = 30.0) -> None:
    """Raise :class:`LocalServerError` unless ``python`` can import everything the solver server needs.

    extra_paths: folders put in front of PYTHONPATH (e.g. a checkout of the solver server).
    """
    hint = ("set 'Server Python' in the Tangle add-on preferences to an interpreter with the solver server "
            "installed (and 'Solver Folder' to its source folder if it is not installed)")
    if not python:
        raise LocalServerError(f"no Python interpreter is configured; {hint}")
    try:
        completed = subprocess.run([python, "-c", _CHECK_SCRIPT, *SERVER_MODULES], env=_environment(extra_paths),
                                   cwd=REPOSITORY_ROOT, capture_output=True, text=True, timeout=timeout,
                                   stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise LocalServerError(f"cannot run the Python interpreter '{python}' ({error}); {hint}") from None
    if completed.returncode != 0:
        raise LocalServerError(f"the Python interpreter '{python}' failed (exit {completed.returncode}: "
                               f"{completed.stderr.strip()[-300:]}); {hint}")
    missing = completed.stdout.split()
    if missing:
        raise LocalServerError(f"the Python interpreter '{python}' cannot run the solver server: it lacks "
                               f"{', '.join(missing)}; {hint}")


def own_process_group() -> dict:
    """Popen options that start a child outside this process's group (POSIX: its own session; Windows: its
    own process group), so a Ctrl-C in the terminal reaches the bake, which cancels cleanly, and not the
    solver it talks to; the solver still ends with this process (``--parent-pid``)."""
    if sys.platform == "win32":
        return {"creationflags": subprocess.CREATE_NEW_PROCESS_GROUP}
    return {"start_new_session": True}


class LocalServer:
    """``with LocalServer() as address:`` runs a solver server for the block and always stops it.

    python: interpreter that has the ``solver_server`` package (default: this one; the repository
    root is put on PYTHONPATH). startup_timeout [s]: how long to wait for the listening line; the server
    compiles its Warp kernels before it listens when their cache is cold (first start on a machine, or
    after an update: ~26 s on an idle 2-core box, more under load), so the default leaves room for that.
    log_path: optional file that receives the server's stderr log. extra_paths: folders put in front
    of PYTHONPATH (a solver server source folder).
    """

    def __init__(self, python: str | None = None, startup_timeout: float = 180.0, log_path: Path | None = None,
                 device: str = "cpu", extra_paths=()):
        self.python = python or sys.executable
        self.extra_paths = tuple(extra_paths)
        self.startup_timeout = startup_timeout
        self.log_path = log_path
        self.device = device
        self.address: str | None = None
        self.process: subprocess.Popen | None = None
        self.recent_log: deque[str] = deque(maxlen=40)
        self._ready = threading.Event()
        self._reader: threading.Thread | None = None

    def start(self) -> str:
        command = [self.python, "-m", "solver_server", "--bind", "tcp://127.0.0.1:*", "--device", self.device,
                   "--parent-pid", str(os.getpid())]
        self.process = subprocess.Popen(command, cwd=REPOSITORY_ROOT, env=_environment(self.extra_paths), text=True,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                        **own_process_group())
        self._reader = threading.Thread(target=self._read_log, name="tangle-local-server-log", daemon=True)
        self._reader.start()
        if not self._ready.wait(self.startup_timeout) or self.address is None:
            self.stop()
            raise LocalServerError(f"the solver server did not start within {self.startup_timeout:g} s "
                               f"({' '.join(command)}):\n" + "".join(self.recent_log))
        return self.address

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def _read_log(self) -> None:
        log_file = open(self.log_path, "w") if self.log_path else None
        try:
            for line in self.process.stderr:  # drain continuously so the pipe never fills
                self.recent_log.append(line)
                if log_file:
                    log_file.write(line)
                    log_file.flush()
                match = _LISTENING.search(line)
                if match and self.address is None:
                    self.address = match.group(1)
                    self._ready.set()
        finally:
            self._ready.set()
            if log_file:
                log_file.close()

    def stop(self, grace: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after ``grace`` seconds; returns the exit code (None if never started)."""
        process, self.process = self.process, None
        if process is None:
            return None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(grace)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(grace)
        if self._reader is not None:
            self._reader.join(grace)
        return process.returncode

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

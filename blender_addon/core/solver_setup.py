"""Set up a private Python environment that runs the local solver server. Blender-free.

A stock Blender has none of the solver's packages. ``SolverSetup`` makes a virtual environment in the
add-on's user folder with Blender's own Python, installs the solver's requirements into it with pip (from
PyPI, or with no network from a folder of wheels), checks the environment imports everything the server
needs, and compiles the solver's kernels once (so the first bake does not). The solver's source travels
with the add-on: a packaged extension carries ``solver/`` (solver_server + protocol) and
``solver/requirements.txt`` (both written by build_addon.py); a repository checkout uses the checkout and
its pyproject.toml.

Every step is a subprocess; ``run`` reports (fraction, text) to a callback and raises
:class:`SolverSetupError` with an artist-readable message (no network, pip failure, broken environment).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .local_server import REPOSITORY_ROOT, LocalServerError, check_interpreter

REQUIREMENTS_FILE = "requirements.txt"
SOLVER_FOLDER = "solver"       # inside a packaged extension
# pip output that means the packages could not be fetched (no network, index unreachable, nothing offline)
_OFFLINE = re.compile(r"Failed to establish a new connection|Temporary failure in name resolution|Network is "
                      r"unreachable|No matching distribution found|Could not find a version that satisfies|"
                      r"ConnectionError|ProxyError|SSLError|Name or service not known", re.I)
_PIP_ACTIVITY = re.compile(r"^(Collecting|Downloading|Processing|Installing collected packages|Successfully "
                           r"installed)\b.*", re.I)
# step weights for the progress fraction (installing dominates)
STEP_WEIGHTS = {"environment": 0.1, "packages": 0.6, "check": 0.05, "kernels": 0.25}


class SolverSetupError(RuntimeError):
    """The local solver could not be set up; the message says why and what to do."""


@dataclass(frozen=True)
class SolverSource:
    """Where the solver's code is (``folder`` holds the solver_server and protocol packages) and what it needs
    from pip (``requirements``: requirement strings). ``on_path``: folder to put on the server's PYTHONPATH
    ('' when the folder is already on it, as the repository checkout is)."""

    folder: Path
    requirements: tuple[str, ...]
    on_path: str


def solver_source(addon_folder: Path, gpu: bool = False) -> SolverSource:
    """The solver shipped with the add-on in ``addon_folder`` (a packaged extension's ``solver/``), else the
    repository checkout it was loaded from. gpu: add the CUDA extra (CuPy)."""
    packaged = addon_folder / SOLVER_FOLDER
    if (packaged / REQUIREMENTS_FILE).is_file():
        lines = (packaged / REQUIREMENTS_FILE).read_text(encoding="utf-8").splitlines()
        requirements = [line.split("#")[0].strip() for line in lines]
        base = [line for line in requirements if line and not line.startswith("gpu:")]
        extra = [line.removeprefix("gpu:").strip() for line in requirements if line.startswith("gpu:")]
        return SolverSource(packaged, tuple(base + (extra if gpu else [])), str(packaged))
    pyproject = REPOSITORY_ROOT / "pyproject.toml"
    if not pyproject.is_file() or not (REPOSITORY_ROOT / "solver_server").is_dir():
        raise SolverSetupError(f"the solver is not shipped with this add-on (no {packaged / REQUIREMENTS_FILE} "
                               "and no repository checkout); install the Tangle extension zip built by "
                               "build_addon.py")
    return SolverSource(REPOSITORY_ROOT, project_requirements(pyproject, gpu), "")


def project_requirements(pyproject: Path, gpu: bool = False) -> tuple[str, ...]:
    """The runtime requirements of pyproject.toml (plus its ``gpu`` extra)."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    extra = project.get("optional-dependencies", {}).get("gpu", []) if gpu else []
    return tuple(project["dependencies"]) + tuple(extra)


def requirements_text(pyproject: Path) -> str:
    """``solver/requirements.txt`` of a packaged extension: one requirement per line, the CUDA extra's
    prefixed with ``gpu:``."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    lines = ["# the local solver's packages, installed by Preferences > Set Up Local Solver"]
    lines += list(project["dependencies"])
    lines += [f"gpu: {requirement}" for requirement in project.get("optional-dependencies", {}).get("gpu", [])]
    return "\n".join(lines) + "\n"


def environment_python(environment: Path) -> Path:
    """The interpreter of the virtual environment at ``environment``."""
    return environment / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


@dataclass
class SolverSetup:
    """Create (or reuse) the environment at ``environment`` with ``base_python`` (Blender's Python), install
    ``source.requirements`` (from ``wheel_folder`` only, when given: no network), check it, warm the kernels.

    ``cancel()`` stops the running step; ``python`` is the environment's interpreter once ``run`` returned."""

    environment: Path
    source: SolverSource
    base_python: str = sys.executable
    wheel_folder: str = ""
    timeout: float = 1800.0
    _process: subprocess.Popen | None = field(default=None, repr=False)
    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False)
    log: list[str] = field(default_factory=list, repr=False)

    @property
    def python(self) -> Path:
        return environment_python(self.environment)

    def install_command(self) -> list[str]:
        command = [str(self.python), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off",
                   "--no-input"]
        if self.wheel_folder:
            command += ["--no-index", "--find-links", self.wheel_folder]
        return command + list(self.source.requirements)

    def steps(self) -> list[tuple[str, str, list[str]]]:
        """(key, label, command) of every subprocess step, in order (the check runs in between, in process)."""
        steps = []
        if not self.python.is_file():
            steps.append(("environment", "Creating the solver environment",
                          [self.base_python, "-m", "venv", str(self.environment)]))
        steps.append(("packages", "Installing the solver's packages", self.install_command()))
        steps.append(("kernels", "Compiling the solver's kernels",
                      [str(self.python), "-m", "solver_server", "--warm-kernels"]))
        return steps

    def run(self, report: Callable[[float, str], None] = lambda fraction, text: None) -> Path:
        """Run every step; returns the environment's interpreter. Raises SolverSetupError."""
        if self.wheel_folder and not Path(self.wheel_folder).is_dir():
            raise SolverSetupError(f"the wheel folder '{self.wheel_folder}' does not exist")
        done = 0.0
        for key, label, command in self.steps():
            if key == "kernels":
                report(done, "Checking the solver environment")
                try:
                    check_interpreter(str(self.python), (self.source.on_path,) if self.source.on_path else ())
                except LocalServerError as error:
                    raise SolverSetupError(f"the solver environment is incomplete after installing: {error}") \
                        from None
                done += STEP_WEIGHTS["check"]
            report(done, label)
            self._run_step(key, label, command, lambda text, start=done, key=key: report(
                min(start + STEP_WEIGHTS[key] * 0.9, start + STEP_WEIGHTS[key] * _pip_fraction(text)), text))
            done += STEP_WEIGHTS[key]
        report(1.0, "Local solver ready")
        return self.python

    def cancel(self) -> None:
        """Stop the running step (the environment is left as it is; running set-up again continues it)."""
        self._cancelled.set()
        process = self._process
        if process is not None and process.poll() is None:
            process.terminate()

    def _run_step(self, key: str, label: str, command: list[str], progress: Callable[[str], None]) -> None:
        if self._cancelled.is_set():
            raise SolverSetupError("set-up cancelled")
        environment = dict(os.environ)
        environment.pop("PYTHONHOME", None)       # Blender sets it for its own Python; the venv must not inherit it
        environment["PYTHONNOUSERSITE"] = "1"
        if key == "kernels":
            environment["PYTHONPATH"] = self.source.on_path or str(REPOSITORY_ROOT)
        else:
            environment.pop("PYTHONPATH", None)
        lines: list[str] = []
        try:
            self._process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                             stdin=subprocess.DEVNULL, env=environment, cwd=str(self.environment.parent))
        except OSError as error:
            raise SolverSetupError(f"{label} failed: cannot run {command[0]} ({error})") from None
        timed_out = threading.Event()
        timer = threading.Timer(self.timeout, lambda: (timed_out.set(), self.cancel()))
        timer.start()
        try:
            for line in self._process.stdout:
                line = line.rstrip()
                lines.append(line)
                self.log.append(line)
                activity = _PIP_ACTIVITY.match(line)
                if activity:
                    progress(activity.group(0)[:120])
            code = self._process.wait()
        finally:
            timer.cancel()
            self._process = None
        if timed_out.is_set():
            raise SolverSetupError(f"{label} took longer than {self.timeout:g} s and was stopped")
        if self._cancelled.is_set():
            raise SolverSetupError("set-up cancelled")
        if code != 0:
            raise SolverSetupError(failure_message(key, label, code, lines, bool(self.wheel_folder)))


def _pip_fraction(text: str) -> float:
    """Rough progress inside the install step from pip's latest activity line."""
    if text.startswith("Successfully installed"):
        return 1.0
    if text.startswith("Installing collected packages"):
        return 0.7
    return 0.3


def failure_message(key: str, label: str, code: int, lines: list[str], offline_install: bool) -> str:
    """An artist-readable reason for a failed step from its output (the last lines are kept for support)."""
    tail = "\n".join(lines[-8:])
    if key == "packages" and any(_OFFLINE.search(line) for line in lines):
        if offline_install:
            return ("the wheel folder lacks some of the solver's packages (pip found no matching wheel; "
                    f"it needs wheels for this Python and platform):\n{tail}")
        return ("could not download the solver's packages: this computer seems to be offline or PyPI is "
                "unreachable. Connect to the internet (and allow Blender's Online Access), or set a Wheel "
                f"Folder holding the packages' wheels:\n{tail}")
    if key == "environment":
        return f"{label} failed (exit {code}); Blender's Python could not make a virtual environment:\n{tail}"
    return f"{label} failed (exit {code}):\n{tail}"

"""Set Up Local Solver, Blender-free part (core/solver_setup.py): where the solver and its requirements come
from, the steps, and the messages an artist gets when pip cannot fetch the packages (a real pip run against
an unreachable index and against an empty wheel folder)."""

import os
from pathlib import Path

import pytest

from blender_addon.core.local_server import REPOSITORY_ROOT
from blender_addon.core.solver_setup import (SolverSetup, SolverSetupError, SolverSource, failure_message,
                                             project_requirements, requirements_text, solver_source)


def test_a_packaged_extension_uses_its_own_solver_folder_and_requirements(tmp_path):
    solver = tmp_path / "solver"
    solver.mkdir()
    (solver / "requirements.txt").write_text(requirements_text(REPOSITORY_ROOT / "pyproject.toml"))
    cpu = solver_source(tmp_path)
    assert cpu.folder == solver and cpu.on_path == str(solver)
    assert cpu.requirements == project_requirements(REPOSITORY_ROOT / "pyproject.toml")
    assert any(requirement.startswith("warp-lang") for requirement in cpu.requirements)
    gpu = solver_source(tmp_path, gpu=True)
    assert gpu.requirements[-1].startswith("cupy") and len(gpu.requirements) == len(cpu.requirements) + 1


def test_a_repository_checkout_uses_the_checkout(tmp_path):
    source = solver_source(tmp_path)          # no solver/ folder here: the add-on was loaded from the repository
    assert source.folder == REPOSITORY_ROOT and source.on_path == ""


def test_the_steps_create_install_and_warm(tmp_path):
    setup = SolverSetup(tmp_path / "env", SolverSource(tmp_path, ("numpy>=1.26",), ""), base_python="/py",
                        wheel_folder=str(tmp_path))
    keys = [key for key, _, _ in setup.steps()]
    assert keys == ["environment", "packages", "kernels"]
    install = setup.steps()[1][2]
    assert install[-1] == "numpy>=1.26" and "--no-index" in install and str(tmp_path) in install
    assert setup.steps()[0][2] == ["/py", "-m", "venv", str(tmp_path / "env")]


def test_pip_failures_read_as_offline_or_as_a_short_wheel_folder():
    lines = ["Collecting numpy>=1.26", "WARNING: Retrying ... Failed to establish a new connection: [Errno 111]",
             "ERROR: No matching distribution found for numpy>=1.26"]
    assert "offline" in failure_message("packages", "Installing", 1, lines, offline_install=False)
    assert "wheel folder lacks" in failure_message("packages", "Installing", 1, lines, offline_install=True)
    assert "exit 2" in failure_message("kernels", "Compiling", 2, ["Traceback ..."], offline_install=False)


def _dead_index_environment(monkeypatch):
    """pip sees no package index it can reach (a closed loopback port) and no other source."""
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_TIMEOUT", "2")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)


def test_an_offline_machine_gets_a_clear_message(tmp_path, monkeypatch):
    _dead_index_environment(monkeypatch)
    source = SolverSource(tmp_path, ("tangle-no-such-package-xyz>=1",), "")
    reports = []
    with pytest.raises(SolverSetupError, match="offline or PyPI is unreachable") as error:
        SolverSetup(tmp_path / "env", source).run(lambda fraction, text: reports.append((fraction, text)))
    assert "Wheel Folder" in str(error.value)
    assert (tmp_path / "env" / "bin" / "python").exists() or (tmp_path / "env" / "Scripts").exists()
    assert [text for _, text in reports][:2] == ["Creating the solver environment", "Installing the solver's packages"]
    assert all(0.0 <= fraction <= 1.0 for fraction, _ in reports)


def test_an_empty_or_missing_wheel_folder_is_named(tmp_path, monkeypatch):
    _dead_index_environment(monkeypatch)
    source = SolverSource(tmp_path, ("numpy>=1.26",), "")
    with pytest.raises(SolverSetupError, match="does not exist"):
        SolverSetup(tmp_path / "env", source, wheel_folder=str(tmp_path / "nowhere")).run()
    (tmp_path / "wheels").mkdir()
    with pytest.raises(SolverSetupError, match="wheel folder lacks"):
        SolverSetup(tmp_path / "env", source, wheel_folder=str(tmp_path / "wheels")).run()

"""Every solver has the same shape, so that learning one teaches them all: ``solver.py`` (the class with
``step``), ``state.py`` (its State and Control dataclasses), ``settings.py``, ``group.py`` (``build_group``,
the scene-level factory the registry names) and its Warp kernels in ``kernels.py`` or a ``kernels/`` package.
Read from the code (``ast``), so a solver that grows a different shape fails here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from solver_server import solvers

SOLVERS_DIR = Path(solvers.__file__).resolve().parent
SOLVER_NAMES = ("pd", "der", "cosserat", "particles")


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _classes(tree: ast.Module) -> dict[str, ast.ClassDef]:
    return {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}


def test_the_registry_names_every_solver_by_its_package_build_group():
    for (kind, model), entry in solvers._FACTORIES.items():
        # a string names the factory until its first use replaces it by the function itself
        module, _, function = entry.partition(":") if isinstance(entry, str) else (entry.__module__, "", entry.__name__)
        assert function == "build_group", (kind, model, entry)
        package = module.removeprefix("solver_server.solvers.").removesuffix(".group")
        assert package in SOLVER_NAMES, (kind, model, entry)


@pytest.mark.parametrize("name", SOLVER_NAMES)
def test_solver_folder_has_the_common_files(name):
    folder = SOLVERS_DIR / name
    for file_name in ("__init__.py", "solver.py", "state.py", "settings.py", "group.py"):
        assert (folder / file_name).is_file(), f"solvers/{name}/ has no {file_name}"
    assert (folder / "kernels.py").is_file() or (folder / "kernels" / "__init__.py").is_file(), \
        f"solvers/{name}/ keeps its Warp kernels neither in kernels.py nor in a kernels/ package"
    assert not list(folder.glob("*_kernels.py")), f"solvers/{name}/ has kernel modules outside kernels/"


@pytest.mark.parametrize("name", SOLVER_NAMES)
def test_solver_folder_files_hold_what_their_names_say(name):
    folder = SOLVERS_DIR / name
    group = _tree(folder / "group.py")
    assert any(isinstance(node, ast.FunctionDef) and node.name == "build_group" for node in group.body), \
        f"solvers/{name}/group.py defines no build_group"
    states = _classes(_tree(folder / "state.py"))
    assert any(class_name.endswith("State") for class_name in states), f"solvers/{name}/state.py has no State"
    assert any(class_name.endswith("Control") for class_name in states), f"solvers/{name}/state.py has no Control"
    solver_classes = _classes(_tree(folder / "solver.py"))
    assert any(any(isinstance(item, ast.FunctionDef) and item.name == "step" for item in node.body)
               for node in solver_classes.values()), f"solvers/{name}/solver.py has no class with step()"
    for other in folder.glob("*.py"):
        if other.name in ("state.py", "solver.py"):
            continue
        misplaced = [class_name for class_name in _classes(_tree(other))
                     if class_name.endswith(("State", "Control")) and class_name in states]
        assert not misplaced, f"{misplaced} defined again in solvers/{name}/{other.name}"

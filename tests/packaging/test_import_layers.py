"""The packages import downward only: no import loops, and no module imports one above it. The layers are read
from the code's own imports (``ast``), so a change that closes a loop or reaches back up fails here.

- ``solver_server``: the shared kernel layer (``kernels/``) and the collision layer (``collision/``) import
  nothing from the solvers or from the server modules above them.
- every package: the graph of module imports (``import x``, ``from x import y``, at any depth in a file) has no
  cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("solver_server", "blender_addon", "protocol")
# (lower layer, what it must not import)
LAYERS = (("solver_server.kernels", ("solver_server.solvers", "solver_server.collision", "solver_server.sim",
                                     "solver_server.simulation", "solver_server.server", "solver_server.jobs")),
          ("solver_server.collision", ("solver_server.solvers", "solver_server.simulation", "solver_server.server",
                                       "solver_server.jobs")))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[_module_name(path)] = path
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules that module ``name`` imports (relative imports resolved; ``from package import
    module`` counts the module, else the package)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            bases = [alias.name for alias in node.names]
            names = [None] * len(bases)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            bases = [base] * len(node.names)
            names = [alias.name for alias in node.names]
        else:
            continue
        for base, item in zip(bases, names):
            candidate = f"{base}.{item}" if item else None
            if candidate in known:
                targets.add(candidate)
            elif base in known:
                targets.add(base)
    targets.discard(name)
    return targets


def _graph() -> dict[str, set[str]]:
    known = _modules()
    return {name: _imports(name, path, known) for name, path in known.items()}


def _package_faces(graph: dict[str, set[str]]) -> set[str]:
    """Package ``__init__`` modules: importing a module inside a package runs its face, but the face importing
    its own modules is no loop of the code's own making; faces are left out of the cycle search."""
    return {name for name in graph if (ROOT / name.replace(".", "/") / "__init__.py").is_file()}


def test_no_import_loops():
    graph = _graph()
    faces = _package_faces(graph)
    edges = {name: {target for target in targets if target not in faces} for name, targets in graph.items()
             if name not in faces}
    visiting, done, loops = set(), set(), []

    def visit(name, trail):
        visiting.add(name)
        for target in sorted(edges.get(name, ())):
            if target in visiting:
                loops.append(trail[trail.index(target):] + [target] if target in trail else [name, target])
            elif target not in done:
                visit(target, trail + [target])
        visiting.discard(name)
        done.add(name)

    for name in sorted(edges):
        if name not in done:
            visit(name, [name])
    assert not loops, "import loops: " + "; ".join(" -> ".join(loop) for loop in loops)


@pytest.mark.parametrize("lower, forbidden", LAYERS)
def test_lower_layers_do_not_import_upwards(lower, forbidden):
    graph = _graph()
    upward = sorted((name, target) for name, targets in graph.items()
                    if name == lower or name.startswith(lower + ".")
                    for target in targets if any(target == f or target.startswith(f + ".") for f in forbidden))
    assert not upward, f"{lower} imports upwards: {upward}"

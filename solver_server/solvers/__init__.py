"""Solver registry: scene kind (and hair ``params.model``) -> solver group factory.

A factory has the signature ``factory(specs, backend, scene) -> SolverGroup`` where ``specs``
are all ObjectSpecs of the scene handled by that factory (merged into one system), ``backend``
the compute Backend and ``scene`` the SceneSpec (time, gravity, ``scene.solver`` settings).
The returned object implements ``solvers.registry_types.SolverGroup``.

Adding a solver is one entry in ``_FACTORIES``: either a callable or a lazy
"module:function" string imported on first use (a missing module gives a SceneError naming
the object, so a scene with hair fails clearly until a hair solver is installed).
"""

from __future__ import annotations

import importlib
from typing import Callable

from ..sim.builder import ObjectSpec
from ..sim.errors import SceneError
from .registry_types import ObjectPose, SolverGroup, SubstepInputs

_FACTORIES: dict[tuple[str, str | None], Callable | str] = {
    ("cloth", None): "solver_server.solvers.pd:build_group",
    ("softbody", None): "solver_server.solvers.pd:build_group",
    ("hair", "der"): "solver_server.solvers.der:build_group",
    ("hair", "cosserat"): "solver_server.solvers.cosserat:build_group",
    ("hair", "particles"): "solver_server.solvers.particles:build_group",
}


def register(kind: str, model: str | None, factory: Callable | str) -> None:
    """Register (or replace) the factory for ``kind`` (and hair ``model``)."""
    _FACTORIES[(kind, model)] = factory


def _key(spec: ObjectSpec) -> tuple[str, str | None]:
    return (spec.kind, spec.params.get("model") if spec.kind == "hair" else None)


def factory_for(spec: ObjectSpec) -> Callable:
    """The factory for one object; SceneError when none is registered or importable."""
    key = _key(spec)
    entry = _FACTORIES.get(key)
    label = f"{key[0]} model {key[1]!r}" if key[1] else f"kind {key[0]!r}"
    if entry is None:
        raise SceneError(f"no solver is registered for {label}", object=spec.id)
    if isinstance(entry, str):
        module_name, _, attribute = entry.partition(":")
        try:
            module = importlib.import_module(module_name)
            entry = getattr(module, attribute)
        except (ImportError, AttributeError) as exc:
            raise SceneError(f"the solver for {label} is not available in this server build ({exc})",
                             object=spec.id) from exc
        _FACTORIES[key] = entry
    return entry


def build_groups(scene, backend) -> list[SolverGroup]:
    """One SolverGroup per distinct factory, each over all objects it handles (scene order)."""
    grouped: dict[int, tuple[Callable, list[ObjectSpec]]] = {}
    for spec in scene.objects:
        if spec.kind == "collider":
            continue
        factory = factory_for(spec)
        grouped.setdefault(id(factory), (factory, []))[1].append(spec)
    return [factory(specs, backend, scene) for factory, specs in grouped.values()]


__all__ = ["ObjectPose", "SolverGroup", "SubstepInputs", "build_groups", "factory_for", "register"]

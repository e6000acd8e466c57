"""Registry entry for hair with ``params.model == "cosserat"``: one CosseratSolver per object."""

from __future__ import annotations

import numpy as np

from ..guides.strand_object import StrandObject
from ..particles.colliders import SceneColliders
from ..registry_types import SubstepInputs
from . import quaternion as quat
from .settings import CosseratSettings
from .solver import CosseratControl, CosseratSolver


class CosseratHairGroup:
    """All Cosserat-model hair objects of a scene (each stepped by its own solver)."""

    def __init__(self, specs, backend, scene):
        self.backend = backend
        self.ids = [spec.id for spec in specs]
        self.objects, self.solvers, self.states = [], [], []
        self.poses: dict = {}
        for spec in specs:
            strands = StrandObject.from_spec(spec, scene, "cosserat")
            settings = CosseratSettings.from_params(strands.params, spec.id)
            rest, layout = strands.simulated
            solver = CosseratSolver(rest, layout, settings, scene.gravity, backend.xp)
            self.objects.append(strands)
            self.solvers.append(solver)
            self.states.append(solver.initial_state())

    def step(self, inputs: SubstepInputs) -> dict:
        xp = self.backend.xp
        self.poses = inputs.poses
        totals = {"iterations": 0, "contacts": 0}
        for strands, solver, state in zip(self.objects, self.solvers, self.states):
            roots, rotations = strands.simulated_root_frames(inputs.poses)
            quaternions = quat.from_matrices(rotations)
            colliders = SceneColliders(inputs.colliders, solver.settings.collider_friction) \
                if inputs.colliders is not None and len(inputs.colliders) else None
            control = CosseratControl(xp.asarray(roots), xp.asarray(quaternions), colliders)
            stats = solver.step(state, state, control, None, inputs.dt)
            totals["iterations"] += stats["substeps"]
            totals["contacts"] += stats["contacts"]
        return totals

    def positions(self) -> dict[str, np.ndarray]:
        xp = self.backend.xp
        return {strands.id: self.backend.to_host(strands.output(solver.positions(state), self.poses, xp))
                .astype(np.float32) for strands, solver, state in zip(self.objects, self.solvers, self.states)}

    def first_non_finite(self) -> str | None:
        xp = self.backend.xp
        for strands, state in zip(self.objects, self.states):
            if not bool(xp.all(xp.isfinite(state.orientations))):
                return strands.id
        return None


def build_group(specs, backend, scene) -> CosseratHairGroup:
    """Registry factory (solver_server.solvers registry, ``("hair", "cosserat")``)."""
    return CosseratHairGroup(specs, backend, scene)

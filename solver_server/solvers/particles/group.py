"""Registry entry for hair with ``params.model == "particles"``: one ParticleHairSolver per object."""

from __future__ import annotations

import numpy as np

from ..guides.strand_object import StrandObject
from ..registry_types import SubstepInputs
from .colliders import SceneColliders
from .settings import ParticleHairSettings
from .solver import ParticleHairSolver, StrandControl


class ParticleHairGroup:
    """All particle-model hair objects of a scene (each stepped by its own solver)."""

    def __init__(self, specs, backend, scene):
        self.backend = backend
        self.ids = [spec.id for spec in specs]
        self.objects, self.solvers, self.states = [], [], []
        self.poses: dict = {}
        for spec in specs:
            strands = StrandObject.from_spec(spec, scene, "particles")
            settings = ParticleHairSettings.from_params({**strands.params, "particle_pinned_points": strands.pinned},
                                                        spec.id)
            rest, layout = strands.simulated
            solver = ParticleHairSolver(rest, layout, settings, scene.gravity, backend.xp)
            self.objects.append(strands)
            self.solvers.append(solver)
            self.states.append(solver.initial_state())

    def step(self, inputs: SubstepInputs) -> dict:
        xp = self.backend.xp
        self.poses = inputs.poses
        totals = {"iterations": 0, "contacts": 0, "teleported_strands": 0}
        for strands, solver, state in zip(self.objects, self.solvers, self.states):
            colliders = SceneColliders(inputs.colliders, solver.settings.collider_friction) \
                if inputs.colliders is not None and len(inputs.colliders) else None
            control = StrandControl(xp.asarray(strands.root_targets(inputs.poses)), colliders)
            stats = solver.step(state, state, control, None, inputs.dt)
            totals["iterations"] += stats["substeps"]
            totals["contacts"] += stats["contacts"]
            totals["teleported_strands"] += stats["teleported_strands"]
        return totals

    def positions(self) -> dict[str, np.ndarray]:
        xp = self.backend.xp
        return {strands.id: self.backend.to_host(strands.output(state.positions, self.poses, xp)).astype(np.float32)
                for strands, state in zip(self.objects, self.states)}

    def first_non_finite(self) -> str | None:
        xp = self.backend.xp
        for strands, state in zip(self.objects, self.states):
            if not bool(xp.all(xp.isfinite(state.positions))):
                return strands.id
        return None


def build_group(specs, backend, scene) -> ParticleHairGroup:
    """Registry factory (solver_server.solvers registry, ``("hair", "particles")``)."""
    return ParticleHairGroup(specs, backend, scene)

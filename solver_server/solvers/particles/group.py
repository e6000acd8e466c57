"""Registry entry for hair with ``params.model == "particles"``: one ParticleHairSolver per object."""

from __future__ import annotations

import numpy as np

from ..guides.strand_object import StrandObject
from ..registry_types import SubstepInputs, checked_state_array
from .colliders import SceneColliders
from .settings import ParticleHairSettings
from .solver import ParticleHairSolver, ParticleState, StrandControl


class ParticleHairGroup:
    """All particle-model hair objects of a scene (each stepped by its own solver)."""

    def __init__(self, specs, backend, scene):
        self.backend = backend
        self.ids = [spec.id for spec in specs]
        self.objects, self.solvers, self.states = [], [], []
        self.poses: dict = {}
        for spec in specs:
            strands = StrandObject.from_spec(spec, scene, "particles", backend.xp)
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

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Checkpoint state per object i: ``object<i>_positions``, ``_velocities`` (S, P, 3) [m], [m/s],
        ``_rigidity`` (S,) (teleport recovery) and ``_time`` [s] (drives the wind)."""
        to_host = self.backend.to_host
        arrays = {}
        for index, state in enumerate(self.states):
            arrays[f"object{index}_positions"] = np.array(to_host(state.positions), np.float64)
            arrays[f"object{index}_velocities"] = np.array(to_host(state.velocities), np.float64)
            arrays[f"object{index}_rigidity"] = np.array(to_host(state.rigidity), np.float64)
            arrays[f"object{index}_time"] = np.array(state.time, np.float64)
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        xp = self.backend.xp
        loaded = []
        for index, (strands, state) in enumerate(zip(self.objects, self.states)):
            def take(name, shape):
                return checked_state_array(arrays, f"object{index}_{name}", shape, np.float64, strands.id)
            loaded.append(ParticleState(xp.asarray(take("positions", state.positions.shape)),
                                        xp.asarray(take("velocities", state.velocities.shape)),
                                        xp.asarray(take("rigidity", state.rigidity.shape)),
                                        float(take("time", ()))))
        self.states = loaded

    def first_non_finite(self) -> str | None:
        xp = self.backend.xp
        for strands, state in zip(self.objects, self.states):
            if not bool(xp.all(xp.isfinite(state.positions))):
                return strands.id
        return None


def build_group(specs, backend, scene) -> ParticleHairGroup:
    """Registry factory (solver_server.solvers registry, ``("hair", "particles")``)."""
    return ParticleHairGroup(specs, backend, scene)

"""Registry entry for hair with ``params.model == "cosserat"``: one CosseratSolver per object."""

from __future__ import annotations

import numpy as np

from ..guides.strand_object import StrandObject
from ..particles.colliders import SceneColliders
from ..registry_types import SubstepInputs, checked_state_array
from . import quaternion as quat
from .settings import CosseratSettings
from .solver import CosseratControl, CosseratSolver, CosseratState


class CosseratHairGroup:
    """All Cosserat-model hair objects of a scene (each stepped by its own solver)."""

    def __init__(self, specs, backend, scene):
        self.backend = backend
        self.ids = [spec.id for spec in specs]
        self.objects, self.solvers, self.states = [], [], []
        self.poses: dict = {}
        for spec in specs:
            strands = StrandObject.from_spec(spec, scene, "cosserat", backend.xp)
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

    _STATE_FIELDS = ("orientations", "joint_velocities", "root_positions", "root_rotations", "root_velocities",
                     "root_angular_velocities")

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Checkpoint state per object i: ``object<i>_<field>`` for every CosseratState array, ``_time`` [s],
        and the strand-interaction candidate cache (``_pairs`` (n, 2), ``_anchor`` (S, P, 3) [m]; empty
        when not built yet) so the restored run sums the same pairs in the same order."""
        to_host = self.backend.to_host
        arrays = {}
        for index, (solver, state) in enumerate(zip(self.solvers, self.states)):
            for name in self._STATE_FIELDS:
                arrays[f"object{index}_{name}"] = np.array(to_host(getattr(state, name)), np.float64)
            arrays[f"object{index}_time"] = np.array(state.time, np.float64)
            cache = solver.interaction
            if cache is not None and cache._pairs is not None:
                arrays[f"object{index}_pairs"] = np.array(cache._pairs, np.int64).reshape(-1, 2)
                arrays[f"object{index}_anchor"] = np.array(cache._anchor, np.float64)
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        xp = self.backend.xp
        loaded = []
        for index, (strands, solver, state) in enumerate(zip(self.objects, self.solvers, self.states)):
            def take(name, shape, dtype=np.float64):
                return checked_state_array(arrays, f"object{index}_{name}", shape, dtype, strands.id)
            fields = {name: xp.asarray(take(name, getattr(state, name).shape)) for name in self._STATE_FIELDS}
            cache = None
            if solver.interaction is not None and f"object{index}_pairs" in arrays:
                anchor_shape = solver.positions(state).shape
                cache = (take("pairs", (None, 2), np.int64), take("anchor", tuple(anchor_shape)))
            loaded.append((CosseratState(**fields, time=float(take("time", ()))), cache))
        self.states = [state for state, _ in loaded]
        for solver, (_, cache) in zip(self.solvers, loaded):
            if solver.interaction is not None:
                solver.interaction._pairs, solver.interaction._anchor = cache if cache is not None else (None, None)

    def first_non_finite(self) -> str | None:
        xp = self.backend.xp
        for strands, state in zip(self.objects, self.states):
            if not bool(xp.all(xp.isfinite(state.orientations))):
                return strands.id
        return None


def build_group(specs, backend, scene) -> CosseratHairGroup:
    """Registry factory (solver_server.solvers registry, ``("hair", "cosserat")``)."""
    return CosseratHairGroup(specs, backend, scene)

"""Shared registry-group logic of the fast strand models (``hair`` with model "particles" or "cosserat"):
one solver per hair object, scene colliders per substep, float32 output, checkpoint arrays and the
non-finite check. A model subclasses StrandGroup and fills in the hooks below."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace

import numpy as np

from .guides.drawing import checked_drawing, drawing_arrays
from .guides.strand_object import StrandObject
from .strand_colliders import SceneColliders
from .registry_types import SubstepInputs, checked_state_array


class StrandGroup(ABC):
    """All hair objects of one fast model in a scene (each stepped by its own solver).

    Hooks: ``model`` (params.model value), ``STATE_FIELDS`` (array fields of the solver state that a
    checkpoint carries as ``object<i>_<field>`` float64, plus ``object<i>_time``), ``STAT_KEYS`` (summed
    step statistics; ``substeps`` is reported as ``iterations``), ``make_solver``, ``control``,
    ``output_positions``, ``finite_field``; optionally ``extra_state_arrays`` and
    ``checked_extra_state`` / ``apply_extra_state`` (validated before anything changes, applied after)."""

    model: str = ""
    STATE_FIELDS: tuple[str, ...] = ()
    STAT_KEYS: tuple[str, ...] = ("contacts",)
    finite_field: str = "positions"

    def __init__(self, specs, backend, scene):
        self.backend = backend
        self.ids = [spec.id for spec in specs]
        self.objects, self.solvers, self.states = [], [], []
        self.poses: dict = {}
        self.colliders = None   # the scene's collision.ColliderSet as posed by the latest substep
        for spec in specs:
            strands = StrandObject.from_spec(spec, scene, self.model, backend.xp)
            solver = self.make_solver(strands, spec.id, scene, backend.xp)
            self.objects.append(strands)
            self.solvers.append(solver)
            self.states.append(solver.initial_state())
        # per object, its drawing at the last frame (guides.drawing.DrawnStrands) where children are interpolated
        # (their laying out of the colliders carries over from it: StrandObject.draw), else None; checkpointed
        self.drawn = [None] * len(self.objects)

    # ----------------------------------------------------------------- hooks
    @abstractmethod
    def make_solver(self, strands: StrandObject, object_id: str, scene, xp):
        """The object's solver (its ``settings.collider_friction`` is used for the scene colliders)."""

    @abstractmethod
    def control(self, strands: StrandObject, solver, inputs: SubstepInputs, colliders):
        """The solver's control for one substep (root targets from ``inputs.poses``, colliders or None)."""

    @abstractmethod
    def output_positions(self, solver, state):
        """(S, P, 3) simulated positions [m] (device array) of the solver's state."""

    def extra_state_arrays(self, index: int, solver, state) -> dict[str, np.ndarray]:
        """Model-specific checkpoint arrays of object ``index`` (none by default)."""
        return {}

    def checked_extra_state(self, index: int, strands: StrandObject, solver, state, arrays):
        """Validated model-specific checkpoint data of object ``index`` (none by default)."""
        return None

    def apply_extra_state(self, solver, value) -> None:
        """Install what ``checked_extra_state`` returned (nothing by default)."""

    # ----------------------------------------------------------------- registry group interface
    def step(self, inputs: SubstepInputs) -> dict:
        self.poses = inputs.poses
        first = self.colliders is None
        self.colliders = inputs.colliders
        totals = {"iterations": 0, **{key: 0 for key in self.STAT_KEYS}}
        if first and inputs.colliders is not None and len(inputs.colliders):
            started = sum(self._started_inside(strands, solver, state, inputs.colliders)
                          for strands, solver, state in zip(self.objects, self.solvers, self.states))
            if started:
                totals["started_inside"] = started
        for strands, solver, state in zip(self.objects, self.solvers, self.states):
            colliders = SceneColliders(inputs.colliders, solver.settings.collider_friction) \
                if inputs.colliders is not None and len(inputs.colliders) else None
            stats = solver.step(state, state, self.control(strands, solver, inputs, colliders), None, inputs.dt)
            totals["iterations"] += stats["substeps"]
            for key in self.STAT_KEYS:
                totals[key] += stats.get(key, 0)
        return totals

    def _started_inside(self, strands: StrandObject, solver, state, colliders) -> int:
        """Free simulated points that start the job inside a collider's solid (a groom through the ground or a
        body): counted in the first substep's stats, where contact then brings out what their strands can."""
        xp = self.backend.xp
        points = self.output_positions(solver, state)
        _, layout = strands.simulated
        free = np.array(layout.valid, dtype=bool)
        free[:, :strands.pinned] = False
        inside = colliders.inside(xp, xp.ascontiguousarray(points.reshape(-1, 3), dtype=xp.float64))
        return int(xp.count_nonzero(inside & xp.asarray(free.reshape(-1))))

    def finish_frame(self) -> dict:
        """Nothing is left on the device to check: the group's stats are read with the frame's."""
        return {}

    def positions(self) -> dict[str, np.ndarray]:
        """Every strand's points (N, 3) float32 [m]; interpolated children kept out of the mesh colliders."""
        xp = self.backend.xp
        drawn = {}
        for index, (strands, solver, state) in enumerate(zip(self.objects, self.solvers, self.states)):
            simulated = self.output_positions(solver, state)
            drawing = strands.draw(simulated, self.poses, xp, self.colliders, solver.settings.radius,
                                   self.drawn[index])
            if strands.interpolator is not None:
                self.drawn[index] = drawing
            drawn[strands.id] = self.backend.to_host(strands.layout.unpad(drawing.points, xp)).astype(np.float32)
        return drawn

    def device_positions(self) -> list:
        return [(strands.id, self.output_positions(solver, state))
                for strands, solver, state in zip(self.objects, self.solvers, self.states)]

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Checkpoint state per object i: ``object<i>_<field>`` for every STATE_FIELDS array (float64)
        and ``object<i>_time`` [s], plus the model's extra arrays."""
        to_host = self.backend.to_host
        arrays = {}
        for index, (solver, state) in enumerate(zip(self.solvers, self.states)):
            for name in self.STATE_FIELDS:
                arrays[f"object{index}_{name}"] = np.array(to_host(getattr(state, name)), np.float64)
            arrays[f"object{index}_time"] = np.array(state.time, np.float64)
            if self.drawn[index] is not None:
                arrays.update(drawing_arrays(f"object{index}", self.drawn[index], to_host))
            arrays.update(self.extra_state_arrays(index, solver, state))
        return arrays

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Restore from ``state_arrays`` output; every array is checked (name, shape, dtype) first, and
        the group changes only when all of them are valid."""
        xp = self.backend.xp
        loaded = []
        for index, (strands, state) in enumerate(zip(self.objects, self.states)):
            fields = {name: xp.asarray(checked_state_array(arrays, f"object{index}_{name}", getattr(state, name).shape,
                                                           np.float64, strands.id))
                      for name in self.STATE_FIELDS}
            time = float(checked_state_array(arrays, f"object{index}_time", (), np.float64, strands.id))
            restored = replace(state, **fields, time=time)
            drawn = None if strands.interpolator is None else \
                checked_drawing(arrays, f"object{index}", strands.rest.shape, strands.id, xp)
            loaded.append((restored, self.checked_extra_state(index, strands, self.solvers[index], restored, arrays),
                           drawn))
        self.states = [state for state, _, _ in loaded]
        self.drawn = [drawn for _, _, drawn in loaded]
        for solver, (_, extra, _) in zip(self.solvers, loaded):
            self.apply_extra_state(solver, extra)

    def first_non_finite(self) -> str | None:
        xp = self.backend.xp
        for strands, state in zip(self.objects, self.states):
            if not bool(xp.all(xp.isfinite(getattr(state, self.finite_field)))):
                return strands.id
        return None

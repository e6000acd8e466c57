"""Registry entry for cloth + soft bodies: merges the objects into one PD system."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ...collision.self_collision import SurfaceContact
from ...sim.errors import SceneError
from ...sim.rigid_carry import carry_points
from .state import PDControl, PDState
from ..registry_types import SubstepInputs, checked_state_array
from .assemble import build_particle_model
from .settings import resolve_pd_settings
from .solver import PDSolver


class PDGroup:
    """All cloth and soft-body objects of a scene, stepped by one PDSolver."""

    def __init__(self, specs, backend, scene):
        self.backend = backend
        self.ids = [spec.id for spec in specs]
        self.settings = resolve_pd_settings(scene.solver.get("pd"))
        self._specs, self._scene = list(specs), scene
        # timed unpin: object id -> the frame from which its pins let go (the param ``unpin_frame``, 0: never)
        self.unpin_frames = {spec.id: int(spec.params.get("unpin_frame", 0)) for spec in specs
                             if int(spec.params.get("unpin_frame", 0)) > 0}
        self.released: set[str] = set()
        self._eased = None          # (N, 3) [m] where each pulled pin is now (pin_pull_speed; rows of pins)
        self._build()
        xp = backend.xp
        self.state = PDState(positions=xp.asarray(self.model.rest.copy()),
                             velocities=xp.zeros((self.model.particle_count, 3)))

    def _build(self) -> None:
        """Model, solver and pin tables of the objects, without the pins of the ``released`` ones. The pins are
        eliminated from the factorized system, so letting them go builds the solver again (once per release;
        the particles and their order stay)."""
        specs = [replace(spec, pin_indices=spec.pin_indices[:0], pin_weights=spec.pin_weights[:0])
                 if spec.id in self.released else spec for spec in self._specs]
        scene = self._scene
        before = getattr(self, "solver", None)
        self.model = build_particle_model(specs)
        dt = scene.time.frame_dt / scene.time.substeps
        self.solver = PDSolver(self.model, self.backend, self.settings, dt, scene.gravity)
        if before is not None:          # what the solver keeps across steps (its checkpoint state) carries over
            self.solver.started = before.started
            if before.fell_back:
                self.solver.fell_back = True
                self.solver.global_solver = self.solver.cholesky
        if SurfaceContact.wanted(self.model):
            self.solver.self_collision = SurfaceContact(self.model, self.solver.contact,
                                                        iterations=self.settings["self_collision_iterations"],
                                                        gravity=scene.gravity)
        self._pin_rest = self.model.rest[self.model.pin_indices]
        self._pin_local = self.model.pin_indices - np.array([self.model.slots[s].start for s in self.model.pin_slot],
                                                            dtype=np.int64)
        self._pinned_slots = sorted(set(self.model.pin_slot.tolist()))
        # [m/s] per pin: the fastest a pin follows its target (0: at once; pin_pull_speed)
        self._pull_speed = np.array([float(self.model.params[s].get("pin_pull_speed", 0.0))
                                     for s in self.model.pin_slot], np.float64)

    def _pulled(self, targets: np.ndarray, dt: float) -> np.ndarray:
        """The pins' targets (P, 3) [m] for this substep with ``pin_pull_speed``: a pin moves towards its target
        by at most that speed × dt [s] (a target that jumped is pulled in over the frames that takes; motion
        slower than that is followed exactly). The pulled positions are kept per particle (checkpointed)."""
        if not np.any(self._pull_speed > 0.0):
            return targets
        indices = self.model.pin_indices
        if self._eased is None:      # the pins start where their particles are
            self._eased = np.array(self.backend.to_host(self.state.positions), np.float64)
        previous = self._eased[indices]
        step = targets - previous
        distance = np.linalg.norm(step, axis=1)
        reach = self._pull_speed * dt
        slowed = (self._pull_speed > 0.0) & (distance > reach)
        pulled = np.where(slowed[:, None], previous + step * (reach / np.maximum(distance, 1e-300))[:, None],
                          targets)
        self._eased[indices] = pulled
        return pulled

    def _release_due(self, frame: int) -> None:
        """Let go of the pins of every object whose ``unpin_frame`` has come (the frame being computed)."""
        due = {object_id for object_id, first in self.unpin_frames.items() if frame >= first} - self.released
        if due:
            self.released |= due
            self._build()

    def pin_targets(self, poses) -> np.ndarray:
        """(P, 3) world targets of the pinned particles for the given poses."""
        targets = self._pin_rest.copy()
        for slot_index in self._pinned_slots:
            slot = self.model.slots[slot_index]
            pose = poses.get(slot.id)
            if pose is None:
                continue
            rows = self.model.pin_slot == slot_index
            if pose.vertices is not None and slot.embedding is None:
                targets[rows] = pose.vertices[self._pin_local[rows]]
            else:
                targets[rows] = carry_points(self._pin_rest[rows], pose.matrix, slot.matrix_rest)
        return targets

    def object_pin_targets(self, object_id: str, poses) -> np.ndarray:
        """(k, 3) world targets [m] of object ``object_id``'s pinned particles for the given poses."""
        slot = next(index for index, slot in enumerate(self.model.slots) if slot.id == object_id)
        return self.pin_targets(poses)[self.model.pin_slot == slot]

    def step(self, inputs: SubstepInputs) -> dict:
        self._release_due(inputs.frame)
        targets = self._pulled(self.pin_targets(inputs.poses), inputs.dt)
        control = PDControl(pin_targets=self.backend.xp.asarray(targets),
                            colliders=inputs.colliders, time=inputs.time)
        out = PDState(self.state.positions, self.state.velocities)
        stats = self.solver.step(self.state, out, control, None, inputs.dt)
        self.state = out
        return stats

    def finish_frame(self) -> dict:
        """The PD solver's deferred checks (its iterative global step's divergence) and the cloth edges stretched
        beyond their limit at the frame's end (``PDSolver.overstretch``)."""
        return {**self.solver.finish_frame(), **self.solver.overstretch(self.state.positions)}

    def positions(self) -> dict[str, np.ndarray]:
        host = self.backend.to_host(self.state.positions)
        result = {}
        for slot in self.model.slots:
            if slot.embedding is not None:
                result[slot.id] = np.asarray(slot.embedding @ host, dtype=np.float32)
            else:
                result[slot.id] = host[slot.start:slot.stop].astype(np.float32)
        return result

    def state_arrays(self) -> dict[str, np.ndarray]:
        """Checkpoint state: positions, velocities (N, 3) [m], [m/s] of all merged particles,
        global_fallback (bool: the iterative global step fell back to Cholesky) and started (bool: the
        first substep, which moves points out of closed collider shells, has run)."""
        to_host = self.backend.to_host
        return {"positions": np.array(to_host(self.state.positions), np.float64),
                "velocities": np.array(to_host(self.state.velocities), np.float64),
                "global_fallback": np.array(self.solver.fell_back),
                "started": np.array(self.solver.started),
                "released": np.array([object_id in self.released for object_id in self.ids]),
                **({} if self._eased is None else {"pin_pulled": self._eased.copy()})}

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        shape = (self.model.particle_count, 3)
        positions = checked_state_array(arrays, "positions", shape, np.float64, self.ids[0])
        velocities = checked_state_array(arrays, "velocities", shape, np.float64, self.ids[0])
        fell_back = bool(checked_state_array(arrays, "global_fallback", (), bool, self.ids[0]))
        # the objects whose timed unpin had come (absent in checkpoints written before it existed: none)
        released = checked_state_array(arrays, "released", (len(self.ids),), bool, self.ids[0]) \
            if "released" in arrays else np.zeros(len(self.ids), bool)
        pulled = checked_state_array(arrays, "pin_pulled", shape, np.float64, self.ids[0]) \
            if "pin_pulled" in arrays else None
        # checkpoints written before "started" was kept come from frames after the first substep
        started = bool(checked_state_array(arrays, "started", (), bool, self.ids[0])) if "started" in arrays else True
        xp = self.backend.xp
        released_ids = {object_id for object_id, gone in zip(self.ids, released) if gone}
        if released_ids != self.released:
            self.released = released_ids
            self._build()
        self.state = PDState(positions=xp.asarray(positions), velocities=xp.asarray(velocities))
        self._eased = None if pulled is None else np.array(pulled)
        self.solver.started = started
        if fell_back:
            self.solver.fell_back = True
            self.solver.global_solver = self.solver.cholesky

    def device_positions(self) -> list:
        positions = self.state.positions
        return [(slot.id, positions[slot.start:slot.stop]) for slot in self.model.slots]

    def first_non_finite(self) -> str | None:
        xp = self.backend.xp
        finite_rows = xp.isfinite(self.state.positions).all(axis=1) & xp.isfinite(self.state.velocities).all(axis=1)
        if bool(finite_rows.all()):
            return None
        finite = self.backend.to_host(finite_rows)
        bad = int(np.argmin(finite))
        for slot in self.model.slots:
            if slot.start <= bad < slot.stop:
                return slot.id
        return self.ids[0]


def build_group(specs, backend, scene) -> PDGroup:
    """Registry factory for kinds 'cloth' and 'softbody'."""
    if not specs:
        raise SceneError("no cloth or soft-body objects given to the PD solver")
    return PDGroup(specs, backend, scene)

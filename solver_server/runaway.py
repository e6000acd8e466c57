"""Runaway guard: a simulated object moving far faster than anything in the scene can make it move
stops the job with a clear error naming the object and the frame, instead of baking an
explosion or a body flung to −660 m. Checked after every substep; the frames before are kept.

What the scene can produce: gravity over the time simulated so far (|g| t), plus the fastest kinematic
motion so far (animated colliders, pinned or rooted objects: the largest displacement of their points
over a substep / dt; for primitives, the translation plus the rotation over the scene's extent). An
object is a runaway when one of its points moved faster than RUNAWAY_FACTOR × max(RUNAWAY_FLOOR, that
bound). Teleported colliders (collision.colliders.TELEPORT_SPEED) and the substeps they teleport in are
left out: a teleport is a cut, and the points it encloses are moved out on purpose.
"""

from __future__ import annotations

import numpy as np

from .sim.errors import SimulationError
from .sim.rigid_carry import carry_points

RUNAWAY_FACTOR = 5.0    # allowed speed over the scene's bound
RUNAWAY_FLOOR = 10.0    # [m/s] the bound never goes below this (a still scene with light cloth in wind)


class RunawayGuard:
    """specs: the scene's ObjectSpecs; gravity (3,) [m/s²]; dt: substep [s]."""

    def __init__(self, specs, gravity, dt: float):
        self.specs = {spec.id: spec for spec in specs}
        self.gravity = float(np.linalg.norm(gravity))
        self.dt = float(dt)
        self.elapsed = 0.0
        self.kinematic = 0.0            # fastest kinematic speed so far [m/s]
        self.previous: dict[str, object] = {}
        points = [np.asarray(p, float).reshape(-1, 3) for spec in specs
                  for p in (getattr(spec, "vertices", None), getattr(spec, "points", None)) if p is not None]
        stacked = np.concatenate(points) if points else np.zeros((1, 3))
        self.extent = float(max(np.linalg.norm(stacked.max(axis=0) - stacked.min(axis=0)), 1.0))

    def limit(self) -> float:
        """The speed [m/s] above which a point is a runaway."""
        return RUNAWAY_FACTOR * max(RUNAWAY_FLOOR, self.gravity * self.elapsed + self.kinematic)

    def _pose_points(self, object_id, pose):
        spec = self.specs[object_id]
        if pose.vertices is not None:
            return np.asarray(pose.vertices, float)
        rest = getattr(spec, "vertices", None)
        if rest is None:
            rest = getattr(spec, "points", None)
        if rest is None:
            return None
        return carry_points(np.asarray(rest, float), pose.matrix, spec.matrix_world)

    def note_kinematics(self, before: dict, after: dict, teleported) -> None:
        """before/after: id -> ObjectPose of the animated objects at the start and end of the substep."""
        for object_id, end in after.items():
            if object_id in teleported or object_id not in before:
                continue
            start = before[object_id]
            first, second = self._pose_points(object_id, start), self._pose_points(object_id, end)
            if first is not None and second is not None and first.shape == second.shape and len(first):
                step = float(np.sqrt(((second - first) ** 2).sum(axis=1)).max())
            else:
                change = np.asarray(end.matrix, float) - np.asarray(start.matrix, float)
                step = float(np.linalg.norm(change[:3, 3]) + np.linalg.norm(change[:3, :3], 2) * self.extent)
            self.kinematic = max(self.kinematic, step / self.dt)

    def check(self, groups, xp, frame: int, skip: bool, cause=None) -> None:
        """After a substep: raise SimulationError if an object's points moved faster than ``limit()``
        (``skip``: a teleport substep; only remember the positions). ``cause``: optional callable
        object id -> a sentence naming what drove that object through something (or None)."""
        self.elapsed += self.dt
        limit = self.limit()
        for group in groups:
            for object_id, positions in group.device_positions():
                before = self.previous.get(object_id)
                if before is not None and not skip and before.shape == positions.shape and positions.shape[0]:
                    moved = positions - before
                    speed = float(xp.sqrt((moved * moved).sum(axis=-1)).max()) / self.dt
                    if speed > limit:
                        found = None if cause is None else cause(object_id)
                        likely = found if found is not None else (
                            "stiffness too high for the substep count (raise time.substeps), or a collider or "
                            "pin forcing the object through itself")
                        raise SimulationError(
                            f"runaway: a point moved at {speed:.3g} m/s in one substep, far beyond what this scene "
                            f"can produce ({limit:.3g} m/s from gravity and the fastest animated object): the "
                            f"simulation blew up; likely cause: {likely}", object=object_id, frame=frame)
                self.previous[object_id] = positions.copy()

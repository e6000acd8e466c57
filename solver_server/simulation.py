"""Simulation: a validated scene -> solver groups + colliders; advances frame by frame.

Contract (docs/ARCHITECTURE.md §3): ``Simulation(scene, backend)``, ``frame_start``,
``frame_end``, ``animated_ids``, ``initial_frame()``, ``advance(drive)`` -> (frame,
{id: float32 (N, 3)}, stats). Drive data of animated objects is interpolated linearly across
the substeps of a frame (matrices entry-wise, vertices per vertex).
"""

from __future__ import annotations

import time

import numpy as np

from .collision import ColliderSet
from .runaway import RunawayGuard
from .sim.builder import SceneSpec, parse_scene
from .sim.errors import SceneError, SimulationError
from .sim.rigid_carry import carry_points
from .solvers import ObjectPose, SubstepInputs, build_groups
from .solvers.registry_types import checked_state_array

FrameOutput = tuple  # (frame: int, positions: dict[str, np.ndarray], stats: dict)


class Simulation:
    """Runs one submitted scene. Raises SceneError on construction, SimulationError in advance()."""

    def __init__(self, scene: dict, backend):
        self.backend = backend
        self.scene: SceneSpec = parse_scene(scene)
        time_spec = self.scene.time
        self.frame_start = time_spec.frame_start
        self.frame_end = time_spec.frame_end
        self.substeps = time_spec.substeps
        self.dt = time_spec.frame_dt / time_spec.substeps
        self.frame = self.frame_start
        self.preroll = time_spec.preroll
        self._prerolled = 0   # frames of the pre-roll run so far
        self.animated_ids = [spec.id for spec in self.scene.objects if spec.animated]
        self._specs = {spec.id: spec for spec in self.scene.objects}
        self.colliders = ColliderSet([spec for spec in self.scene.objects if spec.kind == "collider"])
        self.groups = build_groups(self.scene, backend)
        self._poses = {spec.id: ObjectPose(spec.matrix_world, None) for spec in self.scene.objects}
        self.runaway = RunawayGuard(self.scene.objects, self.scene.gravity, self.dt)

    # ------------------------------------------------------------------ drive handling
    def _next_poses(self, drive: dict | None, frame: int) -> dict[str, ObjectPose]:
        drive = drive or {}
        if not isinstance(drive, dict):
            raise SimulationError("drive objects must be a map id -> {matrix_world, vertices?}", frame=frame)
        poses = dict(self._poses)
        for object_id in self.animated_ids:
            entry = drive.get(object_id)
            if entry is None:
                raise SimulationError("animated object has no drive data for this frame "
                                      "(the client must send a drive message for every frame)",
                                      object=object_id, frame=frame)
            poses[object_id] = self._parse_drive_entry(object_id, entry, frame)
        return poses

    def _parse_drive_entry(self, object_id: str, entry, frame: int) -> ObjectPose:
        spec = self._specs[object_id]
        if not isinstance(entry, dict):
            raise SimulationError("drive entry must be a map {matrix_world, vertices?}", object=object_id, frame=frame)
        matrix = self._poses[object_id].matrix
        if entry.get("matrix_world") is not None:
            matrix = np.asarray(entry["matrix_world"], dtype=np.float64)
            if matrix.shape != (4, 4) or not np.all(np.isfinite(matrix)):
                raise SimulationError(f"drive matrix_world must be a finite 4×4 matrix, got shape {matrix.shape}",
                                      object=object_id, frame=frame)
        vertices = None
        if entry.get("vertices") is not None:
            vertices = np.asarray(entry["vertices"], dtype=np.float64)
            expected = None if spec.vertices is None else spec.vertices.shape
            if expected is None or vertices.shape != expected:
                raise SimulationError(f"drive vertices must have shape {expected}, got {vertices.shape}",
                                      object=object_id, frame=frame)
            if not np.all(np.isfinite(vertices)):
                raise SimulationError("drive vertices contain NaN or Inf", object=object_id, frame=frame)
        return ObjectPose(matrix, vertices)

    @staticmethod
    def _blend(start: ObjectPose, end: ObjectPose, alpha: float, rest: np.ndarray | None,
               matrix_rest: np.ndarray) -> ObjectPose:
        matrix = (1.0 - alpha) * start.matrix + alpha * end.matrix
        if start.vertices is None and end.vertices is None:
            return ObjectPose(matrix, None)

        def concrete(pose):
            if pose.vertices is not None:
                return pose.vertices
            # a pose without vertices means the submitted vertices carried rigidly by its matrix
            return carry_points(rest, pose.matrix, matrix_rest)

        vertices = (1.0 - alpha) * concrete(start) + alpha * concrete(end)
        return ObjectPose(matrix, vertices)

    def _pins_through_colliders(self, object_id: str, poses) -> str | None:
        """Why a runaway object blew up when its pins are the cause: its pin targets at ``poses`` lie inside a
        collider (the pins drag it through: a cape pinned to a bone that swings through the body, pins that
        do not follow a deforming skin). A sentence naming the deepest such collider and the depth, or None."""
        targets = None
        for group in self.groups:
            if object_id in group.ids and hasattr(group, "object_pin_targets"):
                targets = group.object_pin_targets(object_id, poses)
        if targets is None or len(targets) == 0:
            return None
        deepest = None
        for collider in self.colliders.colliders:
            if collider.is_mesh:
                surface, inside = collider.geometry.recover_inside(np, targets, np.zeros(len(targets)))
                depth = np.where(inside, np.linalg.norm(surface - targets, axis=1), 0.0)
            else:
                depth = np.maximum(-collider.geometry.signed_distance(np, targets)[0], 0.0)
            if depth.max() > 0.0 and (deepest is None or depth.max() > deepest[1]):
                deepest = (collider.id, float(depth.max()), int((depth > 0.0).sum()))
        if deepest is None:
            return None
        return (f"{deepest[2]} of its pinned points were pulled up to {deepest[1]:.3g} m through '{deepest[0]}' "
                "(the pins' targets pass through that collider: check what the pins follow)")

    # ------------------------------------------------------------------ checkpoints (ARCHITECTURE §3)
    KINEMATIC_GROUP = "kinematic"

    def _group_key(self, group) -> str:
        """Stable key of a solver group: its objects' registry keys, e.g. "cloth+softbody", "hair:der"."""
        keys = {spec.kind if spec.kind != "hair" else f"hair:{spec.params.get('model')}"
                for spec in (self._specs[object_id] for object_id in group.ids)}
        return "+".join(sorted(keys))

    def checkpoint(self) -> dict:
        """Everything needed to continue bit-exactly after ``self.frame``: {"frame": int, "groups":
        {group key: {name: host ndarray}}}; the "kinematic" group holds the drive poses of the animated
        objects (``pose<i>_matrix`` (4, 4), ``pose<i>_vertices`` (N, 3), i indexing ``animated_ids``) and
        the colliders' current poses (``collider<i>_matrix``, ``collider<i>_vertices``; after frame_start)."""
        groups = {self._group_key(group): group.state_arrays() for group in self.groups}
        kinematic: dict[str, np.ndarray] = {}
        for index, object_id in enumerate(self.animated_ids):
            pose = self._poses[object_id]
            kinematic[f"pose{index}_matrix"] = np.array(pose.matrix, np.float64)
            if pose.vertices is not None:
                kinematic[f"pose{index}_vertices"] = np.array(pose.vertices, np.float64)
        if self.frame > self.frame_start:
            for index, collider in enumerate(self.colliders.colliders):
                kinematic[f"collider{index}_matrix"] = np.array(collider.matrix, np.float64)
                if collider.is_mesh and collider.geometry.vertices is not None:
                    kinematic[f"collider{index}_vertices"] = np.array(collider.geometry.vertices, np.float64)
        groups[self.KINEMATIC_GROUP] = kinematic
        return {"frame": int(self.frame), "groups": groups}

    def restore(self, checkpoint: dict) -> None:
        """Continue from ``checkpoint`` (from :meth:`checkpoint` of the same scene, right after __init__):
        the next advance() yields checkpoint["frame"] + 1. Raises SceneError when it does not fit."""
        if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("groups"), dict) \
                or isinstance(checkpoint.get("frame"), bool) or not isinstance(checkpoint.get("frame"), int):
            raise SceneError("the resume checkpoint must be a map {frame: int, groups: {key: {name: array}}}")
        frame = checkpoint["frame"]
        if not self.frame_start <= frame <= self.frame_end:
            raise SceneError(f"the resume checkpoint is for frame {frame}, outside this scene's frames "
                             f"{self.frame_start}..{self.frame_end}")
        groups = {self.KINEMATIC_GROUP: {}, **checkpoint["groups"]}  # an empty kinematic group may be left out
        expected = {self._group_key(group) for group in self.groups} | {self.KINEMATIC_GROUP}
        if set(groups) != expected or not all(isinstance(value, dict) for value in groups.values()):
            raise SceneError(f"the resume checkpoint holds solver groups {sorted(map(str, groups))}, this scene "
                             f"has {sorted(expected)} (was it made for a different scene?)")
        kinematic = groups[self.KINEMATIC_GROUP]
        poses = dict(self._poses)
        for index, object_id in enumerate(self.animated_ids):
            matrix = checked_state_array(kinematic, f"pose{index}_matrix", (4, 4), np.float64, object_id)
            vertices = None
            if f"pose{index}_vertices" in kinematic:
                shape = self._specs[object_id].vertices.shape if self._specs[object_id].vertices is not None else (0, 3)
                vertices = checked_state_array(kinematic, f"pose{index}_vertices", shape, np.float64, object_id)
            poses[object_id] = ObjectPose(matrix, vertices)
        collider_poses = {}
        if frame > self.frame_start:
            for index, collider in enumerate(self.colliders.colliders):
                matrix = checked_state_array(kinematic, f"collider{index}_matrix", (4, 4), np.float64, collider.id)
                vertices = None
                if collider.is_mesh:
                    shape = collider.geometry.rest_vertices.shape
                    vertices = checked_state_array(kinematic, f"collider{index}_vertices", shape, np.float64,
                                                   collider.id)
                collider_poses[collider.id] = (matrix, vertices)
        for group in self.groups:
            group.load_state_arrays(groups[self._group_key(group)])
        if collider_poses:
            self.colliders.set_poses(collider_poses)
        self._poses = poses
        self.frame = frame
        self._prerolled = self.preroll          # a checkpoint's state comes after the pre-roll
        self.runaway.elapsed = (frame - self.frame_start + self.preroll) / self.scene.time.fps

    # ------------------------------------------------------------------ frames
    def _collect(self) -> dict[str, np.ndarray]:
        positions: dict[str, np.ndarray] = {}
        for group in self.groups:
            positions.update(group.positions())
        return {spec.id: positions[spec.id] for spec in self.scene.objects if spec.id in positions}

    @property
    def preroll_left(self) -> int:
        """Frames of the pre-roll (``time.preroll``) not run yet."""
        return self.preroll - self._prerolled

    def preroll_frame(self) -> dict:
        """Run the next frame of the pre-roll: ``substeps`` substeps with every object held at its frame_start pose
        (the frames frame_start − preroll + 1 .. frame_start, none of them output). Returns the frame's stats. A
        failure names frame_start and how far into the pre-roll it came."""
        if self.preroll_left <= 0:
            raise SimulationError("the pre-roll has run already", frame=self.frame_start)
        try:
            stats = self._step_frame(self.frame_start - self.preroll_left + 1, dict(self._poses))
        except SimulationError as exc:
            raise SimulationError(f"in the pre-roll, frame {self._prerolled + 1} of {self.preroll} before the first "
                                  f"frame: {exc.message}", object=exc.object, frame=self.frame_start) from exc
        self._prerolled += 1
        return stats

    def initial_frame(self) -> FrameOutput:
        """Positions at frame_start: the submitted input state, after the pre-roll (whatever of it
        :meth:`preroll_frame` has not run yet runs here first)."""
        started = time.perf_counter()
        preroll_left = self.preroll_left
        while self.preroll_left > 0:
            self.preroll_frame()
        stats = {"substeps": 0, "iterations": 0, "contacts": 0, "step_ms": 0.0}
        if self.preroll:
            stats.update(preroll_frames=self.preroll, preroll_ms=(time.perf_counter() - started) * 1e3
                         if preroll_left else 0.0)
        return self.frame_start, self._collect(), stats

    def advance(self, drive: dict | None = None) -> FrameOutput:
        """Step ``substeps`` substeps to the next frame. ``drive``: drive.body["objects"] of that frame."""
        frame = self.frame + 1
        if frame > self.frame_end:
            raise SimulationError(f"advance past frame_end {self.frame_end}", frame=frame)
        if self.preroll_left > 0:
            raise SimulationError("advance before the pre-roll ran (call initial_frame first)", frame=frame)
        end_poses = self._next_poses(drive, frame)
        stats = self._step_frame(frame, end_poses)
        self._poses = end_poses
        self.frame = frame
        return frame, self._collect(), stats

    def _step_frame(self, frame: int, end_poses: dict[str, ObjectPose]) -> dict:
        """``substeps`` substeps from the current poses to ``end_poses`` (the animated objects' poses at
        ``frame``, blended linearly across the substeps); returns the frame's stats."""
        started = time.perf_counter()
        device_timer = self.backend.start_timer()
        substep_stats: list[dict] = []    # every group's stats of every substep, read once at the frame's end
        frame_time = (frame - 1 - self.frame_start) / self.scene.time.fps
        substep_start = {object_id: self._poses[object_id] for object_id in self.animated_ids}
        for k in range(self.substeps):
            alpha = (k + 1) / self.substeps
            poses = dict(self._poses)
            for object_id in self.animated_ids:
                spec = self._specs[object_id]
                poses[object_id] = self._blend(self._poses[object_id], end_poses[object_id], alpha, spec.vertices,
                                               spec.matrix_world)
            self.colliders.set_poses({c.id: (poses[c.id].matrix, poses[c.id].vertices) for c in self.colliders.colliders},
                                     self.dt)
            inputs = SubstepInputs(frame=frame, time=frame_time + alpha / self.scene.time.fps, dt=self.dt,
                                   gravity=self.scene.gravity, poses=poses, colliders=self.colliders)
            for group in self.groups:
                try:
                    with self.backend.substep_scope(f"{type(group).__name__}.step at frame {frame}"):
                        stats = group.step(inputs)
                except (SimulationError, SceneError):
                    raise
                except FloatingPointError as exc:
                    raise SimulationError(f"floating point failure in the solver ({exc})", object=group.ids[0],
                                          frame=frame) from exc
                except (ArithmeticError, np.linalg.LinAlgError) as exc:
                    # a numerical breakdown (a system matrix no longer positive definite, a singular solve) is
                    # the simulation failing on this input, never an internal error of the server
                    raise SimulationError(
                        f"the solver could not continue: {exc}. Likely cause: the object was stretched or crushed "
                        f"far beyond its rest shape (squeezed by a collider, pulled by pins, or too stiff for the "
                        f"time step); more substeps or a softer material usually help "
                        f"({type(exc).__name__})", object=group.ids[0], frame=frame) from exc
                substep_stats.append(stats)
            for group in self.groups:
                bad = group.first_non_finite()
                if bad is not None:
                    raise SimulationError(
                        "positions became NaN/Inf; likely cause: stiffness too high for the substep count "
                        "(raise time.substeps), a collider teleporting through the object, or an "
                        "inverted/degenerate element", object=bad, frame=frame)
            substep_end = {object_id: poses[object_id] for object_id in self.animated_ids}
            self.runaway.note_kinematics(substep_start, substep_end, self.colliders.teleported)
            self.runaway.check(self.groups, self.backend.xp, frame, skip=bool(self.colliders.teleported),
                               cause=lambda object_id, poses=poses: self._pins_through_colliders(object_id, poses))
            substep_start = substep_end
        totals, extra = _frame_totals(substep_stats)
        for group in self.groups:
            extra.update(group.finish_frame())
        device_ms = device_timer.elapsed_ms()
        elapsed_ms = (time.perf_counter() - started) * 1e3
        return {"substeps": self.substeps, **totals, "step_ms": elapsed_ms / self.substeps,
                "frame_ms": elapsed_ms, "device_ms": device_ms, **extra}


def _frame_totals(substep_stats: list[dict]) -> tuple[dict, dict]:
    """The frame's statistics from every group's stats of every substep (device scalars are read here, once per
    frame, not inside the substeps): (totals {"iterations": summed, "contacts": the largest}, the other keys:
    ``*_ms`` summed, ``*_left`` the worst substep, ``*_objects`` every id named, recovered_inside and
    ``failsafe_*`` summed, any other key its last value)."""
    totals = {"iterations": 0, "contacts": 0}
    extra: dict = {}
    for stats in substep_stats:
        totals["iterations"] += int(stats.get("iterations", 0))
        totals["contacts"] = max(totals["contacts"], int(stats.get("contacts", 0)))
        for key, value in stats.items():
            if key.endswith("_ms"):
                extra[key] = extra.get(key, 0.0) + float(value)
            elif key.endswith("_left"):        # contacts / limits left unresolved: the worst substep
                extra[key] = max(extra.get(key, 0), _host_value(value))
            elif key.endswith("_objects"):      # ids named by any substep of the frame
                extra[key] = sorted(set(extra.get(key, [])) | set(value))
            elif key == "recovered_inside" or key.startswith("failsafe_"):   # counts over the frame
                extra[key] = extra.get(key, 0) + int(value)
            elif key not in totals:
                extra[key] = _host_value(value)
    return totals, extra


def _host_value(value):
    """A statistic as the frame reports it: a 0-d device array becomes a Python number."""
    if getattr(value, "shape", None) == ():
        return value.item()
    return value

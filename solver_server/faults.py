"""Numerical fault detection between frames, used by ``jobs.Job``.

The Simulation already stops on NaN/Inf after every substep. :class:`MotionGuard` adds the check
for a simulation that is still finite but exploding, on every frame before it is sent:

* deforming speed: per object, the largest point displacement over the frame after removing the
  object's mean displacement (so a character teleporting with its hair, or a fast rigid move, is
  not a fault), divided by the frame time, must stay below ``speed_limit`` [m/s] =
  max(1000 m/s, 100 × the free-fall speed |g|·T reached over the whole bake of length T);
* position: every coordinate must stay within ``MAX_COORDINATE_M`` (the scene parser refuses
  input beyond it as well).

A failed check raises SimulationError naming the object, the frame and the likely cause.
"""

from __future__ import annotations

import math

import numpy as np

from .sim.builder import MAX_ABS_VALUE
from .sim.errors import SimulationError

MAX_COORDINATE_M = MAX_ABS_VALUE  # [m] the simulation domain (the scene parser refuses input beyond it)
MIN_SPEED_LIMIT = 1.0e3  # [m/s]
FREE_FALL_FACTOR = 100.0
EARLY_FRAMES = 2  # a failure this close to the start points at the start state


class MotionGuard:
    """Per-frame explosion check of one job's output positions.

    frame_start, frame_end: the scene's frames; fps [1/s]; gravity: (3,) [m/s²]; preroll: the frames simulated
    before frame_start (their time counts in the free-fall speed the limit allows).
    """

    def __init__(self, frame_start: int, frame_end: int, fps: float, gravity, preroll: int = 0):
        self.frame_start = frame_start
        self.frame_dt = 1.0 / fps
        duration = max(frame_end - frame_start + preroll, 1) * self.frame_dt
        free_fall_speed = float(np.linalg.norm(np.asarray(gravity, dtype=np.float64))) * duration
        self.speed_limit = max(MIN_SPEED_LIMIT, FREE_FALL_FACTOR * free_fall_speed)
        self._previous: dict[str, np.ndarray] = {}

    @classmethod
    def from_scene(cls, scene: dict, frame_start: int, frame_end: int) -> "MotionGuard":
        """From the submitted scene dict (already validated by the Simulation); fps 24 and
        standard gravity where a test stand-in leaves them out."""
        timing = scene.get("time", {}) if isinstance(scene, dict) else {}
        fps = float(timing.get("fps", 24.0)) if isinstance(timing, dict) else 24.0
        gravity = scene.get("gravity", (0.0, 0.0, -9.81)) if isinstance(scene, dict) else (0.0, 0.0, -9.81)
        preroll = int(timing.get("preroll", 0)) if isinstance(timing, dict) else 0
        return cls(frame_start, frame_end, fps if fps > 0 else 24.0, gravity, preroll)

    def _cause(self, frame: int) -> str:
        if frame - self.frame_start <= EARLY_FRAMES:
            return ("likely cause: an intersecting start state (objects overlapping each other or a collider "
                    "at frame_start) or a time step far too large; fix the start pose or raise time.substeps")
        return ("likely cause: time step too large for the stiffness (raise time.substeps or lower the "
                "stiffness) or a collider moving through the object")

    def check(self, frame: int, positions: dict[str, np.ndarray]) -> None:
        """Check the positions {id: (N, 3)} [m] of ``frame``; raises SimulationError on a fault.
        The first frame checked (or the first after a resume) only sets the reference."""
        for object_id, points in positions.items():
            points = np.array(points, dtype=np.float64)  # a copy: solvers reuse their buffers
            if not np.all(np.isfinite(points)):
                raise SimulationError(f"positions became NaN/Inf; {self._cause(frame)}", object=object_id, frame=frame)
            reach = float(np.abs(points).max()) if points.size else 0.0
            if reach > MAX_COORDINATE_M:
                raise SimulationError(
                    f"a point reached {reach:.3g} m from the origin (beyond {MAX_COORDINATE_M:g} m): the simulation "
                    f"exploded; {self._cause(frame)}", object=object_id, frame=frame)
            previous = self._previous.get(object_id)
            if previous is not None and previous.shape == points.shape and len(points):
                displacement = points - previous
                deforming = displacement - displacement.mean(axis=0)
                speed = float(np.sqrt((deforming * deforming).sum(axis=1).max())) / self.frame_dt
                if speed > self.speed_limit or not math.isfinite(speed):
                    raise SimulationError(
                        f"points moved apart at {speed:.3g} m/s (limit {self.speed_limit:.3g} m/s): the simulation "
                        f"is exploding; {self._cause(frame)}", object=object_id, frame=frame)
            self._previous[object_id] = points

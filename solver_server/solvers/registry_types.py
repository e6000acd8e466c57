"""Types shared by the solver registry, the solver groups and the Simulation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass
class ObjectPose:
    """Kinematic pose of a scene object at one instant (world space).

    matrix: (4, 4) matrix_world; vertices: (N, 3) [m] deformed rest vertices, or None (then the
    rest vertices carried rigidly by matrix · matrix_rest⁻¹ are meant).
    """

    matrix: np.ndarray
    vertices: np.ndarray | None = None


@dataclass
class SubstepInputs:
    """Everything a solver group needs for one substep.

    frame: the frame being computed; time: [s] since frame_start at the END of the substep;
    dt: substep length [s]; gravity: (3,) [m/s²]; poses: id -> ObjectPose at the end of the
    substep for every object of the scene (colliders included); colliders: a
    collision.ColliderSet already posed at the end of the substep.
    """

    frame: int
    time: float
    dt: float
    gravity: np.ndarray
    poses: dict
    colliders: object


class SolverGroup(Protocol):
    """What a registry factory returns: the merged objects of one solver, step-able."""

    ids: list[str]

    def step(self, inputs: SubstepInputs) -> dict:
        """Advance one substep; stats with at least ``iterations`` and ``contacts`` (ints)."""

    def positions(self) -> dict[str, np.ndarray]:
        """Current output positions, id -> float32 (N, 3) host array (N as submitted)."""

    def first_non_finite(self) -> str | None:
        """Id of an object whose state holds NaN/Inf, else None."""

"""Types shared by the solver registry, the solver groups and the Simulation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..sim.errors import SceneError


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

    def finish_frame(self) -> dict:
        """At a frame's end, after its substeps: the checks a substep leaves on the device, read once; returns
        stats for the frame (none by default)."""

    def positions(self) -> dict[str, np.ndarray]:
        """Current output positions, id -> float32 (N, 3) host array (N as submitted)."""

    def first_non_finite(self) -> str | None:
        """Id of an object whose state holds NaN/Inf, else None."""

    def device_positions(self) -> list:
        """[(id, positions (n, 3) or (S, P, 3) on the backend's device)] of the simulated points of every
        object (no host copies: the runaway guard reads them after every substep)."""

    def state_arrays(self) -> dict[str, np.ndarray]:
        """The group's whole dynamic state as host numpy arrays (copies; float64, int or bool), names
        without '/'; enough for :meth:`load_state_arrays` to continue bit-exactly (ARCHITECTURE §3)."""

    def load_state_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Replace the dynamic state by ``arrays`` from :meth:`state_arrays` of the same scene; raises
        SceneError naming the object when an array is missing or has the wrong shape or dtype."""


def checked_state_array(arrays: dict, name: str, shape: tuple, dtype, owner: str | None) -> np.ndarray:
    """``arrays[name]`` validated for a checkpoint restore and returned as a writable host copy.

    shape: expected shape, ``None`` entries match any length; dtype: the expected numpy dtype
    (float arrays must also be finite). Raises SceneError naming ``owner`` (an object id) and the
    array when it is missing or does not fit.
    """
    value = arrays.get(name) if isinstance(arrays, dict) else None
    if value is None:
        raise SceneError(f"the resume checkpoint has no state array {name!r}", object=owner)
    array = np.asarray(value)
    expected = np.dtype(dtype)
    if array.dtype.kind != expected.kind and not (expected.kind == "f" and array.dtype.kind in "iu"):
        raise SceneError(f"checkpoint array {name!r} has dtype {array.dtype}, expected {expected}", object=owner)
    fits = array.ndim == len(shape) and all(want is None or want == got for want, got in zip(shape, array.shape))
    if not fits:
        wanted = "(" + ", ".join("n" if want is None else str(want) for want in shape) + ")"
        raise SceneError(f"checkpoint array {name!r} has shape {tuple(array.shape)}, this scene needs {wanted} "
                         "(was the checkpoint made for a different scene?)", object=owner)
    if expected.kind == "f" and not np.all(np.isfinite(array)):
        raise SceneError(f"checkpoint array {name!r} contains NaN or Inf", object=owner)
    return np.array(array, dtype=expected)

"""The PD cloth and soft bodies' per-step data: PDState (positions and velocities of the merged particle
system) and PDControl (the kinematic inputs of one substep)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PDState:
    """positions (n, 3) [m] and velocities (n, 3) [m/s] on the backend device (float64)."""

    positions: object
    velocities: object

    def copy(self) -> "PDState":
        return PDState(self.positions.copy(), self.velocities.copy())


@dataclass
class PDControl:
    """Kinematic inputs for one substep.

    pin_targets: (P, 3) [m] world targets of the model's pinned particles (model.pin_indices
    order) at the END of the substep; colliders: a collision.ColliderSet already posed at the
    end of the substep; time: [s] since frame_start at the end of the substep.
    """

    pin_targets: object
    colliders: object
    time: float = 0.0
    extra: dict = field(default_factory=dict)

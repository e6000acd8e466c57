"""Per-step data (Newton style): State holds positions/velocities, Control the kinematic inputs."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class State:
    """positions (n, 3) [m] and velocities (n, 3) [m/s] on the backend device (float64)."""

    positions: object
    velocities: object

    def copy(self) -> "State":
        return State(self.positions.copy(), self.velocities.copy())


@dataclass
class Control:
    """Kinematic inputs for one substep.

    pin_targets: (P, 3) [m] world targets of the model's pinned particles (model.pin_indices
    order) at the END of the substep; colliders: a collision.ColliderSet already posed at the
    end of the substep; time: [s] since frame_start at the end of the substep.
    """

    pin_targets: object
    colliders: object
    time: float = 0.0
    extra: dict = field(default_factory=dict)

"""The particle strands' per-step data: ParticleState (positions, velocities, rigidity) and StrandControl
(the root targets and colliders of one step)."""

from __future__ import annotations

from dataclasses import dataclass

from ..strand_colliders import AnalyticColliders


@dataclass
class ParticleState:
    """positions, velocities: (S, P, 3); rigidity: (S,) in [0, 1]; time [s] since the start."""

    positions: object
    velocities: object
    rigidity: object
    time: float = 0.0

    def copy(self, xp) -> "ParticleState":
        return ParticleState(xp.array(self.positions), xp.array(self.velocities), xp.array(self.rigidity), self.time)


@dataclass
class StrandControl:
    """Inputs of one step: root_targets (S, K, 3) world positions of the K pinned root points at
    the END of the step [m]; colliders in world space (may be empty)."""

    root_targets: object
    colliders: AnalyticColliders | None = None

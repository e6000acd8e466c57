"""Parameters of the game-style particle hair model (seed 004) with defaults and units.

Springs are given per unit particle mass (k/m, unit 1/s²) as in game engines, where every
particle of a chain has the same mass: then gravity, wind and springs are accelerations and
the particle mass cancels out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


from ..strand_settings import check_ranges, settings_from_hair_params
from ..wind import WindSettings


@dataclass(frozen=True)
class ParticleHairSettings:
    """All settings of :class:`ParticleHairSolver`.

    stiffness [1/s²]: neighbour spring k/m. Compression force k·Δx; stretching force
        k·Δx²/(stretch_scale·L) (seed 004's k·Δx², made dimensionally consistent: it equals the
        linear response at strain ``stretch_scale`` and grows quadratically beyond).
    bend_stiffness [1/s²]: second-neighbour spring k/m (same asymmetric law); keeps chains straight.
    angle_stiffness [1/s²]: turning-angle spring per unit mass at every interior particle: energy per mass
        ½ k L̄² (θ − θ̄)² (θ: angle between the particle's two segments, θ̄ at rest, L̄ their mean rest length).
        Unlike the second-neighbour spring it is blind to stretch, so segments at the distance clamp cannot
        fold into kinks at no cost (an addition to seed 004).
    stretch_scale [-]: strain at which the quadratic stretch response equals the linear one.
    gravity_scale [-]: multiplies the scene gravity (seed 004 lowers g for game hair).
    damping [1/s]: v ← v·(1 − damping·h) per step (seed 004's γ per second).
    max_stretch [-]: distance clamp, every segment within [1 / max_stretch, max_stretch] × rest length.
    teleport_speed [m/s]: root speed above which root motion is discarded (strand carried rigidly)
        and the rigid length constraint switches on.
    teleport_recovery [s]: time constant with which the rigid constraint fades back to springs.
    rest_speed [m/s]: particles slower than this are put to rest (velocity zeroed, not moved).
    radius [m]: particle radius for collider contact; collider_friction: μ (max with colliders').
    pinned_points: 1 or 2 root points follow the root kinematically (2 = clamped root).
    """

    stiffness: float = 2.0e4
    bend_stiffness: float = 1.0e4
    angle_stiffness: float = 5.0e4
    stretch_scale: float = 0.1
    gravity_scale: float = 1.0
    damping: float = 0.5
    max_stretch: float = 1.1
    teleport_speed: float = 10.0
    teleport_recovery: float = 0.25
    rest_speed: float = 1.0e-4
    radius: float = 5.0e-5
    collider_friction: float = 0.3
    pinned_points: int = 2
    wind: WindSettings = WindSettings()

    @classmethod
    def from_params(cls, params: dict, object_id: str | None = None) -> "ParticleHairSettings":
        """Settings from a hair object's params (protocol keys; unknown keys are ignored here —
        the scene parameter table validates them). Particle-model keys carry a ``particle_`` prefix
        except ``gravity_scale`` and ``wind``."""
        shared = ("damping", "radius", "collider_friction", "gravity_scale")
        settings = settings_from_hair_params(cls, params, lambda name: name if name in shared else "particle_" + name,
                                             WindSettings.from_object_params(params, object_id),
                                             integers=("pinned_points",))
        settings.validate(object_id)
        return settings

    def validate(self, object_id: str | None = None) -> None:
        """Raise SceneError naming the object for out-of-range settings."""
        checks = (
            ("particle_stiffness", self.stiffness, self.stiffness > 0, "> 0"),
            ("particle_bend_stiffness", self.bend_stiffness, self.bend_stiffness >= 0, ">= 0"),
            ("particle_angle_stiffness", self.angle_stiffness, self.angle_stiffness >= 0, ">= 0"),
            ("particle_stretch_scale", self.stretch_scale, self.stretch_scale > 0, "> 0"),
            ("gravity_scale", self.gravity_scale, math.isfinite(self.gravity_scale), "finite"),
            ("damping", self.damping, self.damping >= 0, ">= 0"),
            ("particle_max_stretch", self.max_stretch, self.max_stretch >= 1.0, ">= 1"),
            ("particle_teleport_speed", self.teleport_speed, self.teleport_speed > 0, "> 0"),
            ("particle_teleport_recovery", self.teleport_recovery, self.teleport_recovery > 0, "> 0"),
            ("particle_rest_speed", self.rest_speed, self.rest_speed >= 0, ">= 0"),
            ("radius", self.radius, self.radius >= 0, ">= 0"),
            ("particle_pinned_points", self.pinned_points, self.pinned_points in (1, 2), "1 or 2"),
        )
        check_ranges(checks, object_id)

"""Parameters of the game-style particle hair model (seed 004) with units; defaults and ranges are the hair
parameter table's (``sim.params``).

Springs are given per unit particle mass (k/m, unit 1/s²) as in game engines, where every
particle of a chain has the same mass: then gravity, wind and springs are accelerations and
the particle mass cancels out.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...sim.errors import SceneError
from ..strand_settings import check_settings, hair_default, settings_from_hair_params
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
    air_drag [-]: the drag of still air on a strand of ``radius`` and ``density`` [kg/m³] (``kernels/air.py``;
        1: air, 0: none); density serves nothing else (springs are per unit mass).
    max_stretch [-]: distance clamp, every segment within [1 / max_stretch, max_stretch] × rest length.
    teleport_speed [m/s]: root speed above which root motion is discarded (strand carried rigidly)
        and the rigid length constraint switches on.
    teleport_recovery [s]: time constant with which the rigid constraint fades back to springs.
    rest_speed [m/s]: particles slower than this are put to rest (velocity zeroed, not moved).
    radius [m]: particle radius for collider contact; collider_friction: μ (max with colliders').
    pinned_points: 1 or 2 root points follow the root kinematically (2 = clamped root).
    """

    stiffness: float = hair_default("particle_stiffness")
    bend_stiffness: float = hair_default("particle_bend_stiffness")
    angle_stiffness: float = hair_default("particle_angle_stiffness")
    stretch_scale: float = hair_default("particle_stretch_scale")
    gravity_scale: float = hair_default("gravity_scale")
    damping: float = hair_default("damping")
    air_drag: float = hair_default("air_drag")
    density: float = hair_default("density")
    max_stretch: float = hair_default("particle_max_stretch")
    teleport_speed: float = hair_default("particle_teleport_speed")
    teleport_recovery: float = hair_default("particle_teleport_recovery")
    rest_speed: float = hair_default("particle_rest_speed")
    radius: float = hair_default("radius")
    collider_friction: float = hair_default("collider_friction")
    pinned_points: int = 2
    wind: WindSettings = WindSettings()

    @classmethod
    def from_params(cls, params: dict, object_id: str | None = None) -> "ParticleHairSettings":
        """Settings from a hair object's params (protocol keys; unknown keys are ignored here —
        the scene parameter table validates them). Particle-model keys carry a ``particle_`` prefix
        except ``gravity_scale`` and ``wind``."""
        wind = WindSettings.from_object_params(params, object_id)
        settings = settings_from_hair_params(cls, params, protocol_key, wind, integers=("pinned_points",))
        settings.validate(object_id)
        return settings

    def validate(self, object_id: str | None = None) -> None:
        """Raise SceneError naming the object for out-of-range settings (the hair parameter table's ranges;
        ``pinned_points``, which a scene sets through its pins, must be 1 or 2)."""
        check_settings(self, protocol_key, object_id, table_free=("pinned_points",))
        if self.pinned_points not in (1, 2):
            raise SceneError(f"parameter 'particle_pinned_points' = {self.pinned_points!r} must be 1 or 2",
                             object=object_id)


# ParticleHairSettings fields set by the hair parameter of the same name; the others carry a ``particle_`` prefix
_SHARED_KEYS = ("damping", "air_drag", "density", "radius", "collider_friction", "gravity_scale")


def protocol_key(name: str) -> str:
    """The hair parameter that sets ParticleHairSettings field ``name``."""
    return name if name in _SHARED_KEYS else "particle_" + name

"""Parameters of the game-style particle hair model (seed 004) with defaults and units.

Springs are given per unit particle mass (k/m, unit 1/s²) as in game engines, where every
particle of a chain has the same mass: then gravity, wind and springs are accelerations and
the particle mass cancels out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from solver_server.sim.errors import SceneError

from ..strand_settings import settings_from_hair_params


@dataclass(frozen=True)
class WindSettings:
    """Wind acceleration a(t) = direction · (strength + amplitude · sin(2π t / period)) [m/s²].

    Applied equally to every particle (seed 004: same force on every hair particle).
    direction: unit 3-vector; strength, amplitude [m/s²]; period [s].
    """

    direction: tuple = (1.0, 0.0, 0.0)
    strength: float = 0.0
    amplitude: float = 0.0
    period: float = 2.0

    def acceleration(self, time: float) -> tuple[float, float, float]:
        """Wind acceleration vector [m/s²] at ``time`` [s]."""
        scale = self.strength + self.amplitude * math.sin(2.0 * math.pi * time / self.period)
        return tuple(scale * c for c in self.direction)

    @classmethod
    def from_hair_params(cls, params: dict, object_id: str | None = None) -> "WindSettings":
        """From a hair object's params: a ``wind`` map, or the flat keys ``wind_direction``,
        ``wind_strength``, ``wind_amplitude``, ``wind_period`` (the scene parameter table's form)."""
        if params.get("wind") is not None:
            return cls.from_params(params["wind"], object_id)
        flat = {key[len("wind_"):]: params[key] for key in
                ("wind_direction", "wind_strength", "wind_amplitude", "wind_period") if params.get(key) is not None}
        return cls.from_params(flat, object_id)

    @classmethod
    def from_params(cls, value, object_id: str | None = None) -> "WindSettings":
        """From ``{"direction": [x, y, z], "strength", "amplitude", "period"}`` (all optional)."""
        if value is None:
            return cls()
        if not isinstance(value, dict):
            raise SceneError(f"'wind' must be a map, got {type(value).__name__}", object=object_id)
        unknown = sorted(set(value) - {"direction", "strength", "amplitude", "period"})
        if unknown:
            raise SceneError(f"unknown wind key {unknown[0]!r}; valid: direction, strength, amplitude, period",
                             object=object_id)
        direction = [float(c) for c in value.get("direction", cls.direction)]
        norm = math.sqrt(sum(c * c for c in direction))
        if len(direction) != 3 or not math.isfinite(norm) or norm == 0.0:
            raise SceneError(f"wind direction must be a non-zero 3-vector, got {value.get('direction')!r}",
                             object=object_id)
        period = float(value.get("period", cls.period))
        if not period > 0.0:
            raise SceneError(f"wind period must be > 0 s, got {period!r}", object=object_id)
        return cls(direction=tuple(c / norm for c in direction), strength=float(value.get("strength", 0.0)),
                   amplitude=float(value.get("amplitude", 0.0)), period=period)


@dataclass(frozen=True)
class ParticleHairSettings:
    """All settings of :class:`ParticleHairSolver`.

    stiffness [1/s²]: neighbour spring k/m. Compression force k·Δx; stretching force
        k·Δx²/(stretch_scale·L) (seed 004's k·Δx², made dimensionally consistent: it equals the
        linear response at strain ``stretch_scale`` and grows quadratically beyond).
    bend_stiffness [1/s²]: second-neighbour spring k/m (same asymmetric law); keeps chains straight.
    stretch_scale [-]: strain at which the quadratic stretch response equals the linear one.
    gravity_scale [-]: multiplies the scene gravity (seed 004 lowers g for game hair).
    damping [1/s]: v ← v·(1 − damping·h) per step (seed 004's γ per second).
    max_stretch [-]: distance clamp, no segment longer than max_stretch × rest length.
    teleport_speed [m/s]: root speed above which root motion is discarded (strand carried rigidly)
        and the rigid length constraint switches on.
    teleport_recovery [s]: time constant with which the rigid constraint fades back to springs.
    rest_speed [m/s]: particles slower than this are put to rest (velocity zeroed, not moved).
    radius [m]: particle radius for collider contact; collider_friction: μ (max with colliders').
    pinned_points: 1 or 2 root points follow the root kinematically (2 = clamped root).
    """

    stiffness: float = 2.0e4
    bend_stiffness: float = 1.0e4
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
                                             WindSettings.from_hair_params(params, object_id),
                                             integers=("pinned_points",))
        settings.validate(object_id)
        return settings

    def validate(self, object_id: str | None = None) -> None:
        """Raise SceneError naming the object for out-of-range settings."""
        checks = (
            ("particle_stiffness", self.stiffness, self.stiffness > 0, "> 0"),
            ("particle_bend_stiffness", self.bend_stiffness, self.bend_stiffness >= 0, ">= 0"),
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
        for key, value, ok, rule in checks:
            if not ok:
                raise SceneError(f"parameter {key!r} = {value!r} must be {rule}", object=object_id)

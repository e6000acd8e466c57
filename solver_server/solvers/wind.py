"""Uniform wind of a scene object (the parameter table's ``wind_*`` keys), shared by the hair models and cloth."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..sim.errors import SceneError


@dataclass(frozen=True)
class WindSettings:
    """Wind acceleration a(t) = direction · (strength + amplitude · sin(2π t / period)) [m/s²].

    The fast hair models apply it equally to every particle (seed 004: same force on every hair
    particle); cloth takes its component along the faces' normals (``pd/wind.py``), DER hair the component
    across the strand (``der/wind.py``). direction: unit 3-vector; strength, amplitude [m/s²]; period [s].
    """

    direction: tuple = (1.0, 0.0, 0.0)
    strength: float = 0.0
    amplitude: float = 0.0
    period: float = 2.0

    @property
    def blows(self) -> bool:
        """Whether there is any wind at all."""
        return self.strength != 0.0 or self.amplitude != 0.0

    def acceleration(self, time: float) -> tuple[float, float, float]:
        """Wind acceleration vector [m/s²] at ``time`` [s]."""
        scale = self.strength + self.amplitude * math.sin(2.0 * math.pi * time / self.period)
        return tuple(scale * c for c in self.direction)

    @classmethod
    def from_object_params(cls, params: dict, object_id: str | None = None) -> "WindSettings":
        """From a hair or cloth object's params: a ``wind`` map, or the flat keys ``wind_direction``,
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


class WindField:
    """The winds of several objects spread over their elements (cloth triangles, hair vertices) on ``xp``'s
    device: element e blows with the WindSettings of object owner[e]. winds: one per object; owner (m,)."""

    def __init__(self, xp, winds: list[WindSettings], owner):
        self.xp = xp
        table = np.array([[*wind.direction, wind.strength, wind.amplitude, wind.period] for wind in winds],
                         dtype=np.float64).reshape(-1, 6)
        rows = xp.asarray(table[np.asarray(owner, dtype=np.int64)])
        self.direction = rows[:, :3]
        self.strength, self.amplitude, self.period = rows[:, 3], rows[:, 4], rows[:, 5]

    def vectors(self, time: float):
        """Wind acceleration (m, 3) [m/s²] of every element at ``time`` [s] (WindSettings.acceleration)."""
        gust = self.strength + self.amplitude * self.xp.sin((2.0 * np.pi * time) / self.period)
        return self.direction * gust[:, None]

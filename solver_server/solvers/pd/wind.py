"""Wind on cloth: the wind pushes a face along its normal.

For a cloth object with wind w(t) = direction · (strength + amplitude · sin(2π t / period)) [m/s²]
(``solvers/wind.py``, the same field the fast hair models take), a triangle with unit normal n̂ and area A
takes the acceleration (w · n̂) n̂, and a vertex the area-weighted mean over its cloth triangles:

    a_i = Σ_t A_t (w · n̂_t) n̂_t / Σ_t A_t

A sheet facing the wind takes all of it, a sheet edge-on none, so a flag swings towards the wind's
direction and flutters about it instead of being dragged like a weight. The force is explicit: the normals
are those at the start of the substep, and it enters the inertial prediction q̃ = q + h v + h² (g + a).
Strengths are accelerations (the fast hair models' convention), so a face-on sheet under strength s
accelerates like under gravity s.
"""

from __future__ import annotations

import numpy as np

from ..wind import WindField, WindSettings
from .faces import ClothFaces


class ClothWind:
    """Wind accelerations of the cloth objects of a merged PD model that have wind.

    faces: those objects' triangles (faces.ClothFaces); field: their winds, per triangle. On the backend's device."""

    def __init__(self, backend, triangles: np.ndarray, winds: list[WindSettings], owner: np.ndarray,
                 particle_count: int):
        """winds: one per object; owner (F,): the object of every triangle."""
        self.xp = backend.xp
        self.faces = ClothFaces(backend, triangles, particle_count)
        self.field = WindField(self.xp, winds, owner)

    @classmethod
    def of_model(cls, backend, model) -> "ClothWind | None":
        """The wind of ``model``'s cloth objects (sim.model.ParticleModel), or None when none has any."""
        winds = [WindSettings.from_object_params(params, slot.id) if slot.kind == "cloth" else WindSettings()
                 for slot, params in zip(model.slots, model.params)]
        blowing = np.array([wind.blows for wind in winds], dtype=bool)
        if not blowing.any() or len(model.triangles) == 0:
            return None
        chosen = blowing[model.triangle_slot]
        return cls(backend, model.triangles[chosen], winds, model.triangle_slot[chosen], model.particle_count)

    def acceleration(self, q, time: float):
        """Wind acceleration (n, 3) [m/s²] of every particle at positions q (n, 3) [m] and ``time`` [s]
        (0 for particles on no windy cloth triangle)."""
        xp = self.xp
        unit, double_area = self.faces.normals(q)
        along = xp.sum(self.field.vectors(time) * unit, axis=1) * double_area
        weight = self.faces.incidence @ double_area
        pushed = self.faces.incidence @ (along[:, None] * unit)
        return pushed / xp.maximum(weight, 1e-300)[:, None]

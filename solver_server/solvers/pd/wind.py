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
import scipy.sparse

from ..wind import WindField, WindSettings


class ClothWind:
    """Wind accelerations of the cloth objects of a merged PD model that have wind.

    triangles (F, 3) merged particle indices of those objects' triangles; field: their winds, per triangle;
    incidence: (n, F) sparse, vertex of triangle. All on the backend's device."""

    def __init__(self, backend, triangles: np.ndarray, winds: list[WindSettings], owner: np.ndarray,
                 particle_count: int):
        """winds: one per object; owner (F,): the object of every triangle."""
        xp = backend.xp
        self.xp = xp
        self.triangles = xp.asarray(np.ascontiguousarray(triangles, dtype=np.int64))
        self.field = WindField(xp, winds, owner)
        count = len(triangles)
        incidence = scipy.sparse.csr_matrix((np.ones(3 * count), (triangles.ravel(), np.repeat(np.arange(count), 3))),
                                            shape=(particle_count, count))
        self.incidence = backend.sparse.csr_matrix(incidence) if backend.name != "cpu" else incidence

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
        a, b, c = (q[self.triangles[:, k]] for k in range(3))
        normal = xp.cross(b - a, c - a)
        double_area = xp.sqrt(xp.sum(normal * normal, axis=1))
        unit = normal / xp.maximum(double_area, 1e-300)[:, None]
        along = xp.sum(self.field.vectors(time) * unit, axis=1) * double_area
        weight = self.incidence @ double_area
        pushed = self.incidence @ (along[:, None] * unit)
        return pushed / xp.maximum(weight, 1e-300)[:, None]

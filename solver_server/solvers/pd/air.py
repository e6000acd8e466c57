"""Drag of still air on cloth: a sheet moving along its normal is slowed as a flat plate broadside to the flow.

A particle of mass m whose faces give it the projected area A (a third of the summed area vectors of its faces,
``faces.ClothFaces.vertex_normals``) and the unit normal n̂, moving with velocity v, feels the quadratic drag of a
flat plate on its normal component v_n = v·n̂:

    f = −½ ρ_air C_d A |v_n| v_n n̂,        C_d = 1.17 (a square plate broadside to the flow, Hoerner 1965).

Inside the PD solve the drag is a force on the iterate, linear in the step's normal velocity with the rate
c = air_drag · ½ ρ_air C_d (A / m) |v_n| lagged from the substep's start: f = −m c ((q − q_t)/h · n̂) n̂, added to
the right-hand side of every iteration with the contact forces, so contact and drag settle together instead of
one undoing the other after the solve. The tangential component is left alone (skin friction is two orders
smaller). A sheet of areal density σ falling flat reaches √(2 σ g / (ρ_air C_d)): 1.7 m/s for 0.2 kg/m², 0.9 m/s
for silk at 0.06; edge-on it falls freely.
"""

from __future__ import annotations

import numpy as np

from ...kernels.air import AIR_DENSITY
from .faces import ClothFaces

PLATE_DRAG_COEFFICIENT = 1.17
"""C_d of a square flat plate broadside to the flow at the Reynolds numbers of moving cloth (10³–10⁵)."""


class ClothAirDrag:
    """Still-air drag of the cloth objects of a merged PD model: faces (ClothFaces of those objects' triangles) and
    per particle ½ ρ_air C_d × air_drag [kg/m³] (0 on pinned particles and on particles of no such object), on the
    backend's device."""

    def __init__(self, faces: ClothFaces, coefficient):
        self.faces = faces
        self.coefficient = coefficient

    @classmethod
    def of_model(cls, backend, model, pinned: np.ndarray) -> "ClothAirDrag | None":
        """The drag of ``model``'s cloth objects with ``air_drag`` > 0 (sim.model.ParticleModel), or None when none
        has it; ``pinned`` (P,): particles that never move."""
        scale = np.zeros(model.particle_count)
        for slot, params in zip(model.slots, model.params):
            if slot.kind == "cloth":
                scale[slot.start:slot.stop] = params.get("air_drag", 0.0)
        scale[pinned] = 0.0
        chosen = scale[model.triangles].max(axis=1) > 0.0 if len(model.triangles) else np.zeros(0, dtype=bool)
        if not chosen.any():
            return None
        coefficient = 0.5 * AIR_DENSITY * PLATE_DRAG_COEFFICIENT * scale
        return cls(ClothFaces(backend, model.triangles[chosen], model.particle_count), backend.xp.asarray(coefficient))

    def substep(self, q_start, velocities, h: float):
        """The substep's drag as a function of the iterate: (unit normals (n, 3), stiffness (n,) [N/m] = m c / h)
        from the positions q_start (n, 3) [m] and velocities (n, 3) [m/s] at its start; ``force`` takes them."""
        xp = self.faces.xp
        normal, area = self.faces.vertex_normals(q_start)
        along = xp.abs(xp.sum(velocities * normal, axis=1))
        return normal, self.coefficient * area * along / h

    @staticmethod
    def force(xp, drag, q, q_start):
        """(n, 3) [N]: the drag on the iterate q (n, 3) [m] of a substep from q_start: −k ((q − q_start)·n̂) n̂ with
        ``drag`` = (n̂, k) of ``substep``."""
        normal, stiffness = drag
        along = xp.sum((q - q_start) * normal, axis=1)
        return -(stiffness * along)[:, None] * normal

"""The contacts of one DER time step as named columns (``ContactSet``), and the row helpers the contact modules
share."""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any


@dataclass
class ContactSet:
    """n contacts, a row each (arrays of the solver's xp). Every contact joins two sides through four vertex
    slots: rod A's edge in slots 0–1, and rod B's edge in slots 2–3, or for a collider contact the same point
    again (weights 0) with the collider's surface as side B.

    vertices (n, 4) int64: the slots' vertices; weights (n, 4): their interpolation weights (side B's
    negative, so Σ w v is A's velocity less B's); kind_edge (n,) bool: a pair of rod edges; normal (n, 3): unit,
    from B to A; target_normal (n,) [m/s]: the normal relative velocity that ends the step at the contact
    distance; surface_velocity (n, 3) [m/s]: the collider surface's (0 for a pair); mu (n,): the Coulomb
    friction coefficient; radius_scale (n,) [m]: the (smaller) hair radius that penetrations are measured
    in; keys (n,) int64: the contact's identity across steps (warm start) and within one (the end check)."""

    vertices: Any
    weights: Any
    kind_edge: Any
    normal: Any
    target_normal: Any
    surface_velocity: Any
    mu: Any
    radius_scale: Any
    keys: Any

    @classmethod
    def empty(cls, xp) -> "ContactSet":
        return cls(vertices=xp.zeros((0, 4), dtype=xp.int64), weights=xp.zeros((0, 4)),
                   kind_edge=xp.zeros(0, dtype=bool), normal=xp.zeros((0, 3)), target_normal=xp.zeros(0),
                   surface_velocity=xp.zeros((0, 3)), mu=xp.zeros(0), radius_scale=xp.ones(0),
                   keys=xp.zeros(0, dtype=xp.int64))

    @property
    def count(self) -> int:
        return int(self.vertices.shape[0])

    def columns(self) -> dict:
        return {field.name: getattr(self, field.name) for field in fields(self)}

    def subset(self, rows) -> "ContactSet":
        """The contacts at ``rows`` (a bool mask (n,) or an index array)."""
        return ContactSet(**{name: column[rows] for name, column in self.columns().items()})

    def with_columns(self, **columns) -> "ContactSet":
        """A copy with the named columns replaced."""
        return replace(self, **columns)

    @staticmethod
    def concatenate(xp, sets) -> "ContactSet | None":
        """The rows of ``sets`` in order (None and empty sets skipped); None when no row is left."""
        sets = [found for found in sets if found is not None and found.count]
        if not sets:
            return None
        return ContactSet(**{field.name: xp.concatenate([getattr(found, field.name) for found in sets])
                             for field in fields(ContactSet)})


def rows_dot(xp, a, b):
    """Row-wise dot products (n,) of (n, 3) arrays."""
    return xp.einsum("nc,nc->n", a, b)


def normalize(xp, vectors):
    """Rows of (n, 3) ``vectors`` scaled to unit length (zero rows stay zero)."""
    return vectors / xp.maximum(xp.linalg.norm(vectors, axis=1, keepdims=True), 1e-300)

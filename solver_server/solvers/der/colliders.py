"""Kinematic colliders as seen by the DER contact solver.

The contact solver accepts any object with
    signed_distance(xp, points (n, 3)) -> (distance (n,) [m], positive outside; outward unit normal (n, 3))
and optionally `velocity(xp, points) -> (n, 3)` [m/s] (surface velocity, zero if absent), `friction` (μ) and
`thickness` [m].  `solver_server.collision.Collider` objects (geometry + per-substep pose) are adapted by
`adapt_collider`, which turns their per-substep surface displacement into a velocity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class ColliderView:
    """Uniform view used by contact.py: distance/normal, surface velocity, friction, thickness."""
    source: Any
    friction: float | None
    thickness: float

    def signed_distance(self, xp, points):
        return self.source.signed_distance(xp, points)

    def velocity(self, xp, points, dt: float):
        if hasattr(self.source, "velocity"):
            return self.source.velocity(xp, points)
        return xp.zeros_like(points)


@dataclass
class _CollisionPackageCollider:
    """Adapter for solver_server.collision.Collider (geometry moved by set_pose every substep)."""
    collider: Any

    def signed_distance(self, xp, points):
        return self.collider.geometry.signed_distance(xp, points)


class _MovingColliderView(ColliderView):
    def velocity(self, xp, points, dt: float):
        collider = self.source.collider
        if getattr(collider, "is_mesh", False):
            # A mesh reports the motion of the material nearest to the rows of its last distance query:
            # query exactly these points first.
            collider.geometry.signed_distance(xp, points)
            return collider.surface_motion(xp, points, np.ones(len(points), bool)) / dt
        return collider.surface_motion(xp, points) / dt


def adapt_collider(collider) -> ColliderView:
    """ColliderView for a duck-typed collider or a solver_server.collision.Collider."""
    if hasattr(collider, "geometry") and hasattr(collider, "surface_motion"):
        return _MovingColliderView(_CollisionPackageCollider(collider), getattr(collider, "friction", None),
                                   float(getattr(collider, "thickness", 0.0)))
    if not hasattr(collider, "signed_distance"):
        raise TypeError(f"collider {collider!r} has no signed_distance(xp, points) method")
    return ColliderView(collider, getattr(collider, "friction", None), float(getattr(collider, "thickness", 0.0)))

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

    def near_distance(self, xp, points, reach: float):
        """``signed_distance`` for a caller that needs only the distances below ``reach`` [m] (a host bound): a
        collider may give inf beyond it (a mesh then searches its tree within reach only)."""
        return self.signed_distance(xp, points)

    def velocity(self, xp, points, dt: float):
        if hasattr(self.source, "velocity"):
            return self.source.velocity(xp, points)
        return xp.zeros_like(points)

    def start_in_end_pose(self, xp, points, dt: float):
        """Points (n, 3) at the step start carried with the collider's motion over the step (first order)."""
        return points + dt * self.velocity(xp, points, dt)

    def mesh_motion(self):
        """(previous vertices (V, 3), current vertices (V, 3), triangles (F, 3)) of a triangle mesh, else None."""
        return None

    def mesh_geometry(self):
        """The collision.mesh.MeshGeometry of a triangle-mesh collider (posed for the substep), else None."""
        return None

    def path_reaches_mesh(self, xp, start, end, reach):
        """(n,) bool: the paths start → end (n, 3) [m] that cross a triangle mesh's moving surface or end nearer
        to it than reach (n,) [m] (a broad test; every path for a collider that is no mesh)."""
        return xp.ones(start.shape[0], dtype=bool)

    def depth_inside(self, xp, points):
        """(n,) [m] how deep points (n, 3) lie inside the collider's solid (0 outside): −signed distance."""
        distance, _ = self.signed_distance(xp, points)
        return xp.maximum(-distance, 0.0)


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

    def near_distance(self, xp, points, reach: float):
        collider = self.source.collider
        if getattr(collider, "is_mesh", False):
            return collider.geometry.signed_distance(xp, points, reach)
        return self.signed_distance(xp, points)

    def start_in_end_pose(self, xp, points, dt: float):
        """Exact for a rigidly moving primitive: matrix · matrix_previous⁻¹ applied to the points."""
        collider = self.source.collider
        if getattr(collider, "is_mesh", False) or np.array_equal(collider.matrix, collider.matrix_previous):
            return points
        carry = collider.matrix @ np.linalg.inv(collider.matrix_previous)
        return points @ xp.asarray(carry[:3, :3].T, dtype=points.dtype) + xp.asarray(carry[:3, 3], dtype=points.dtype)

    def depth_inside(self, xp, points):
        """A mesh's distances are unsigned (its side comes from CCD): inside means inside a closed shell by
        the generalized winding number (every shell wound outward), the depth is the distance to its surface."""
        collider = self.source.collider
        if not getattr(collider, "is_mesh", False):
            return super().depth_inside(xp, points)
        surface, inside = collider.geometry.recover_inside(xp, points, xp.zeros(points.shape[0]))
        return xp.where(inside, xp.linalg.norm(surface - points, axis=1), 0.0)

    def mesh_motion(self):
        collider = self.source.collider
        if not getattr(collider, "is_mesh", False):
            return None
        geometry = collider.geometry
        return geometry.previous, geometry.vertices, geometry.triangles

    def mesh_geometry(self):
        collider = self.source.collider
        return collider.geometry if getattr(collider, "is_mesh", False) else None

    def path_reaches_mesh(self, xp, start, end, reach):
        collider = self.source.collider
        if not getattr(collider, "is_mesh", False):
            return super().path_reaches_mesh(xp, start, end, reach)
        _, push, _, _, _ = collider.geometry.resolve(xp, start, end, reach)
        return push > 0.0


def adapt_collider(collider) -> ColliderView:
    """ColliderView for a duck-typed collider or a solver_server.collision.Collider."""
    if hasattr(collider, "geometry") and hasattr(collider, "surface_motion"):
        return _MovingColliderView(_CollisionPackageCollider(collider), getattr(collider, "friction", None),
                                   float(getattr(collider, "thickness", 0.0)))
    if not hasattr(collider, "signed_distance"):
        raise TypeError(f"collider {collider!r} has no signed_distance(xp, points) method")
    return ColliderView(collider, getattr(collider, "friction", None), float(getattr(collider, "thickness", 0.0)))

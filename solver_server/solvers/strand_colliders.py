"""Colliders of the fast hair models (particles, Cosserat): analytic planes, spheres and capsules
(``AnalyticColliders``), and the scene's posed colliders through the same interface (``SceneColliders``).

Signed distances are vectorized over points and colliders (a loop runs over the three
shape *types* only). World space, meters. Scene primitives arrive in local space with a
``matrix_world`` (ARCHITECTURE §2); ``AnalyticColliders.from_scene`` maps them to world space.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from solver_server.collision.mesh import CREASE_PASSES
from solver_server.collision.primitive_kernels import CONTACT_SKIN
from solver_server.sim.errors import SceneError

SUPPORTED_SHAPES = ("plane", "sphere", "capsule")


def _empty(shape):
    return np.zeros(shape, np.float64)


@dataclass
class AnalyticColliders:
    """World-space analytic colliders (host or device arrays, float64).

    plane_points (Np, 3), plane_normals (Np, 3) unit, solid below the plane;
    sphere_centers (Ns, 3), sphere_radii (Ns,);
    capsule_a (Nc, 3), capsule_b (Nc, 3) axis end points, capsule_radii (Nc,).
    friction: one Coulomb μ for all (the largest of the scene's colliders).
    ignored: ids of scene colliders whose shape these models cannot use (reported in stats).
    """

    plane_points: np.ndarray = field(default_factory=lambda: _empty((0, 3)))
    plane_normals: np.ndarray = field(default_factory=lambda: _empty((0, 3)))
    sphere_centers: np.ndarray = field(default_factory=lambda: _empty((0, 3)))
    sphere_radii: np.ndarray = field(default_factory=lambda: _empty((0,)))
    capsule_a: np.ndarray = field(default_factory=lambda: _empty((0, 3)))
    capsule_b: np.ndarray = field(default_factory=lambda: _empty((0, 3)))
    capsule_radii: np.ndarray = field(default_factory=lambda: _empty((0,)))
    friction: float = 0.3
    ignored: tuple = ()

    @property
    def count(self) -> int:
        return int(len(self.plane_points) + len(self.sphere_centers) + len(self.capsule_a))

    def resolve(self, positions, velocities, radius, xp=np, start=None, interval=(0.0, 1.0)):
        """Push points out and apply friction (see :func:`resolve_contacts`; analytic shapes have an
        inside and do not move within a step, so ``start`` and ``interval`` are not needed)."""
        return resolve_contacts(positions, velocities, radius, self, xp)

    def contact(self, points, reach, xp=np, start=None, interval=(0.0, 1.0)):
        """Points (..., 3) [m] closer than ``reach`` [m] (scalar or per point) to a collider surface (see ``SceneColliders.contact``;
        analytic shapes have an inside and do not move within a step, so ``start`` and ``interval`` are not
        needed). Returns (depth (...) [m], 0 where free; normal (..., 3); surface_motion (..., 3), zero;
        projected (..., 3): the points moved out to ``reach``; touching (...) bool: within ``reach`` plus
        CONTACT_SKIN, so a point pushed out to its reach still touches)."""
        distance, normal = self.signed_distance(points, xp)
        gap = reach - distance
        touching = gap > -CONTACT_SKIN
        depth = xp.maximum(gap, 0.0)
        normal = xp.where(touching[..., None], normal, 0.0)
        return depth, normal, xp.zeros_like(points), points + depth[..., None] * normal, touching

    def resolve_edges(self, start, points, segments, radius, free, xp=np, interval=(0.0, 1.0)):
        """(points, 0): a segment cannot pass an analytic shape without one of its points entering it, which
        ``resolve`` pushes out (see ``SceneColliders.resolve_edges``)."""
        return points, 0

    def recover_inside(self, points, reach, xp=np):
        """(points, recovered (...) bool): analytic shapes have an inside that ``contact`` pushes out of
        already, so nothing is recovered here (see ``SceneColliders.recover_inside``)."""
        return points, xp.zeros(points.shape[:-1], dtype=bool)

    def to_device(self, xp) -> "AnalyticColliders":
        """Copy of this set with its arrays on the device of ``xp``."""
        arrays = {name: xp.asarray(getattr(self, name)) for name in (
            "plane_points", "plane_normals", "sphere_centers", "sphere_radii",
            "capsule_a", "capsule_b", "capsule_radii")}
        return AnalyticColliders(**arrays, friction=self.friction, ignored=self.ignored)

    def signed_distance(self, points, xp=np):
        """Distance to the nearest collider surface and its outward normal.

        points: (..., 3) [m]. Returns (distance (...), normal (..., 3)); distance < 0 inside.
        With no colliders the distance is +inf.
        """
        flat = points.reshape(-1, 3)
        best = xp.full(flat.shape[0], xp.inf)
        best_normal = xp.zeros_like(flat)
        candidates = []
        if len(self.plane_points):
            offset = flat[:, None, :] - self.plane_points[None]                      # (N, Np, 3)
            dist = xp.einsum("npk,pk->np", offset, self.plane_normals)
            normal = xp.broadcast_to(self.plane_normals[None], offset.shape)
            candidates.append((dist, normal))
        if len(self.sphere_centers):
            offset = flat[:, None, :] - self.sphere_centers[None]
            candidates.append(_round_distance(offset, self.sphere_radii, xp))
        if len(self.capsule_a):
            axis = self.capsule_b - self.capsule_a                                    # (Nc, 3)
            length2 = xp.maximum(xp.sum(axis * axis, axis=-1), 1e-30)
            rel = flat[:, None, :] - self.capsule_a[None]
            t = xp.clip(xp.einsum("nck,ck->nc", rel, axis) / length2, 0.0, 1.0)
            offset = rel - t[..., None] * axis[None]
            candidates.append(_round_distance(offset, self.capsule_radii, xp))
        for dist, normal in candidates:
            index = xp.argmin(dist, axis=1)
            rows = xp.arange(flat.shape[0])
            nearest = dist[rows, index]
            closer = nearest < best
            best = xp.where(closer, nearest, best)
            best_normal = xp.where(closer[:, None], normal[rows, index], best_normal)
        return best.reshape(points.shape[:-1]), best_normal.reshape(points.shape)

    @classmethod
    def from_scene(cls, colliders: list[dict]) -> "AnalyticColliders":
        """World-space set from scene collider objects.

        Each item: {"id", "shape": {"type": ..., local parameters}, "matrix_world": (4, 4),
        "params": {"friction", "thickness"}}. Mesh colliders and box/torus primitives are not
        used by the fast models; their ids are listed in ``ignored``. Spheres under non-uniform
        scale use the largest axis scale (ARCHITECTURE §2). A collider's ``thickness`` grows it.
        """
        planes_p, planes_n, sph_c, sph_r, cap_a, cap_b, cap_r = [], [], [], [], [], [], []
        ignored, frictions = [], []
        for obj in colliders:
            shape = obj.get("shape")
            object_id = obj.get("id")
            if not isinstance(shape, dict) or shape.get("type") not in SUPPORTED_SHAPES:
                ignored.append(object_id)
                continue
            matrix = np.asarray(obj.get("matrix_world", np.eye(4)), np.float64)
            linear, translation = matrix[:3, :3], matrix[:3, 3]
            scale = float(np.max(np.linalg.norm(linear, axis=0)))
            params = obj.get("params") or {}
            thickness = float(params.get("thickness", 0.0))
            frictions.append(float(params.get("friction", 0.3)))
            try:
                kind = shape["type"]
                if kind == "plane":
                    normal = np.linalg.inv(linear).T @ np.asarray(shape.get("normal", (0, 0, 1)), np.float64)
                    norm = np.linalg.norm(normal)
                    if norm == 0:
                        raise SceneError("plane normal is zero", object=object_id)
                    point = linear @ np.asarray(shape.get("point", (0, 0, 0)), np.float64) + translation
                    planes_n.append(normal / norm)
                    planes_p.append(point + thickness * normal / norm)
                elif kind == "sphere":
                    sph_c.append(linear @ np.asarray(shape["center"], np.float64) + translation)
                    sph_r.append(float(shape["radius"]) * scale + thickness)
                else:
                    cap_a.append(linear @ np.asarray(shape["a"], np.float64) + translation)
                    cap_b.append(linear @ np.asarray(shape["b"], np.float64) + translation)
                    cap_r.append(float(shape["radius"]) * scale + thickness)
            except (KeyError, TypeError, ValueError) as exc:
                raise SceneError(f"collider shape {shape!r} is malformed ({exc})", object=object_id) from exc

        def stack(items, width):
            return np.asarray(items, np.float64).reshape((-1, width) if width else (-1,))

        return cls(stack(planes_p, 3), stack(planes_n, 3), stack(sph_c, 3), stack(sph_r, 0),
                   stack(cap_a, 3), stack(cap_b, 3), stack(cap_r, 0),
                   friction=max(frictions) if frictions else 0.3, ignored=tuple(ignored))


def _round_distance(offset, radii, xp):
    """Signed distance to spheres of ``radii`` around the offset origins: ((N, M), (N, M, 3))."""
    length = xp.sqrt(xp.sum(offset * offset, axis=-1))
    fallback = xp.zeros_like(offset)
    fallback[..., 2] = 1.0
    normal = xp.where(length[..., None] > 1e-12, offset / xp.maximum(length, 1e-12)[..., None], fallback)
    return length - radii[None], normal


def resolve_contacts(positions, velocities, radius, colliders: AnalyticColliders, xp=np):
    """Push points out of the colliders and apply Coulomb friction to their velocity.

    positions, velocities: (..., 3) [m], [m/s], modified copies are returned; radius: point
    radius [m] (scalar or broadcastable). The inward normal velocity is removed; the tangential
    velocity is reduced by μ·|removed normal velocity| (static when it would reverse).
    Returns (positions, velocities, contact_count (0-d device array), normals (..., 3): the unit contact normal
    of the points pushed, zero elsewhere).
    """
    if colliders.count == 0:
        return positions, velocities, xp.zeros((), dtype=xp.int64), xp.zeros_like(positions)
    distance, normal = colliders.signed_distance(positions, xp)
    depth = radius - distance
    touching = depth > 0.0
    positions = positions + xp.where(touching[..., None], depth[..., None] * normal, 0.0)
    normal_speed = xp.sum(velocities * normal, axis=-1)
    approaching = touching & (normal_speed < 0.0)
    tangential = velocities - normal_speed[..., None] * normal
    tangential_speed = xp.sqrt(xp.sum(tangential * tangential, axis=-1))
    keep = xp.clip(1.0 - colliders.friction * (-normal_speed) / xp.maximum(tangential_speed, 1e-12), 0.0, 1.0)
    new_velocities = xp.where(approaching[..., None], tangential * keep[..., None], velocities)
    return positions, new_velocities, touching.sum(), xp.where(touching[..., None], normal, 0.0)


class SceneColliders:
    """Adapter giving the fast hair models the scene's colliders (``solver_server.collision``,
    posed by the Simulation for every substep) through the same interface as :class:`AnalyticColliders`:
    ``count``, ``friction``, ``ignored``, ``to_device``, ``contact`` and ``resolve``.
    Every collider type of the scene (plane, sphere, box, torus, mesh) is used."""

    def __init__(self, scene_set, friction: float):
        self.scene_set = scene_set
        self.friction = friction
        self.ignored = ()

    @property
    def count(self) -> int:
        return len(self.scene_set)

    def to_device(self, xp) -> "SceneColliders":
        return self

    def resolve_edges(self, start, points, segments, radius, free, xp=np, interval=(0.0, 1.0)):
        """Segments of points (S, P, 3) [m] (moved from ``start`` during the step, while the meshes move over
        ``interval``, fractions of the substep) that a mesh collider's edge
        crossed, or comes within ``radius`` [m] of, moved back to their side (``collision.ColliderSet
        .resolve_edges``, one Jacobi pass of cloth's edge–edge CCD); ``segments``: Warp int32 (E, 2) view of
        the flat point indices; ``free`` (S, P) bool: the points that move. Returns (points, segments moved: a
        0-d device array)."""
        if not self.scene_set.has_meshes:
            return points, xp.zeros((), dtype=xp.int32)
        shape = points.shape
        flat = xp.ascontiguousarray(points.reshape(-1, 3), dtype=xp.float64)
        count = flat.shape[0]
        correction, touched, counts, _ = self.scene_set.resolve_edges(
            xp, start.reshape(-1, 3), flat, segments, xp.full(count, float(radius)),
            xp.ascontiguousarray(xp.asarray(free, dtype=xp.float64).reshape(-1)), interval)
        return (flat + xp.where(touched[:, None], correction, 0.0)).reshape(shape), counts[0]

    def recover_inside(self, points, reach, xp=np):
        """Points (..., 3) [m] inside a closed mesh shell (generalized winding number, every shell wound outward:
        flipped shells count) moved ``reach`` [m] (scalar) beyond its nearest surface
        (``collision.ColliderSet.recover_inside``), for points whose side a mesh's CCD kept wrongly (carried in
        where the head's shells overlap, or started inside).
        Returns (points, recovered (...) bool)."""
        shape = points.shape
        flat = xp.ascontiguousarray(points.reshape(-1, 3))
        moved, recovered = self.scene_set.recover_inside(xp, flat, xp.full(flat.shape[0], float(reach)))
        return moved.reshape(shape), recovered.reshape(shape[:-1])

    def contact(self, points, reach, xp=np, start=None, interval=(0.0, 1.0)):
        """Points (..., 3) [m] closer than ``reach`` [m] (scalar or per point, (...)) plus each collider's
        thickness to a collider surface,
        on the side each came from: ``start`` (..., 3) [m] are the same points earlier, known to be on their
        side (a mesh is two-sided: a point whose path start → points crossed it since is pushed back, by CCD
        against the triangles moving over ``interval``, the part of the substep between the two; see
        ``collision.ColliderSet.project``); None: only points closer than ``reach`` count, pushed along their
        own gap direction. Returns (depth (...) [m] normal push to ``reach`` on the point's side, 0 where
        free; normal (..., 3) unit towards that side; surface_motion (..., 3) [m] of the touched surface over
        the whole substep; projected (..., 3): the points moved out, on their side, a valid ``start`` for the
        next query; touching (...) bool: the points a collider touched, with zero depth within its
        CONTACT_SKIN)."""
        shape = points.shape
        flat = points.reshape(-1, 3)
        count = flat.shape[0]
        reach = xp.ascontiguousarray(xp.broadcast_to(xp.asarray(reach, dtype=xp.float64), shape[:-1]).reshape(-1))
        projected, contacts = self.scene_set.project(
            xp, flat, reach, xp.full(count, self.friction), None if start is None else start.reshape(-1, 3), interval,
            CREASE_PASSES)
        mask = contacts.mask[:, None]
        return (xp.where(contacts.mask, contacts.depth, 0.0).reshape(shape[:-1]),
                xp.where(mask, contacts.normal, 0.0).reshape(shape),
                xp.where(mask, contacts.surface_motion, 0.0).reshape(shape), projected.reshape(shape),
                contacts.mask.reshape(shape[:-1]))

    def resolve(self, positions, velocities, radius, xp=np, start=None, interval=(0.0, 1.0)):
        """Project (..., 3) points out of the scene colliders (collision.ColliderSet.project; ``start``:
        the points at the start of the step, so mesh colliders keep each point on its side, while the mesh
        moves over ``interval``, the part of the substep the step covers) and apply Coulomb friction to their
        velocities; returns (positions, velocities, contacts (0-d device array), normals (..., 3): the unit contact
        normal of the points pushed, zero elsewhere). No host read: a point without contact keeps its velocity
        through the same arithmetic. Mesh colliders keep no candidate lists for it: a particle step queries its
        paths from one start twice, and lists built at the second query were never used again."""
        shape = positions.shape
        flat = positions.reshape(-1, 3)
        count = flat.shape[0]
        projected, contacts = self.scene_set.project(
            xp, flat, xp.full(count, float(radius)), xp.full(count, self.friction),
            None if start is None else start.reshape(-1, 3), interval,
            CREASE_PASSES, lists=None)
        flat_velocities = velocities.reshape(-1, 3)
        normal = contacts.normal
        normal_speed = xp.sum(flat_velocities * normal, axis=-1)
        tangential = flat_velocities - normal_speed[:, None] * normal
        speed = xp.sqrt(xp.sum(tangential * tangential, axis=-1))
        keep = xp.clip(1.0 - contacts.friction * xp.maximum(-normal_speed, 0.0) / xp.maximum(speed, 1e-12), 0.0, 1.0)
        touched = contacts.mask & (normal_speed < 0.0)
        new_velocities = xp.where(touched[:, None], tangential * keep[:, None], flat_velocities)
        normals = xp.where(contacts.mask[:, None], normal, 0.0)
        return projected.reshape(shape), new_velocities.reshape(shape), contacts.count, normals.reshape(shape)

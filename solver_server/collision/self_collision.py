"""Vertex–triangle contact between PD surfaces: cloth self-collision and contact between objects.

Works on the collision points y = C q of a ``solvers.pd.contact.ContactPoints`` map (cloth and
directly simulated soft bodies: their particles; lattice-embedded soft bodies: their surface
vertices), so the same pass handles cloth folding onto itself, cloth on a soft body and two soft
bodies touching. Triangles are the objects' surfaces (cloth triangles, soft-body boundary).
Pairs of the same object are skipped unless the object is a cloth with ``self_collision``.

For every point, the 16 triangles with the nearest centroids on each surface it may touch (one k-d
tree per object surface, rebuilt per pass) are candidates; triangles containing the point are skipped. A pair is in contact when the point is
closer than d = its thickness + the triangle's thickness, or when it crossed the triangle's face
during the substep (its side changed while its closest point is inside the triangle). The SIDE the point belongs on is taken
from the positions at the start of the substep, so a point that passed through a triangle during
the step is pulled back, not pushed further. The separation error is removed as in position-based
dynamics: λ = error / (w_p + Σ b_i² w_i) with inverse masses w (pinned: 0) and barycentric b; the
point moves by +λ w_p n, the triangle corners by −λ b_i w_i n. Corrections are averaged per point
(Jacobi), carried to the particles through C, and the pass is repeated ``iterations`` times.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from ..sim.model import ParticleModel
from .mesh import closest_points_on_triangles


class SurfaceContact:
    """points: a ContactPoints map; iterations: passes per substep."""

    def __init__(self, model: ParticleModel, points, iterations: int = 2, neighbours: int = 16):
        triangles, owner, self_contact = [], [], []
        point_owner = np.zeros(points.count, np.int64)
        for slot_index, slot in enumerate(model.slots):
            offset = points.row_offsets[slot_index]
            rows = (points.row_offsets[slot_index + 1] if slot_index + 1 < len(model.slots) else points.count) - offset
            point_owner[offset:offset + rows] = slot_index
            triangles.append(slot.surface_triangles + offset)
            owner.append(np.full(len(slot.surface_triangles), slot_index))
            if slot.kind == "cloth" and model.params[slot_index].get("self_collision"):
                self_contact.append(slot_index)
        self.points = points
        self.triangles = np.concatenate(triangles).astype(np.int64)
        self.triangle_owner = np.concatenate(owner)
        self.point_owner = point_owner
        self.self_contact = np.isin(np.arange(len(model.slots)), self_contact)
        host = lambda a: np.asarray(a.get() if hasattr(a, "get") else a)  # noqa: E731
        gain = host(points.gain)
        self.inverse_mass = np.where(gain > 0, 1.0 / np.maximum(gain, 1e-300), 0.0)   # ∝ 1/m (h² cancels)
        self.thickness = host(points.thickness)
        self.iterations = iterations
        self.neighbours = min(neighbours, len(self.triangles))
        self.count = points.count

    @staticmethod
    def wanted(model: ParticleModel) -> bool:
        """Run the pass when there are several PD objects or a cloth asks for self-collision."""
        return len(model.slots) > 1 or any(
            slot.kind == "cloth" and model.params[i].get("self_collision") for i, slot in enumerate(model.slots))

    def resolve(self, xp, positions, start):
        """Returns (positions, number of point–triangle contacts corrected in the worst pass)."""
        if len(self.triangles) == 0 or self.iterations == 0:
            return positions, 0
        on_device = not isinstance(positions, np.ndarray)
        start_points = self.points.points(start)
        y0 = np.asarray(start_points.get() if on_device else start_points, dtype=float)
        total = 0
        for _ in range(self.iterations):
            current = self.points.points(positions)
            y = np.asarray(current.get() if on_device else current, dtype=float)
            delta, touched, count = self._pass(y, y0)
            total = max(total, count)
            if count == 0:
                break
            positions = self.points.distribute(positions, xp.asarray(delta), xp.asarray(touched))
        return positions, total

    def _pass(self, y, y0):
        tri = self.triangles
        reach = 2.0 * self.thickness.max() + float(np.abs(y - y0).max())  # a point may cross within a step
        points, triangles = [], []
        for owner in np.unique(self.triangle_owner):          # one k-d tree per object surface
            owned = np.nonzero(self.triangle_owner == owner)[0]
            corners = y[tri[owned]]
            centroids = corners.mean(axis=1)
            max_radius = np.linalg.norm(corners - centroids[:, None, :], axis=2).max()
            queried = np.nonzero((self.point_owner != owner) | self.self_contact[owner])[0]
            if len(queried) == 0:
                continue
            k = min(self.neighbours, len(owned))
            distance, nearest = cKDTree(centroids).query(y[queried], k=k, distance_upper_bound=reach + max_radius)
            distance, nearest = distance.reshape(len(queried), k), nearest.reshape(len(queried), k)
            valid = np.isfinite(distance)
            points.append(np.repeat(queried, k).reshape(len(queried), k)[valid])
            triangles.append(owned[nearest[valid]])
        point = np.concatenate(points) if points else np.zeros(0, np.int64)
        triangle = np.concatenate(triangles) if triangles else np.zeros(0, np.int64)
        keep = ~(tri[triangle] == point[:, None]).any(axis=1)
        point, triangle = point[keep], triangle[keep]
        empty = (np.zeros_like(y), np.zeros(len(y), bool), 0)
        if len(point) == 0:
            return empty
        a, b, c = (y[tri[triangle, k]] for k in range(3))
        closest, bary = closest_points_on_triangles(y[point], a, b, c)
        gap = y[point] - closest
        separation = self.thickness[point] + self.thickness[tri[triangle]].max(axis=1)
        normal = np.cross(b - a, c - a)
        normal /= np.maximum(np.linalg.norm(normal, axis=1), 1e-30)[:, None]
        a0, b0, c0 = (y0[tri[triangle, k]] for k in range(3))
        normal0 = np.cross(b0 - a0, c0 - a0)
        closest0 = bary[:, :1] * a0 + bary[:, 1:2] * b0 + bary[:, 2:] * c0
        side = np.sign(((y0[point] - closest0) * normal0).sum(axis=1))
        height = (gap * normal).sum(axis=1)
        current = np.sign(height)
        side = np.where(side == 0, np.where(current == 0, 1.0, current), side)
        # in contact: closer than the separation, or crossed through the face during the substep
        distance = np.linalg.norm(gap, axis=1)
        # projection inside the (closed) triangle: the gap is along the normal
        crossed = (side != current) & (np.abs(height) >= (1.0 - 1e-9) * distance)
        active = (distance < separation) | crossed
        error = separation - side * height
        active &= error > 0
        point, triangle, bary, normal, side, error = (x[active] for x in (point, triangle, bary, normal, side, error))
        if len(point) == 0:
            return empty
        corners_index = tri[triangle]
        w_point = self.inverse_mass[point]
        w_corner = self.inverse_mass[corners_index]
        denominator = w_point + (bary**2 * w_corner).sum(axis=1)
        lam = np.where(denominator > 0, error / np.maximum(denominator, 1e-300), 0.0)
        direction = side[:, None] * normal
        correction = np.zeros_like(y)
        counts = np.zeros(len(y))
        moves = [(point, (lam * w_point)[:, None] * direction)]
        for k in range(3):
            moves.append((corners_index[:, k], -(lam * bary[:, k] * w_corner[:, k])[:, None] * direction))
        for index, delta in moves:
            for axis in range(3):
                correction[:, axis] += np.bincount(index, weights=delta[:, axis], minlength=len(y))
            counts += np.bincount(index, minlength=len(y))
        touched = counts > 0
        return correction / np.maximum(counts, 1.0)[:, None], touched, len(point)

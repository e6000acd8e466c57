"""Vertex–triangle contact between PD surfaces: cloth self-collision and contact between objects.

Works on the collision points y = C q of a ``solvers.pd.contact.ContactPoints`` map (cloth and
directly simulated soft bodies: their particles; lattice-embedded soft bodies: their surface
vertices), so the same pass handles cloth folding onto itself, cloth on a soft body and two soft
bodies touching. Triangles are the objects' surfaces (cloth triangles, soft-body boundary).
Pairs of the same object are skipped unless the object is a cloth with ``self_collision``.

For every point, the 16 triangles with the nearest centroids on each surface it may touch are candidates
(``backend.nearest_within`` per object surface, every pass: scipy's k-d tree on numpy arrays, the
``xp`` hash grid on a device, so a GPU pass never copies positions to the host); triangles containing
the point are skipped. A pair is in contact when the point is
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

from ..backend import nearest_within
from ..sim.model import ParticleModel
from .mesh import closest_points_on_triangles


class SurfaceContact:
    """points: a ContactPoints map (its ``xp`` is the device of every array here); iterations: passes per substep."""

    def __init__(self, model: ParticleModel, points, iterations: int = 2, neighbours: int = 16):
        xp = points.xp
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
        triangles = np.concatenate(triangles).astype(np.int64)
        triangle_owner = np.concatenate(owner)
        self_contact = np.isin(np.arange(len(model.slots)), self_contact)
        # per object surface: its triangles and the points that may touch it (host index lists -> device once)
        self.surfaces = []
        for surface_owner in np.unique(triangle_owner):
            queried = np.nonzero((point_owner != surface_owner) | self_contact[surface_owner])[0]
            if len(queried):
                self.surfaces.append((xp.asarray(np.nonzero(triangle_owner == surface_owner)[0]), xp.asarray(queried)))
        self.points = points
        self.xp = xp
        self.triangles = xp.asarray(triangles)
        gain = points.gain
        self.inverse_mass = xp.where(gain > 0, 1.0 / xp.maximum(gain, 1e-300), 0.0)   # ∝ 1/m (h² cancels)
        self.thickness = points.thickness
        self.largest_thickness = float(points.thickness.max()) if points.count else 0.0
        self.iterations = iterations
        self.neighbours = min(neighbours, len(triangles))
        self.count = points.count

    @staticmethod
    def wanted(model: ParticleModel) -> bool:
        """Run the pass when there are several PD objects or a cloth asks for self-collision."""
        return len(model.slots) > 1 or any(
            slot.kind == "cloth" and model.params[i].get("self_collision") for i, slot in enumerate(model.slots))

    def resolve(self, xp, positions, start):
        """Separate points from triangles: positions, start (n, 3) [m] particle positions now and at
        the substep start, on ``xp``'s device. Returns (positions, number of point–triangle contacts
        corrected in the worst pass)."""
        if self.triangles.shape[0] == 0 or self.iterations == 0:
            return positions, 0
        y0 = self.points.points(start)
        total = 0
        for _ in range(self.iterations):
            y = self.points.points(positions)
            delta, touched, count = self._pass(xp, y, y0)
            total = max(total, count)
            if count == 0:
                break
            positions = self.points.distribute(positions, delta, touched)
        return positions, total

    def _candidates(self, xp, y, y0):
        """(point (c,), triangle (c,)) candidate pairs of points y (n_c, 3) [m], y0 at the substep start."""
        tri = self.triangles
        reach = 2.0 * self.largest_thickness + xp.abs(y - y0).max()   # a point may cross within a step
        points, triangles = [], []
        for owned, queried in self.surfaces:
            corners = y[tri[owned]]
            centroids = corners.mean(axis=1)
            max_radius = xp.sqrt(((corners - centroids[:, None, :]) ** 2).sum(axis=2).max())
            query, nearest = nearest_within(xp, y[queried], centroids, reach + max_radius, self.neighbours)
            points.append(queried[query])
            triangles.append(owned[nearest])
        point = xp.concatenate(points) if points else xp.zeros(0, dtype=xp.int64)
        triangle = xp.concatenate(triangles) if triangles else xp.zeros(0, dtype=xp.int64)
        keep = xp.nonzero(~(tri[triangle] == point[:, None]).any(axis=1))[0]
        return point[keep], triangle[keep]

    def _pass(self, xp, y, y0):
        """One Jacobi pass: (correction (n_c, 3) [m], touched (n_c,) bool, number of contacts)."""
        tri = self.triangles
        point, triangle = self._candidates(xp, y, y0)
        empty = (xp.zeros_like(y), xp.zeros(y.shape[0], dtype=bool), 0)
        if point.shape[0] == 0:
            return empty
        a, b, c = (y[tri[triangle, k]] for k in range(3))
        closest, bary = closest_points_on_triangles(y[point], a, b, c, xp)
        gap = y[point] - closest
        separation = self.thickness[point] + self.thickness[tri[triangle]].max(axis=1)
        normal = xp.cross(b - a, c - a)
        normal = normal / xp.maximum(xp.sqrt((normal * normal).sum(axis=1)), 1e-30)[:, None]
        a0, b0, c0 = (y0[tri[triangle, k]] for k in range(3))
        normal0 = xp.cross(b0 - a0, c0 - a0)
        closest0 = bary[:, :1] * a0 + bary[:, 1:2] * b0 + bary[:, 2:] * c0
        side = xp.sign(((y0[point] - closest0) * normal0).sum(axis=1))
        height = (gap * normal).sum(axis=1)
        current = xp.sign(height)
        side = xp.where(side == 0, xp.where(current == 0, 1.0, current), side)
        # in contact: closer than the separation, or crossed through the face during the substep
        distance = xp.sqrt((gap * gap).sum(axis=1))
        # projection inside the (closed) triangle: the gap is along the normal
        crossed = (side != current) & (xp.abs(height) >= (1.0 - 1e-9) * distance)
        active = (distance < separation) | crossed
        error = separation - side * height
        active &= error > 0
        active = xp.nonzero(active)[0]                     # one compaction for the six arrays
        point, triangle, bary, normal, side, error = (x[active] for x in (point, triangle, bary, normal, side, error))
        if point.shape[0] == 0:
            return empty
        corners_index = tri[triangle]
        w_point = self.inverse_mass[point]
        w_corner = self.inverse_mass[corners_index]
        denominator = w_point + (bary**2 * w_corner).sum(axis=1)
        lam = xp.where(denominator > 0, error / xp.maximum(denominator, 1e-300), 0.0)
        direction = side[:, None] * normal
        # the point moves along +direction, the triangle corners against it (weighted by barycentric)
        index = xp.concatenate([point, corners_index.ravel()])                               # (4c,)
        weight = xp.concatenate([lam * w_point, -(lam[:, None] * bary * w_corner).ravel()])  # (4c,)
        corner_direction = xp.broadcast_to(direction[:, None, :], (point.shape[0], 3, 3)).reshape(-1, 3)
        move = weight[:, None] * xp.concatenate([direction, corner_direction])
        n = y.shape[0]
        correction = xp.stack([xp.bincount(index, weights=move[:, axis], minlength=n) for axis in range(3)], axis=1)
        counts = xp.bincount(index, minlength=n)
        touched = counts > 0
        return correction / xp.maximum(counts, 1)[:, None], touched, point.shape[0]

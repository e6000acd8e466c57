"""Cloth self-collision: vertex–triangle proximity, resolved after each PD substep.

For every cloth vertex (of objects with ``self_collision``) the 16 triangles with the nearest
centroids (k-d tree, rebuilt per iteration) are candidates; triangles containing the vertex are
skipped. A pair is in contact when the vertex is closer than d = thickness_vertex +
thickness_triangle to the triangle. Which SIDE the vertex belongs on is taken from the positions
at the start of the substep (so a vertex that passed through a triangle during the step is
pulled back, not pushed further). The separation error is removed as in position-based
dynamics: λ = error / (w_p + Σ b_i² w_i) with inverse masses w (pinned: 0) and barycentric b;
the vertex moves by +λ w_p n, the triangle corners by −λ b_i w_i n. Corrections of all pairs are
averaged per vertex (Jacobi) and the pass is repeated ``iterations`` times.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from ..sim.model import ParticleModel
from .mesh import closest_points_on_triangles


class SelfCollision:
    def __init__(self, model: ParticleModel, iterations: int = 2, neighbours: int = 16):
        enabled = [i for i, slot in enumerate(model.slots)
                   if slot.kind == "cloth" and model.params[i].get("self_collision")]
        mask = np.isin(model.triangle_slot, enabled)
        self.triangles = model.triangles[mask]
        self.vertices = np.unique(self.triangles)
        inverse_mass = 1.0 / model.mass
        inverse_mass[model.pin_indices[model.pin_weights >= 1.0]] = 0.0
        self.inverse_mass = inverse_mass
        self.thickness = model.thickness
        self.iterations = iterations
        self.neighbours = min(neighbours, len(self.triangles))
        self.n = model.particle_count

    def resolve(self, xp, positions, start):
        """Returns (positions, number of vertex–triangle contacts corrected)."""
        if len(self.triangles) == 0 or self.iterations == 0:
            return positions, 0
        on_device = not isinstance(positions, np.ndarray)
        q = np.array(positions.get() if on_device else positions, dtype=float)
        q0 = np.asarray(start.get() if on_device else start, dtype=float)
        total = 0
        for _ in range(self.iterations):
            q, count = self._pass(q, q0)
            total = max(total, count)
            if count == 0:
                break
        return (xp.asarray(q) if on_device else q), total

    def _pass(self, q, q0):
        tri = self.triangles
        corners = q[tri]
        centroids = corners.mean(axis=1)
        max_radius = np.linalg.norm(corners - centroids[:, None, :], axis=2).max()
        reach = 2.0 * self.thickness.max()
        tree = cKDTree(centroids)
        points = q[self.vertices]
        distance, candidates = tree.query(points, k=self.neighbours, distance_upper_bound=reach + max_radius)
        distance = distance.reshape(len(points), -1)
        candidates = candidates.reshape(len(points), -1)
        valid = np.isfinite(distance)
        vertex = np.repeat(self.vertices, candidates.shape[1]).reshape(candidates.shape)[valid]
        triangle = candidates[valid]
        own = (tri[triangle] == vertex[:, None]).any(axis=1)
        vertex, triangle = vertex[~own], triangle[~own]
        if len(vertex) == 0:
            return q, 0
        a, b, c = (q[tri[triangle, k]] for k in range(3))
        closest, bary = closest_points_on_triangles(q[vertex], a, b, c)
        gap = q[vertex] - closest
        separation = self.thickness[vertex] + self.thickness[tri[triangle]].max(axis=1)
        near = np.linalg.norm(gap, axis=1) < separation
        if not np.any(near):
            return q, 0
        vertex, triangle, bary, gap, separation = vertex[near], triangle[near], bary[near], gap[near], separation[near]
        a, b, c = (q[tri[triangle, k]] for k in range(3))
        normal = np.cross(b - a, c - a)
        normal /= np.maximum(np.linalg.norm(normal, axis=1), 1e-30)[:, None]
        a0, b0, c0 = (q0[tri[triangle, k]] for k in range(3))
        normal0 = np.cross(b0 - a0, c0 - a0)
        closest0 = bary[:, :1] * a0 + bary[:, 1:2] * b0 + bary[:, 2:] * c0
        side = np.sign(((q0[vertex] - closest0) * normal0).sum(axis=1))
        current = np.sign((gap * normal).sum(axis=1))
        side = np.where(side == 0, np.where(current == 0, 1.0, current), side)
        error = separation - side * (gap * normal).sum(axis=1)
        active = error > 0
        vertex, triangle, bary, normal, side, error = (x[active] for x in (vertex, triangle, bary, normal, side, error))
        if len(vertex) == 0:
            return q, 0
        corners_index = tri[triangle]
        w_vertex = self.inverse_mass[vertex]
        w_corner = self.inverse_mass[corners_index]
        denominator = w_vertex + (bary**2 * w_corner).sum(axis=1)
        lam = np.where(denominator > 0, error / np.maximum(denominator, 1e-300), 0.0)
        direction = side[:, None] * normal
        correction = np.zeros_like(q)
        counts = np.zeros(self.n)
        moves = [(vertex, (lam * w_vertex)[:, None] * direction)]
        for k in range(3):
            moves.append((corners_index[:, k], -(lam * bary[:, k] * w_corner[:, k])[:, None] * direction))
        for index, delta in moves:
            for axis in range(3):
                correction[:, axis] += np.bincount(index, weights=delta[:, axis], minlength=self.n)
            counts += np.bincount(index, minlength=self.n)
        return q + correction / np.maximum(counts, 1.0)[:, None], len(vertex)

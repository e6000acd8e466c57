"""Triangle-mesh colliders (moving and deforming every frame) with a broad phase over triangle centroids.

Everything runs on the points' array device (``xp``): the collider's vertices arrive on the host with
every pose (``set_vertices``) and are uploaded once, on the first query of that pose, together with
the centroids and normals computed from them; queries never copy points to the host.

Broad phase (``backend.nearest_within``: scipy's k-d tree for numpy arrays, the ``xp`` hash grid of
``collision.broad_phase`` on a device): a point first needs a centroid within reach + R_max (R_max: the
largest centroid-to-corner distance), which rejects far points; its candidate triangles are the 16
with the nearest centroids — no O(n·F) work and no per-point Python loop. With very uneven triangle
sizes the true nearest triangle can be missed in favour of a slightly farther one; the push is then a
little off but still out of the surface.

Narrow phase: exact closest point on each candidate triangle (Ericson, Real-Time Collision
Detection §5.1.5, vectorized over pairs); the nearest pair per point wins. The sign comes from
the face normal of the closest triangle (outward = the triangle winding's normal), so a
closed, outward-oriented mesh has an inside; an open mesh is a one-sided surface.
``reach`` = one mean edge length: points that penetrated up to that depth in one substep are
still pushed back out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..backend import nearest_within
from ..sim.errors import SceneError


def _ratio(xp, numerator, denominator):
    """numerator / denominator, 0 where the denominator is 0 (degenerate triangles)."""
    nonzero = denominator != 0
    return xp.where(nonzero, numerator, 0.0) / xp.where(nonzero, denominator, 1.0)


def closest_points_on_triangles(points, a, b, c, xp=np):
    """Closest points on triangles (a, b, c) to ``points``, all (m, 3) [m] on the ``xp`` device.

    Returns (closest (m, 3), barycentric (m, 3)). Voronoi regions are tested in the order vertex a,
    vertex b, edge ab, vertex c, edge ac, edge bc, face; the first region that holds wins."""
    ab, ac, ap = b - a, c - a, points - a
    d1 = (ab * ap).sum(axis=1)
    d2 = (ac * ap).sum(axis=1)
    bp = points - b
    d3 = (ab * bp).sum(axis=1)
    d4 = (ac * bp).sum(axis=1)
    cp = points - c
    d5 = (ab * cp).sum(axis=1)
    d6 = (ac * cp).sum(axis=1)
    va = d3 * d6 - d5 * d4
    vb = d5 * d2 - d1 * d6
    vc = d1 * d4 - d3 * d2
    zeros = xp.zeros_like(d1)
    ones = xp.ones_like(d1)
    denominator = va + vb + vc
    v = _ratio(xp, vb, denominator)
    w = _ratio(xp, vc, denominator)
    face = xp.where((denominator != 0)[:, None], xp.stack([1 - v - w, v, w], axis=1), 1.0 / 3.0)
    v_ab = _ratio(xp, d1, d1 - d3)
    w_ac = _ratio(xp, d2, d2 - d6)
    w_bc = _ratio(xp, d4 - d3, (d4 - d3) + (d5 - d6))
    regions = [  # (holds, barycentric weights), highest priority first
        ((d1 <= 0) & (d2 <= 0), xp.stack([ones, zeros, zeros], axis=1)),                       # vertex a
        ((d3 >= 0) & (d4 <= d3), xp.stack([zeros, ones, zeros], axis=1)),                      # vertex b
        ((vc <= 0) & (d1 >= 0) & (d3 <= 0), xp.stack([1 - v_ab, v_ab, zeros], axis=1)),         # edge ab
        ((d6 >= 0) & (d5 <= d6), xp.stack([zeros, zeros, ones], axis=1)),                      # vertex c
        ((vb <= 0) & (d2 >= 0) & (d6 <= 0), xp.stack([1 - w_ac, zeros, w_ac], axis=1)),         # edge ac
        ((va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0), xp.stack([zeros, 1 - w_bc, w_bc], axis=1)),  # edge bc
    ]
    bary = face
    for holds, weights in reversed(regions):
        bary = xp.where(holds[:, None], weights, bary)
    bary = xp.nan_to_num(bary, nan=1.0 / 3.0)
    closest = bary[:, :1] * a + bary[:, 1:2] * b + bary[:, 2:] * c
    return closest, bary


@dataclass
class MeshPose:
    """One pose of a mesh collider on an array device (all arrays on ``xp``'s device).

    host_vertices: the host array this pose was uploaded from; vertices (N, 3) [m]; previous (N, 3) [m]
    the pose before, or None when the mesh did not move;
    centroids (F, 3) [m]; normals (F, 3) unit, from the triangle winding; max_radius: 0-d [m], the
    largest centroid-to-corner distance."""

    xp: Any
    host_vertices: np.ndarray
    vertices: Any
    previous: Any
    centroids: Any
    normals: Any
    max_radius: Any


class MeshGeometry:
    """A triangle mesh collider; vertices (N, 3) world space [m], triangles (F, 3)."""

    neighbours = 16  # candidate triangles per point (nearest centroids)

    def __init__(self, object_id: str, vertices: np.ndarray, triangles: np.ndarray):
        if triangles is None or len(triangles) == 0:
            raise SceneError("a mesh collider needs triangles", object=object_id)
        self.id = object_id
        self.triangles = np.asarray(triangles, np.int64)
        self.rest_vertices = np.asarray(vertices, float)
        edges = self.rest_vertices[self.triangles] - self.rest_vertices[np.roll(self.triangles, 1, axis=1)]
        self.margin = float(np.linalg.norm(edges, axis=2).mean())
        self._device_triangles = None   # (xp, (F, 3) triangles on its device)
        self._pose = None               # MeshPose of the latest vertices that were queried
        self._last = None               # (triangle, closest, barycentric) of the last signed_distance
        self.vertices = None
        self.previous = None
        self.set_vertices(self.rest_vertices)
        self.previous = self.vertices

    def set_vertices(self, vertices: np.ndarray) -> None:
        """The collider's vertices (N, 3) [m] (host) at the next substep."""
        self.previous = self.vertices if self.vertices is not None else vertices
        self.vertices = np.asarray(vertices, float)

    def _triangles_on(self, xp):
        if self._device_triangles is None or self._device_triangles[0] is not xp:
            self._device_triangles = (xp, xp.asarray(self.triangles))
        return self._device_triangles[1]

    def pose(self, xp) -> MeshPose:
        """The current pose on ``xp``'s device (uploaded and derived once per pose)."""
        before = self._pose
        if before is not None and before.xp is xp and before.host_vertices is self.vertices:
            return before
        vertices = xp.asarray(self.vertices)
        if self.previous is self.vertices:
            previous = None
        elif before is not None and before.xp is xp and before.host_vertices is self.previous:
            previous = before.vertices                     # already on the device
        else:
            previous = xp.asarray(self.previous)
        triangles = self._triangles_on(xp)
        corners = vertices[triangles]                                        # (F, 3, 3)
        centroids = corners.mean(axis=1)
        max_radius = xp.sqrt(((corners - centroids[:, None, :]) ** 2).sum(axis=2).max())
        normals = xp.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
        normals = normals / xp.maximum(xp.sqrt((normals * normals).sum(axis=1)), 1e-30)[:, None]
        self._pose = MeshPose(xp=xp, host_vertices=self.vertices, vertices=vertices, previous=previous,
                              centroids=centroids, normals=normals, max_radius=max_radius)
        return self._pose

    def candidates(self, xp, points, thickness):
        """Indices (on the points' device) of the points (n, 3) that may touch the mesh, given their
        contact offsets thickness (n,) [m]."""
        if points.shape[0] == 0:
            return xp.zeros(0, dtype=xp.int64)
        pose = self.pose(xp)
        bound = thickness.max() + self.margin + pose.max_radius
        query, _ = nearest_within(xp, points, pose.centroids, bound, 1)
        return query

    def _nearest(self, xp, points, pose: MeshPose, reach: float):
        """Per point: (triangle (m,), closest point (m, 3), barycentric (m, 3)); −1 where no
        triangle is within ``reach``. Candidates: the ``neighbours`` triangles with the nearest
        centroids."""
        m = points.shape[0]
        triangle = xp.full(m, -1, dtype=xp.int64)
        closest = xp.zeros((m, 3))
        bary = xp.zeros((m, 3))
        if m == 0:
            return triangle, closest, bary
        point_index, tri_index = nearest_within(xp, points, pose.centroids, reach + pose.max_radius,
                                                self.neighbours)
        if point_index.shape[0] == 0:
            return triangle, closest, bary
        corners = pose.vertices[self._triangles_on(xp)[tri_index]]
        queried = points[point_index]
        pair_closest, pair_bary = closest_points_on_triangles(queried, corners[:, 0], corners[:, 1], corners[:, 2], xp)
        gap = queried - pair_closest
        distance = xp.sqrt((gap * gap).sum(axis=1))
        order = xp.lexsort(xp.stack([distance, point_index.astype(distance.dtype)]))  # by point, nearest first
        ordered_points = point_index[order]
        first_of_point = xp.concatenate([xp.ones(1, dtype=bool), ordered_points[1:] != ordered_points[:-1]])
        first = order[xp.nonzero(first_of_point & (distance[order] <= reach))[0]]
        winners = point_index[first]
        triangle[winners] = tri_index[first]
        closest[winners] = pair_closest[first]
        bary[winners] = pair_bary[first]
        return triangle, closest, bary

    def signed_distance(self, xp, points):
        """(distance (n,) [m], positive outside, inf beyond reach; outward unit normal (n, 3)) of
        points (n, 3) on ``xp``'s device."""
        points = xp.asarray(points, dtype=xp.float64)
        pose = self.pose(xp)
        triangle, closest, bary = self._nearest(xp, points, pose, self.margin)
        self._last = (triangle, closest, bary)
        found = triangle >= 0
        offset = points - closest
        length = xp.sqrt((offset * offset).sum(axis=1))
        face_normal = pose.normals[xp.maximum(triangle, 0)]
        sign = xp.where((offset * face_normal).sum(axis=1) >= 0, 1.0, -1.0)
        normal = xp.where((length > 1e-12)[:, None], sign[:, None] * offset / xp.maximum(length, 1e-30)[:, None],
                          face_normal)
        distance = xp.where(found, sign * length, xp.inf)
        return distance, normal

    def surface_motion(self, xp, selection):
        """Displacement (k, 3) [m] over the last pose change of the surface material nearest to the
        points of the last ``signed_distance`` query, for the rows ``selection`` (bool mask; None: all
        rows) of that query."""
        triangle, closest, bary = self._last if selection is None else (array[selection] for array in self._last)
        pose = self.pose(xp)
        if pose.previous is None or triangle.shape[0] == 0:
            return xp.zeros((triangle.shape[0], 3))
        found = triangle >= 0
        corners_before = pose.previous[self._triangles_on(xp)[xp.maximum(triangle, 0)]]   # (k, 3, 3)
        previous = (corners_before * bary[:, :, None]).sum(axis=1)
        return xp.where(found[:, None], closest - previous, 0.0)

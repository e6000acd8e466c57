"""Continuous collision detection of hair vertices against moving colliders over one step.

Run on the first iteration of seed Algorithm 2 with the predicted end positions x1 = x_t + h v¹.  A vertex
that starts clear of a collider but whose straight path x_t → x1, seen from the collider, reaches it during
the step gets a contact at the FIRST touching point, so a fast strand cannot pass through a thin collider
(the end-of-step test sees x1 on the far side, outside, and finds nothing).

* Analytic and duck-typed colliders (signed distance d, 1-Lipschitz as exact distances are): the start
  point is carried into the collider's pose at the end of the step (x_t seen from the moved collider) and
  the relative path is walked by conservative advancement, τ ← τ + (d(p(τ)) − reach)/|p(1) − p(0)|: a step
  never passes the surface, and the walk stops within `reach` of it.
* Triangle meshes (moving and deforming: previous and current vertices of the substep): vertex–triangle
  CCD in one kernel, a vertex a thread (`kernels.ccd.vertex_mesh_first_touch`): the mesh's tree of swept
  triangle boxes as the broad phase, then the times where the vertex and the moving triangle are coplanar
  (cubic of seed eq. 4.1 with one segment shrunk to the vertex: `kernels.ccd.first_touch_of`), a hit where the
  vertex lies within `reach` of the triangle then.  Two-sided: a crossing from either side, the contact normal facing
  the side the vertex started on (never read from the winding).

A vertex's first touch is returned as a contact plane: unit normal n (towards the vertex's starting side), the
signed gap of the start point to the plane, and the surface velocity there.  The contact then asks the end
position to stay `contact distance` in front of the plane: n·(v − v_surface) ≥ (contact distance − start gap)/h.
The touches come as a mask over all vertices and a function that makes the planes of chosen vertices, so the
caller selects its contacts (these and others) with one read of the device.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import warp as wp

from ...collision.mesh import closest_points_on_triangles
from ...kernels import float64_view, int32_view, launch_split, warp_device_of, warp_view
from .frames import cross3
from .kernels import ccd as ccd_kernels

ADVANCEMENT_STEPS = 48   # conservative-advancement iterations (a path still walking after them counts as a hit)
EDGE_NORMAL_FRACTION = 1e-3   # a touch this far (× the reach) from the mesh is a rim touch: mesh-to-vertex normal


@dataclass
class VertexTouches:
    """First touching points of the vertex paths, a row per vertex: ``hit`` (N,) bool, and ``planes(rows)`` for
    vertex indices rows (k,): (normal (k, 3), start_gap (k,) [m] of the start point along the normal,
    surface_velocity (k, 3) [m/s] of the collider at the touching point). Rows that are no hit give finite planes
    of no meaning (a caller that selects several kinds of contact at once takes each row's own)."""
    hit: Any
    planes: Callable


def _rows_dot(xp, a, b):
    return xp.einsum("nc,nc->n", a, b)


def swept_distance_touches(xp, collider, x0, x1, movable, reach, dt: float) -> VertexTouches:
    """First touches of the paths x0 → x1 (n, 3) of `movable` (n,) vertices against a signed-distance collider.

    collider: a colliders.ColliderView (signed_distance, start_in_end_pose, velocity); reach (n,) [m]: the
    distance at which a vertex touches.  A vertex starting within reach touches at τ = 0 (a resting contact,
    start gap = its distance); vertices starting inside are left to the end-of-step test."""
    count = x0.shape[0]
    start = collider.start_in_end_pose(xp, x0, dt)
    start_distance, _ = collider.signed_distance(xp, start)
    path = x1 - start
    length = xp.linalg.norm(path, axis=1)
    candidate = movable & (start_distance > 0.0) & (start_distance - length < reach)
    index = xp.nonzero(candidate)[0]
    hit = xp.zeros(count, dtype=bool)
    touch = xp.zeros(count)
    if index.shape[0]:
        walked_path, walked_length, walked_reach = path[index], length[index], reach[index]
        walked_start = start[index]
        tau = xp.zeros(index.shape[0])
        walking = xp.ones(index.shape[0], dtype=bool)
        touched = xp.zeros(index.shape[0], dtype=bool)
        for _ in range(ADVANCEMENT_STEPS):   # vectorized over all walking vertices
            distance, _ = collider.signed_distance(xp, walked_start + tau[:, None] * walked_path)
            touched |= walking & (distance <= walked_reach * (1.0 + 1e-3))
            walking &= ~touched
            tau = xp.where(walking, tau + (distance - walked_reach) / walked_length, tau)
            walking &= tau < 1.0
            if not bool(walking.any()):
                break
        # still walking after the last step: close to the surface, keep it
        hit[index] = touched | walking
        touch[index] = xp.minimum(tau, 1.0)

    def planes(rows):
        point = start[rows] + touch[rows][:, None] * path[rows]
        distance, normal = collider.signed_distance(xp, point)
        surface = point - distance[:, None] * normal
        return normal, _rows_dot(xp, start[rows] - surface, normal), collider.velocity(xp, surface, dt)

    return VertexTouches(hit, planes)


def swept_mesh_touches(xp, geometry, x0, x1, movable, reach, dt: float) -> VertexTouches:
    """First touches of the paths x0 → x1 (n, 3) of `movable` vertices against a triangle mesh (a
    collision.mesh.MeshGeometry posed for the step: its triangles moving linearly from the previous to the current
    vertices); reach (n,) [m]. The search is one kernel, a vertex a thread (``kernels.ccd.vertex_mesh_first_touch``:
    the mesh's tree of swept triangle boxes, the coplanarity times, the nearest point at the touch); nothing is
    read back."""
    pose = geometry.pose(xp)
    count = x0.shape[0]
    if count == 0 or pose.triangles.bvh is None:
        return VertexTouches(xp.zeros(count, dtype=bool), lambda rows: (xp.zeros((rows.shape[0], 3)),
                                                                         xp.zeros(rows.shape[0]),
                                                                         xp.zeros((rows.shape[0], 3))))
    touch = xp.empty(count, dtype=xp.float64)
    touched = xp.empty(count, dtype=xp.int32)
    start_height = xp.empty(count, dtype=xp.float64)
    nearest = xp.empty((count, 3), dtype=xp.float64)
    gap = xp.empty(count, dtype=xp.float64)
    launch_split(ccd_kernels.vertex_mesh_first_touch, count, warp_device_of(touch), [],
                 [pose.triangles.bvh.id, pose.triangles.index_view, pose.previous_view, pose.current_view,
                  float64_view(xp, x0, wp.vec3d), float64_view(xp, x1, wp.vec3d), int32_view(xp, movable),
                  float64_view(xp, reach), warp_view(touch, wp.float64), warp_view(touched, wp.int32),
                  warp_view(start_height, wp.float64), warp_view(nearest, wp.vec3d), warp_view(gap, wp.float64)])
    hit = touched >= 0

    def planes(rows):
        corners = pose.triangles.indices[xp.maximum(touched[rows], 0)]
        t = xp.where(hit[rows], touch[rows], 0.0)[:, None]
        side = xp.where(start_height[rows] > 0.0, 1.0, -1.0)[:, None]
        a0, b0, c0 = (pose.previous[corners[:, k]] for k in range(3))
        a1, b1, c1 = (pose.current[corners[:, k]] for k in range(3))
        at, bt, ct = a0 + t * (a1 - a0), b0 + t * (b1 - b0), c0 + t * (c1 - c0)
        normal = cross3(xp, bt - at, ct - at)
        normal = side * normal / xp.maximum(xp.linalg.norm(normal, axis=1, keepdims=True), 1e-300)
        p0, p1 = x0[rows], x1[rows]
        q = p0 + t * (p1 - p0)
        _, bary = closest_points_on_triangles(q, at, bt, ct, xp=xp)
        # A vertex that passes beside the mesh's rim (its nearest mesh point then is on an edge or a corner, not
        # inside a face) crosses only the plane's extension beyond the touched triangle: the side of that plane
        # it started on says nothing there. Over a ridge (a brow, an ear's rim) a vertex outside the solid starts
        # on the inner side of the far face's plane, and that side would hold it inside the solid. Its normal is
        # the direction from the nearest mesh point to the vertex when it touches: the side it is on. The
        # nearest point is taken over all the vertex's candidate triangles, so a vertex crossing a flat region
        # next to the touched triangle's edge (a quad's diagonal) lies on the neighbour's face and keeps the face
        # normal (EDGE_NORMAL_FRACTION of the reach: nearer than that to the mesh is a crossing of it).
        offset = q - nearest[rows]
        on_rim = (gap[rows] > EDGE_NORMAL_FRACTION * reach[rows])[:, None]
        normal = xp.where(on_rim, offset / xp.maximum(gap[rows], 1e-300)[:, None], normal)
        surface_start = bary[:, :1] * a0 + bary[:, 1:2] * b0 + bary[:, 2:] * c0
        surface_end = bary[:, :1] * a1 + bary[:, 1:2] * b1 + bary[:, 2:] * c1
        return normal, _rows_dot(xp, p0 - surface_start, normal), (surface_end - surface_start) / dt

    return VertexTouches(hit, planes)

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
  CCD, broad phase by the backend's spatial query over the swept bounding spheres of vertex paths and
  triangles, narrow phase at the times where the vertex and the moving triangle are coplanar (cubic of
  seed eq. 4.1 with one segment shrunk to the vertex: `kernels.ccd.vertex_triangle_first_touch`), a hit where the vertex lies
  within `reach` of the triangle then.  Two-sided: a crossing from either side, the contact normal facing
  the side the vertex started on (never read from the winding).

A hit is returned as a contact plane: unit normal n (towards the vertex's starting side), the signed gap of the
start point to the plane, and the surface velocity there.  The contact then asks the end position to stay
`contact distance` in front of the plane: n·(v − v_surface) ≥ (contact distance − start gap)/h.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import warp as wp

from ...backend import points_near
from ...collision.mesh import closest_points_on_triangles
from ...kernels import float64_view, int32_view, launch_split, warp_device_of, warp_view
from .frames import cross3
from .kernels import ccd as ccd_kernels

ADVANCEMENT_STEPS = 48   # conservative-advancement iterations (a path still walking after them counts as a hit)
EDGE_NORMAL_FRACTION = 1e-3   # a touch this far (× the reach) from the mesh is a rim touch: mesh-to-vertex normal


@dataclass
class ColliderHits:
    """First touching points of vertex paths: vertex (m,) indices, normal (m, 3), start_gap (m,) [m] of the
    start point along the normal, surface_velocity (m, 3) [m/s] of the collider at the touching point."""
    vertex: Any
    normal: Any
    start_gap: Any
    surface_velocity: Any


def _rows_dot(xp, a, b):
    return xp.einsum("nc,nc->n", a, b)


def _empty(xp) -> ColliderHits:
    return ColliderHits(xp.zeros(0, dtype=xp.int64), xp.zeros((0, 3)), xp.zeros(0), xp.zeros((0, 3)))


def swept_distance_hits(xp, collider, x0, x1, movable, reach, dt: float) -> ColliderHits:
    """First hits of the paths x0 → x1 (n, 3) of `movable` (n,) vertices against a signed-distance collider.

    collider: a colliders.ColliderView (signed_distance, start_in_end_pose, velocity); reach (n,) [m]: the
    distance at which a vertex touches.  A vertex starting within reach touches at τ = 0 (a resting contact,
start gap = its distance); vertices starting inside are left to the end-of-step test."""
    start = collider.start_in_end_pose(xp, x0, dt)
    start_distance, _ = collider.signed_distance(xp, start)
    path = x1 - start
    length = xp.linalg.norm(path, axis=1)
    candidate = movable & (start_distance > 0.0) & (start_distance - length < reach)
    index = xp.nonzero(candidate)[0]
    if index.shape[0] == 0:
        return _empty(xp)
    start, path, length, reach = start[index], path[index], length[index], reach[index]
    tau = xp.zeros(index.shape[0])
    walking = xp.ones(index.shape[0], dtype=bool)
    touched = xp.zeros(index.shape[0], dtype=bool)
    for _ in range(ADVANCEMENT_STEPS):   # vectorized over all walking vertices
        distance, _ = collider.signed_distance(xp, start + tau[:, None] * path)
        touched |= walking & (distance <= reach * (1.0 + 1e-3))
        walking &= ~touched
        tau = xp.where(walking, tau + (distance - reach) / length, tau)
        walking &= tau < 1.0
        if not bool(walking.any()):
            break
    # still walking after the last step: close to the surface, keep it; one read, the count of hits
    hit = xp.nonzero(touched | walking)[0]
    if hit.shape[0] == 0:
        return _empty(xp)
    index, start, path, tau = index[hit], start[hit], path[hit], xp.minimum(tau[hit], 1.0)
    point = start + tau[:, None] * path
    distance, normal = collider.signed_distance(xp, point)
    surface = point - distance[:, None] * normal
    return ColliderHits(vertex=index, normal=normal, start_gap=_rows_dot(xp, start - surface, normal),
                        surface_velocity=collider.velocity(xp, surface, dt))


def swept_mesh_hits(xp, previous, current, triangles, x0, x1, movable, reach, dt: float) -> ColliderHits:
    """First hits of the paths x0 → x1 (n, 3) of `movable` vertices against a triangle mesh moving linearly
    from `previous` to `current` vertices (V, 3) [m] over the step; triangles (F, 3); reach (n,) [m]."""
    index = xp.nonzero(movable)[0]
    if index.shape[0] == 0 or triangles.shape[0] == 0:
        return _empty(xp)
    p0, p1, reach_v = x0[index], x1[index], reach[index]
    path_centre = 0.5 * (p0 + p1)
    path_radius = 0.5 * xp.linalg.norm(p1 - p0, axis=1) + reach_v
    corners0, corners1 = previous[triangles], current[triangles]                 # (F, 3, 3)
    both = xp.concatenate((corners0, corners1), axis=1)                          # (F, 6, 3)
    triangle_centre = both.mean(axis=1)
    triangle_radius = xp.linalg.norm(both - triangle_centre[:, None, :], axis=2).max(axis=1)
    bound = float(triangle_radius.max() + path_radius.max())
    tri, vertex = points_near(xp, triangle_centre, path_centre, bound)
    overlap = xp.linalg.norm(triangle_centre[tri] - path_centre[vertex], axis=1) \
        <= triangle_radius[tri] + path_radius[vertex]
    tri, vertex = tri[overlap], vertex[overlap]
    if tri.shape[0] == 0:
        return _empty(xp)
    # two-sided: a crossing from either side; the side is the one the vertex starts on (one launch, a pair a thread)
    first = xp.empty(tri.shape[0], dtype=xp.float64)
    start_height = xp.empty(tri.shape[0], dtype=xp.float64)
    launch_split(ccd_kernels.vertex_triangle_first_touch, tri.shape[0], warp_device_of(first), [],
                 [int32_view(xp, tri), int32_view(xp, vertex), int32_view(xp, triangles),
                  float64_view(xp, previous, wp.vec3d), float64_view(xp, current, wp.vec3d),
                  float64_view(xp, p0, wp.vec3d), float64_view(xp, p1, wp.vec3d), float64_view(xp, reach_v),
                  warp_view(first, wp.float64), warp_view(start_height, wp.float64)])
    hit = xp.nonzero(xp.isfinite(first))[0]     # one read: the count of hits
    if hit.shape[0] == 0:
        return _empty(xp)
    tri_hit, vertex_hit, tau = tri[hit], vertex[hit], first[hit]
    keep = _least_per_owner(xp, tau, vertex_hit)                                  # each vertex's earliest touch
    tri_hit, vertex_hit, t = tri_hit[keep], vertex_hit[keep], tau[keep][:, None]
    side = xp.where(start_height[hit][keep] > 0.0, 1.0, -1.0)[:, None]
    a0, b0, c0 = corners0[tri_hit, 0], corners0[tri_hit, 1], corners0[tri_hit, 2]
    a1, b1, c1 = corners1[tri_hit, 0], corners1[tri_hit, 1], corners1[tri_hit, 2]
    at, bt, ct = a0 + t * (a1 - a0), b0 + t * (b1 - b0), c0 + t * (c1 - c0)
    normal = cross3(xp, bt - at, ct - at)
    normal = side * normal / xp.maximum(xp.linalg.norm(normal, axis=1, keepdims=True), 1e-300)
    q = p0[vertex_hit] + t * (p1[vertex_hit] - p0[vertex_hit])
    _, bary = closest_points_on_triangles(q, at, bt, ct, xp=xp)
    # A vertex that passes beside the mesh's rim (its nearest mesh point then is on an edge or a corner, not
    # inside a face) crosses only the plane's extension beyond the touched triangle: the side of that plane
    # it started on says nothing there. Over a ridge (a brow, an ear's rim) a vertex outside the solid starts
    # on the inner side of the far face's plane, and that side would hold it inside the solid. Its normal is
    # the direction from the nearest mesh point to the vertex when it touches: the side it is on. The
    # nearest point is taken over all the vertex's candidate triangles, so a vertex crossing a flat region
    # next to the touched triangle's edge (a quad's diagonal) lies on the neighbour's face and keeps the face
    # normal (EDGE_NORMAL_FRACTION of the reach: nearer than that to the mesh is a crossing of it).
    nearest, gap = _nearest_at_touch(xp, index.shape[0], vertex_hit, t[:, 0], tri, vertex, corners0, corners1, p0,
                                     p1)
    offset = q - nearest
    on_rim = (gap > EDGE_NORMAL_FRACTION * reach_v[vertex_hit])[:, None]
    normal = xp.where(on_rim, offset / xp.maximum(gap, 1e-300)[:, None], normal)
    surface_start = bary[:, :1] * a0 + bary[:, 1:2] * b0 + bary[:, 2:] * c0
    surface_end = bary[:, :1] * a1 + bary[:, 1:2] * b1 + bary[:, 2:] * c1
    return ColliderHits(vertex=index[vertex_hit], normal=normal,
                        start_gap=_rows_dot(xp, p0[vertex_hit] - surface_start, normal),
                        surface_velocity=(surface_end - surface_start) / dt)


def _nearest_at_touch(xp, count, vertex_hit, touch_time, tri, vertex, corners0, corners1, p0, p1):
    """For the vertices ``vertex_hit`` (k,) touching at ``touch_time`` (k,) (fractions of the step): the nearest
    point (k, 3) of their candidate triangles (the broad-phase pairs ``tri``, ``vertex``) at that time, and
    its distance (k,) [m]. count: the number of vertices that ``vertex`` indexes."""
    time_of = xp.full(count, xp.nan)
    time_of[vertex_hit] = touch_time
    pair = xp.nonzero(~xp.isnan(time_of[vertex]))[0]
    t = time_of[vertex[pair]][:, None]
    owner, corners = vertex[pair], [corners0[tri[pair], k] + t * (corners1[tri[pair], k] - corners0[tri[pair], k])
                                    for k in range(3)]
    q = p0[owner] + t * (p1[owner] - p0[owner])
    closest, _ = closest_points_on_triangles(q, *corners, xp=xp)
    distance = xp.linalg.norm(q - closest, axis=1)
    first = _least_per_owner(xp, distance, owner)
    nearest = xp.zeros((count, 3))
    gap = xp.zeros(count)
    nearest[owner[first]] = closest[first]
    gap[owner[first]] = distance[first]
    return nearest[vertex_hit], gap[vertex_hit]


def _least_per_owner(xp, key, owner):
    """Indices of the row with the least ``key`` of each ``owner`` (both (m,)), one per owner, by owner."""
    order = xp.lexsort(xp.stack((key, owner)))
    return order[xp.concatenate((xp.ones(1, dtype=bool), owner[order][1:] != owner[order][:-1]))]

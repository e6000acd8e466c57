"""Warp kernels of the DER narrow phase: strand–strand edge pairs (contact_detection._detect_edges), rod edges
against a mesh collider's edges (contact_detection._mesh_edge_contacts), and vertex paths against a mesh's
triangles (collider_ccd.swept_mesh_hits: ``vertex_mesh_first_touch``, at the end of this module).

For every candidate pair of edges A = [x_a, x_a+1], B = [x_b, x_b+1] moving linearly over the step (x0 → x1):
the conservative prefilter (the start distance minus the largest relative endpoint motion must come within
(1 + proximity) × the contact distance), then the times τ ∈ [0, 1] where the four points are coplanar (seed 000
eq. 4.1: the cubic split at its critical points, each monotone piece with a sign change bisected 40 times), and
the segments' closest points at τ = 0, 1 and those roots: the smallest distance wins (the first of equals, in
that order). The arithmetic is geometry.py's (segment_closest_points, coplanarity_times) term by term; a pair
the prefilter drops gets an infinite distance. One pair per item, no shared outputs.
"""

from __future__ import annotations

import warp as wp

from ....kernels.bounds import box_lower, box_upper
from ....kernels.geometry import blend, closest_barycentric, segment_closest_parameters_near_parallel

wp.set_module_options({"enable_backward": False})

BISECTION_STEPS = 40


@wp.func
def closest_on_segments(p1: wp.vec3d, q1: wp.vec3d, p2: wp.vec3d, q2: wp.vec3d) -> wp.vec3d:
    """(s, t, distance) of the closest points p1 + s (q1 − p1), p2 + t (q2 − p2) (geometry.segment_closest_points):
    rod edges within 1e-12 (relative) of parallel count as parallel."""
    st = segment_closest_parameters_near_parallel(p1, q1, p2, q2, wp.float64(1e-12))
    return wp.vec3d(st[0], st[1], wp.length((p1 + st[0] * (q1 - p1)) - (p2 + st[1] * (q2 - p2))))


@wp.func
def coplanarity(tau: wp.float64, a1: wp.vec3d, a2: wp.vec3d, a3: wp.vec3d, b1: wp.vec3d, b2: wp.vec3d,
                b3: wp.vec3d) -> wp.float64:
    """((a1 + τ b1) × (a2 + τ b2)) · (a3 + τ b3)."""
    return wp.dot(wp.cross(a1 + tau * b1, a2 + tau * b2), a3 + tau * b3)


@wp.func
def root_between(left: wp.float64, right: wp.float64, a1: wp.vec3d, a2: wp.vec3d, a3: wp.vec3d, b1: wp.vec3d,
                 b2: wp.vec3d, b3: wp.vec3d) -> wp.float64:
    """The bisected root of the coplanarity cubic on the monotone piece [left, right], or −1 without one."""
    f_left = coplanarity(left, a1, a2, a3, b1, b2, b3)
    f_right = coplanarity(right, a1, a2, a3, b1, b2, b3)
    if not (f_left * f_right <= wp.float64(0.0) and right > left):
        return wp.float64(-1.0)
    lo = left
    hi = right
    for _ in range(BISECTION_STEPS):
        mid = wp.float64(0.5) * (lo + hi)
        f_mid = coplanarity(mid, a1, a2, a3, b1, b2, b3)
        if f_left * f_mid <= wp.float64(0.0):
            hi = mid
        else:
            lo = mid
            f_left = f_mid
    return wp.float64(0.5) * (lo + hi)


@wp.func
def critical_times(a1: wp.vec3d, a2: wp.vec3d, a3: wp.vec3d, b1: wp.vec3d, b2: wp.vec3d, b3: wp.vec3d) -> wp.vec2d:
    """The cubic's critical points (roots of 3 c3 τ² + 2 c2 τ + c1), clipped to [0, 1], ascending; 0 where absent."""
    zero = wp.float64(0.0)
    one = wp.float64(1.0)
    c3 = wp.dot(wp.cross(b1, b2), b3)
    c2 = wp.dot(wp.cross(b1, b2), a3) + wp.dot(wp.cross(a1, b2), b3) + wp.dot(wp.cross(b1, a2), b3)
    c1 = wp.dot(wp.cross(a1, a2), b3) + wp.dot(wp.cross(a1, b2), a3) + wp.dot(wp.cross(b1, a2), a3)
    qa = wp.float64(3.0) * c3
    qb = wp.float64(2.0) * c2
    qc = c1
    tiny = wp.float64(1e-300)
    crit_a = zero
    crit_b = zero
    if wp.abs(qa) > tiny:
        discriminant = qb * qb - wp.float64(4.0) * qa * qc
        if discriminant > zero:
            root_disc = wp.sqrt(discriminant)
            crit_a = (-qb - root_disc) / (wp.float64(2.0) * qa)
            crit_b = (-qb + root_disc) / (wp.float64(2.0) * qa)
    elif wp.abs(qb) > tiny:
        crit_a = -qc / qb
        crit_b = crit_a
    crit_a = wp.clamp(crit_a, zero, one)
    crit_b = wp.clamp(crit_b, zero, one)
    return wp.vec2d(wp.min(crit_a, crit_b), wp.max(crit_a, crit_b))


@wp.func
def pair_closest_in_step(p0: wp.vec3d, p1: wp.vec3d, p2: wp.vec3d, p3: wp.vec3d, m0: wp.vec3d, m1: wp.vec3d,
                         m2: wp.vec3d, m3: wp.vec3d, reach_limit: wp.float64) -> wp.vec4d:
    """(τ, s, t, distance) of the smallest closest-point distance over the step of the segments p0–p1 and p2–p3
    moving by m0..m3 [m]; (0, 0, 0, +inf) when the prefilter shows they stay farther apart than reach_limit."""
    start_distance = closest_on_segments(p0, p1, p2, p3)[2]
    reach = wp.max(wp.max(wp.length(m0 - m2), wp.length(m0 - m3)), wp.max(wp.length(m1 - m2), wp.length(m1 - m3)))
    best = wp.vec4d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0), wp.float64(wp.inf))
    if start_distance - reach < reach_limit:
        a1 = p1 - p0
        a2 = p2 - p0
        a3 = p3 - p0
        b1 = m1 - m0
        b2 = m2 - m0
        b3 = m3 - m0
        critical = critical_times(a1, a2, a3, b1, b2, b3)
        times = wp.vec4d(wp.float64(1.0), root_between(wp.float64(0.0), critical[0], a1, a2, a3, b1, b2, b3),
                         root_between(critical[0], critical[1], a1, a2, a3, b1, b2, b3),
                         root_between(critical[1], wp.float64(1.0), a1, a2, a3, b1, b2, b3))
        tau = wp.float64(0.0)
        for column in range(5):
            if column > 0:
                tau = times[column - 1]
                if tau < wp.float64(0.0):        # no root on that piece: geometry.py's NaN, tested at τ = 1
                    tau = wp.float64(1.0)
            found = closest_on_segments(p0 + tau * m0, p1 + tau * m1, p2 + tau * m2, p3 + tau * m3)
            if found[2] < best[3]:
                best = wp.vec4d(tau, found[0], found[1], found[2])
    return best


@wp.kernel
def edge_pairs_closest_in_step(x0: wp.array(dtype=wp.vec3d), x1: wp.array(dtype=wp.vec3d),
                               first_a: wp.array(dtype=wp.int32), first_b: wp.array(dtype=wp.int32),
                               reach_limit: wp.array(dtype=wp.float64), first: int, chunk: int,
                               closest: wp.array(dtype=wp.vec4d)):
    """closest[k] = (τ, s, t, distance) of pair k's smallest closest-point distance over the step, for pairs
    [first + t·chunk, first + (t + 1)·chunk); first_a, first_b: the edges' first vertices; reach_limit:
    (1 + proximity) × the pair's contact distance [m]. Pairs the prefilter drops: (0, 0, 0, +inf)."""
    start = first + wp.tid() * chunk
    for k in range(start, wp.min(start + chunk, first_a.shape[0])):
        va = first_a[k]
        vb = first_b[k]
        p0 = x0[va]
        p1 = x0[va + 1]
        p2 = x0[vb]
        p3 = x0[vb + 1]
        closest[k] = pair_closest_in_step(p0, p1, p2, p3, x1[va] - p0, x1[va + 1] - p1, x1[vb] - p2, x1[vb + 1] - p3,
                                          reach_limit[k])


@wp.kernel
def mesh_edges_closest_in_step(x0: wp.array(dtype=wp.vec3d), x1: wp.array(dtype=wp.vec3d),
                               first_vertex: wp.array(dtype=wp.int32), reach_limit: wp.array(dtype=wp.float64),
                               bvh: wp.uint64, previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                               mesh_edges: wp.array(dtype=wp.int32, ndim=2), first: int, chunk: int,
                               nearest_edge: wp.array(dtype=wp.int32), closest: wp.array(dtype=wp.vec4d)):
    """For rod edges k in [first + t·chunk, first + (t + 1)·chunk) (first vertices ``first_vertex``, moving
    x0 → x1) against a mesh's edges moving previous → current (their swept boxes in ``bvh``): the mesh edge
    that comes nearest during the step within ``reach_limit[k]`` [m], −1 for none, and (τ, s, t, distance) of
    that approach (s along the rod edge, t along the mesh edge)."""
    start = first + wp.tid() * chunk
    for k in range(start, wp.min(start + chunk, first_vertex.shape[0])):
        va = first_vertex[k]
        p0 = x0[va]
        p1 = x0[va + 1]
        m0 = x1[va] - p0
        m1 = x1[va + 1] - p1
        limit = reach_limit[k]
        low = wp.min(box_lower(p0, x1[va], limit), box_lower(p1, x1[va + 1], limit))
        high = wp.max(box_upper(p0, x1[va], limit), box_upper(p1, x1[va + 1], limit))
        query = wp.bvh_query_aabb(bvh, low, high)
        e = int(0)
        best_edge = int(-1)
        best = wp.vec4d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0), wp.float64(wp.inf))
        while wp.bvh_query_next(query, e):
            p2 = previous[mesh_edges[e, 0]]
            p3 = previous[mesh_edges[e, 1]]
            found = pair_closest_in_step(p0, p1, p2, p3, m0, m1, current[mesh_edges[e, 0]] - p2,
                                         current[mesh_edges[e, 1]] - p3, limit)
            if found[3] < limit and (found[3] < best[3] or (found[3] == best[3] and e < best_edge)):
                best = found
                best_edge = e
        nearest_edge[k] = best_edge
        closest[k] = best


@wp.func
def first_touch_of(q0: wp.vec3d, q1: wp.vec3d, reach: wp.float64, a0: wp.vec3d, b0: wp.vec3d, c0: wp.vec3d,
                   a1: wp.vec3d, b1: wp.vec3d, c1: wp.vec3d) -> wp.vec2d:
    """(τ, h) for a vertex moving q0 → q1 and a triangle moving (a0, b0, c0) → (a1, b1, c1) over the step: h, the
    vertex's height over the triangle's plane at the start, (q0 − a0)·((b0 − a0) × (c0 − a0)) (0: in the plane, no
    hit), and τ, the earliest of the times in [0, 1] where vertex and triangle are coplanar (the cubic of seed
    eq. 4.1 with one segment shrunk to the vertex: split at its critical points, each monotone piece with a sign
    change bisected BISECTION_STEPS times) at which the vertex lies within ``reach`` [m] of the triangle, +inf
    without one. The arithmetic is ``geometry.coplanarity_times`` and ``mesh.closest_points_on_triangles`` term by
    term."""
    height = wp.dot(q0 - a0, wp.cross(b0 - a0, c0 - a0))
    best = wp.float64(wp.inf)
    if height != wp.float64(0.0):
        motion = q1 - q0
        e1 = a0 - q0
        e2 = b0 - q0
        e3 = c0 - q0
        m1 = (a1 - a0) - motion
        m2 = (b1 - b0) - motion
        m3 = (c1 - c0) - motion
        critical = critical_times(e1, e2, e3, m1, m2, m3)
        times = wp.vec3d(root_between(wp.float64(0.0), critical[0], e1, e2, e3, m1, m2, m3),
                         root_between(critical[0], critical[1], e1, e2, e3, m1, m2, m3),
                         root_between(critical[1], wp.float64(1.0), e1, e2, e3, m1, m2, m3))
        for piece in range(3):
            tau = times[piece]
            if tau >= wp.float64(0.0):
                q = q0 + tau * motion
                at = a0 + tau * (a1 - a0)
                bt = b0 + tau * (b1 - b0)
                ct = c0 + tau * (c1 - c0)
                closest = blend(closest_barycentric(q, at, bt, ct), at, bt, ct)
                if wp.length(q - closest) <= reach and tau < best:
                    best = tau
    return wp.vec2d(best, height)


@wp.kernel
def vertex_mesh_first_touch(first: int, bvh: wp.uint64, triangles: wp.array(dtype=wp.int32, ndim=2),
                            previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                            x0: wp.array(dtype=wp.vec3d), x1: wp.array(dtype=wp.vec3d),
                            movable: wp.array(dtype=wp.int32), reach: wp.array(dtype=wp.float64),
                            touch: wp.array(dtype=wp.float64), touched: wp.array(dtype=wp.int32),
                            start_height: wp.array(dtype=wp.float64), nearest: wp.array(dtype=wp.vec3d),
                            gap: wp.array(dtype=wp.float64)):
    """Vertex i = first + tid (when movable) moving x0 → x1 against a triangle mesh moving previous → current over
    the step, its triangles' swept boxes in ``bvh``: the earliest touch (``first_touch_of``) over the triangles
    whose boxes meet the path's box grown by reach[i] (ties: the lower triangle index), as its time ``touch``
    (+inf: none), triangle ``touched`` (−1) and the vertex's start height over it; and at that time the nearest
    point of those triangles to the vertex and its distance ``gap`` (ties: the lower index)."""
    i = first + wp.tid()
    touch[i] = wp.float64(wp.inf)
    touched[i] = -1
    if movable[i] == 0:
        return
    q0 = x0[i]
    q1 = x1[i]
    r = reach[i]
    lower = box_lower(q0, q1, r)
    upper = box_upper(q0, q1, r)
    best = wp.float64(wp.inf)
    best_triangle = int(-1)
    best_height = wp.float64(0.0)
    query = wp.bvh_query_aabb(bvh, lower, upper)
    t = int(0)
    while wp.bvh_query_next(query, t):
        found = first_touch_of(q0, q1, r, previous[triangles[t, 0]], previous[triangles[t, 1]],
                               previous[triangles[t, 2]], current[triangles[t, 0]], current[triangles[t, 1]],
                               current[triangles[t, 2]])
        if found[0] < best or (found[0] == best and found[0] < wp.float64(wp.inf) and t < best_triangle):
            best = found[0]
            best_triangle = t
            best_height = found[1]
    touch[i] = best
    touched[i] = best_triangle
    start_height[i] = best_height
    if best_triangle < 0:
        return
    q = q0 + best * (q1 - q0)
    least = wp.float64(wp.inf)
    least_triangle = int(-1)
    closest_point = q
    near = wp.bvh_query_aabb(bvh, lower, upper)
    while wp.bvh_query_next(near, t):
        a0 = previous[triangles[t, 0]]
        b0 = previous[triangles[t, 1]]
        c0 = previous[triangles[t, 2]]
        at = a0 + best * (current[triangles[t, 0]] - a0)
        bt = b0 + best * (current[triangles[t, 1]] - b0)
        ct = c0 + best * (current[triangles[t, 2]] - c0)
        point = blend(closest_barycentric(q, at, bt, ct), at, bt, ct)
        distance = wp.length(q - point)
        if distance < least or (distance == least and t < least_triangle):
            least = distance
            least_triangle = t
            closest_point = point
    nearest[i] = closest_point
    gap[i] = least

"""Warp kernels of the DER narrow phase: strand–strand edge pairs (contact_detection._edge_pair_hits), rod edges
against a mesh collider's edges (contact_detection._mesh_edge_contacts), and vertex paths against a mesh's
triangles (collider_ccd.swept_mesh_touches: ``vertex_mesh_first_touch``, at the end of this module).

Strand–strand pairs are found, tested and listed in one pass pair: ``swept_edge_bounds`` gives every edge its
swept bounding sphere and box, then ``edge_hits`` queries the broad phase's hash grid (``kernels.pairs``:
overlapping spheres and boxes, no shared vertex), skips pairs whose four vertices are all kinematic, and runs the
narrow phase below on the rest, twice: the first pass counts each edge's hits, the second writes them at the
counts' prefix sums, each edge's partners ascending, so the hits come in the (i, j) order of the sorted
candidate list they were once filtered from (one read of the device: their number).

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
from ....kernels.pairs import is_candidate
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
def swept_edge_bounds(x0: wp.array(dtype=wp.vec3d), x1: wp.array(dtype=wp.vec3d), edge_vertex: wp.array(dtype=wp.int32),
                      edge_radius: wp.array(dtype=wp.float64), thickness: wp.float64, reach_scale: wp.float64,
                      centre: wp.array(dtype=wp.vec3d), radius: wp.array(dtype=wp.float64),
                      lower: wp.array(dtype=wp.vec3d), upper: wp.array(dtype=wp.vec3d)):
    """Edge e's sphere and box over the step x0 → x1 (N, 3) [m]: its centre (the mean of its four end positions)
    and radius (half the longer of its start and end lengths, half the larger of its endpoints' motions, its
    radius and half the thickness); the box of the four end positions grown by reach_scale × (radius + half the
    thickness), the edge's share of the farthest the narrow phase accepts ((1 + proximity) × contact distance)."""
    e = wp.tid()
    v = edge_vertex[e]
    a0 = x0[v]
    a1 = x0[v + 1]
    b0 = x1[v]
    b1 = x1[v + 1]
    half_thickness = wp.float64(0.5) * thickness
    centre[e] = wp.float64(0.25) * (a0 + a1 + b0 + b1)
    radius[e] = (wp.float64(0.5) * wp.max(wp.length(a1 - a0), wp.length(b1 - b0))
                 + wp.float64(0.5) * wp.max(wp.length(b0 - a0), wp.length(b1 - a1)) + edge_radius[e] + half_thickness)
    margin = reach_scale * (edge_radius[e] + half_thickness)
    grow = wp.vec3d(margin, margin, margin)
    lower[e] = wp.min(wp.min(a0, a1), wp.min(b0, b1)) - grow
    upper[e] = wp.max(wp.max(a0, a1), wp.max(b0, b1)) + grow


@wp.func
def edge_pair_hit(i: int, j: int, x0: wp.array(dtype=wp.vec3d), x1: wp.array(dtype=wp.vec3d),
                  edge_vertex: wp.array(dtype=wp.int32), edge_radius: wp.array(dtype=wp.float64),
                  vertex_fixed: wp.array(dtype=wp.int32), thickness: wp.float64, reach_scale: wp.float64,
                  tolerance: wp.float64, end_check: int) -> wp.vec4d:
    """(τ, s, t, distance) of edges i and j over the step x0 → x1, distance +inf where the pair is no hit: all four
    vertices kinematic, or never within the limit: reach_scale × the contact distance r_i + r_j + thickness on the
    path (``end_check`` 0), or the contact distance less tolerance × the smaller radius at rest (``end_check`` 1)."""
    miss = wp.vec4d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0), wp.float64(wp.inf))
    va = edge_vertex[i]
    vb = edge_vertex[j]
    if vertex_fixed[va] != 0 and vertex_fixed[va + 1] != 0 and vertex_fixed[vb] != 0 and vertex_fixed[vb + 1] != 0:
        return miss
    contact_distance = edge_radius[i] + edge_radius[j] + thickness
    limit = reach_scale * contact_distance
    if end_check != 0:
        limit = contact_distance - tolerance * wp.min(edge_radius[i], edge_radius[j])
    p0 = x0[va]
    p1 = x0[va + 1]
    p2 = x0[vb]
    p3 = x0[vb + 1]
    closest = pair_closest_in_step(p0, p1, p2, p3, x1[va] - p0, x1[va + 1] - p1, x1[vb] - p2, x1[vb + 1] - p3, limit)
    if closest[3] < limit:
        return closest
    return miss


@wp.func
def _insert_hit(pairs: wp.array2d(dtype=wp.int32), closest: wp.array(dtype=wp.vec4d), begin: int, slot: int, i: int,
                j: int, hit: wp.vec4d):
    """Hit (i, j) into pairs/closest at slot, kept in ascending j from begin (insertion sort of the few)."""
    pairs[slot, 0] = i
    position = slot
    while position > begin and pairs[position - 1, 1] > j:
        pairs[position, 1] = pairs[position - 1, 1]
        closest[position] = closest[position - 1]
        position -= 1
    pairs[position, 1] = j
    closest[position] = hit


@wp.kernel
def edge_hits(first: int, grid: wp.uint64, centre: wp.array(dtype=wp.vec3d), radius: wp.array(dtype=wp.float64),
              largest_radius: wp.float64, chain_of: wp.array(dtype=wp.int32), order_of: wp.array(dtype=wp.int32),
              lower: wp.array(dtype=wp.vec3d), upper: wp.array(dtype=wp.vec3d), x0: wp.array(dtype=wp.vec3d),
              x1: wp.array(dtype=wp.vec3d), edge_vertex: wp.array(dtype=wp.int32),
              edge_radius: wp.array(dtype=wp.float64), vertex_fixed: wp.array(dtype=wp.int32), thickness: wp.float64,
              reach_scale: wp.float64, tolerance: wp.float64, end_check: int, fill: int,
              offsets: wp.array(dtype=wp.int32), counts: wp.array(dtype=wp.int32),
              kept_j: wp.array2d(dtype=wp.int32), kept_hit: wp.array(dtype=wp.vec4d),
              pairs: wp.array2d(dtype=wp.int32), closest: wp.array(dtype=wp.vec4d)):
    """Edge i's hits (i, j > i): ``edge_pair_hit`` over the broad phase's candidates. ``fill`` 0: counts[i] = their
    number, and the first ``kept_j.shape[1]`` (the width) of them (j and the hit, in the query's order) kept in row i
    of kept_j and at i · width + k of kept_hit; ``fill`` 1: pairs[offsets[i] + k] = (i, j_k) and closest[...] its (τ, s, t, distance), j_k
    ascending (insertion sort of the few), from the kept row where it holds them all, else by the query and the
    narrow phase again (the same hits in the same order)."""
    i = wp.tid() + first
    width = kept_j.shape[1]
    begin = int(0)
    if fill != 0:
        begin = offsets[i]
        if counts[i] <= width:
            for k in range(counts[i]):
                _insert_hit(pairs, closest, begin, begin + k, i, kept_j[i, k], kept_hit[i * width + k])
            return
    slot = begin
    j = int(0)
    query = wp.hash_grid_query(grid, centre[i], radius[i] + largest_radius)
    while wp.hash_grid_query_next(query, j):
        if is_candidate(i, j, centre, radius, chain_of, order_of, 1, lower, upper, 1):
            hit = edge_pair_hit(i, j, x0, x1, edge_vertex, edge_radius, vertex_fixed, thickness, reach_scale,
                                tolerance, end_check)
            if hit[3] < wp.float64(wp.inf):
                if fill != 0:
                    _insert_hit(pairs, closest, begin, slot, i, j, hit)
                elif slot < width:
                    kept_j[i, slot] = j
                    kept_hit[i * width + slot] = hit
                slot += 1
    if fill == 0:
        counts[i] = slot


@wp.kernel
def mesh_edges_closest_in_step(x0: wp.array(dtype=wp.vec3d), x1: wp.array(dtype=wp.vec3d),
                               first_vertex: wp.array(dtype=wp.int32), reach_limit: wp.array(dtype=wp.float64),
                               wanted: wp.array(dtype=wp.int32), bvh: wp.uint64, previous: wp.array(dtype=wp.vec3d),
                               current: wp.array(dtype=wp.vec3d), mesh_edges: wp.array(dtype=wp.int32, ndim=2),
                               first: int, chunk: int, nearest_edge: wp.array(dtype=wp.int32),
                               closest: wp.array(dtype=wp.vec4d)):
    """For rod edges k in [first + t·chunk, first + (t + 1)·chunk) (first vertices ``first_vertex``, moving
    x0 → x1) against a mesh's edges moving previous → current (their swept boxes in ``bvh``): the mesh edge
    that comes nearest during the step within ``reach_limit[k]`` [m], −1 for none, and (τ, s, t, distance) of
    that approach (s along the rod edge, t along the mesh edge). Rod edges not ``wanted`` (0) get −1 and
    (0, 0, 0, +inf) without a search."""
    start = first + wp.tid() * chunk
    for k in range(start, wp.min(start + chunk, first_vertex.shape[0])):
        if wanted[k] == 0:
            nearest_edge[k] = -1
            closest[k] = wp.vec4d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0), wp.float64(wp.inf))
            continue
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
    point of those triangles to the vertex and its distance ``gap`` (ties: the lower index). A vertex with no
    touch gets start height 0, its start as the nearest point and gap 0 (finite values for callers that make
    planes of every row and keep the touched ones)."""
    i = first + wp.tid()
    touch[i] = wp.float64(wp.inf)
    touched[i] = -1
    start_height[i] = wp.float64(0.0)
    nearest[i] = x0[i]
    gap[i] = wp.float64(0.0)
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

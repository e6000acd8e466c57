"""Warp kernels of the triangle-mesh collider (collision/mesh.py): two-sided contact kept by CCD.

A point's side of the surface is never read from face normals (DESIGN.md §3). Over a substep the
collider's triangles move linearly from their previous to their current vertices, and a point moves
from its start x0 to its proposed end x1:

* ``resolve_mesh_contacts``: for every point, the earliest crossing of a moving triangle along
  x0 → x1 (``kernels.geometry.vertex_triangle_ccd``) puts the point back `reach` in front of that
  triangle on the side it started on; otherwise a point closer than `reach` to the surface is moved
  out to `reach` along its own gap direction (the side it is on, which CCD just showed it never
  left). The test repeats (``passes``) from the corrected end, so a point in a concave corner or
  between thin layers ends clear of every triangle it can reach.
* ``closest_on_mesh``: unsigned closest point within a reach: distance ≥ 0 and the unit direction
  from the surface to the point, so either side of any triangle is "outside" (the DER, Cosserat and
  particle hair end-of-step tests; they keep their sides with their own CCD).
* ``swept_bounds``: each triangle's box over the substep (both poses), the leaves of the ``wp.Bvh``
  the queries traverse, refitted every pose.
* ``inside_closed_shell``: the generalized winding number of ``wp.Mesh`` (either orientation), used only
  to recover points that START a job inside a closed shell.
"""

from __future__ import annotations

import warp as wp

from ..kernels.geometry import blend, closest_barycentric, start_side, vertex_triangle_ccd

BOUNDS_PAD = wp.constant(1e-6)    # [m] added to every float32 box (covers float64 -> float32 rounding)


@wp.func
def _lower(p: wp.vec3d, q: wp.vec3d, pad: wp.float64) -> wp.vec3f:
    return wp.vec3f(wp.float32(wp.min(p[0], q[0]) - pad), wp.float32(wp.min(p[1], q[1]) - pad),
                    wp.float32(wp.min(p[2], q[2]) - pad))


@wp.func
def _upper(p: wp.vec3d, q: wp.vec3d, pad: wp.float64) -> wp.vec3f:
    return wp.vec3f(wp.float32(wp.max(p[0], q[0]) + pad), wp.float32(wp.max(p[1], q[1]) + pad),
                    wp.float32(wp.max(p[2], q[2]) + pad))


@wp.kernel
def swept_bounds(previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                 triangles: wp.array(dtype=wp.vec3i), lowers: wp.array(dtype=wp.vec3f),
                 uppers: wp.array(dtype=wp.vec3f)):
    """lowers/uppers[f]: box of triangle f's six corners (both poses), padded by BOUNDS_PAD."""
    f = wp.tid()
    tri = triangles[f]
    low = previous[tri[0]]
    high = previous[tri[0]]
    for k in range(3):
        for pose in range(2):
            p = previous[tri[k]]
            if pose == 1:
                p = current[tri[k]]
            low = wp.vec3d(wp.min(low[0], p[0]), wp.min(low[1], p[1]), wp.min(low[2], p[2]))
            high = wp.vec3d(wp.max(high[0], p[0]), wp.max(high[1], p[1]), wp.max(high[2], p[2]))
    pad = wp.float64(BOUNDS_PAD)
    lowers[f] = _lower(low, low, pad)
    uppers[f] = _upper(high, high, pad)


@wp.kernel
def resolve_mesh_contacts(bvh: wp.uint64, previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                          triangles: wp.array(dtype=wp.vec3i), start: wp.array(dtype=wp.vec3d),
                          proposed: wp.array(dtype=wp.vec3d), reach: wp.array(dtype=wp.float64), passes: int,
                          resolved: wp.array(dtype=wp.vec3d), push: wp.array(dtype=wp.float64),
                          normal: wp.array(dtype=wp.vec3d), motion: wp.array(dtype=wp.vec3d),
                          crossed: wp.array(dtype=wp.int32)):
    """Per point i (see module docstring). Outputs: resolved[i] end position; push[i] [m] total normal
    correction (0: no contact); normal[i] unit contact normal of the last correction (towards the
    point's side); motion[i] [m] displacement of the touched surface material over the substep;
    crossed[i] 1 where a crossing was undone."""
    i = wp.tid()
    x0 = start[i]
    x = proposed[i]
    r = reach[i]
    total = wp.float64(0.0)
    last_normal = wp.vec3d()
    last_motion = wp.vec3d()
    was_crossed = int(0)
    for _ in range(passes):
        query = wp.bvh_query_aabb(bvh, _lower(x0, x, r), _upper(x0, x, r))
        face = int(0)
        first_time = wp.float64(2.0)
        first_face = int(-1)
        nearest = r
        nearest_face = int(-1)
        nearest_weights = wp.vec3d()
        while wp.bvh_query_next(query, face):
            tri = triangles[face]
            a0 = previous[tri[0]]
            b0 = previous[tri[1]]
            c0 = previous[tri[2]]
            a1 = current[tri[0]]
            b1 = current[tri[1]]
            c1 = current[tri[2]]
            t = vertex_triangle_ccd(x0, x, a0, b0, c0, a1, b1, c1)
            if t >= wp.float64(0.0) and t < first_time:
                first_time = t
                first_face = face
            weights = closest_barycentric(x, a1, b1, c1)
            distance = wp.length(x - blend(weights, a1, b1, c1))
            if distance < nearest:
                nearest = distance
                nearest_face = face
                nearest_weights = weights
        if first_face < 0 and nearest_face < 0:
            break
        chosen = first_face
        if chosen < 0:
            chosen = nearest_face
        tri = triangles[chosen]
        a0 = previous[tri[0]]
        b0 = previous[tri[1]]
        c0 = previous[tri[2]]
        a1 = current[tri[0]]
        b1 = current[tri[1]]
        c1 = current[tri[2]]
        side = start_side(x0, x, a0, b0, c0, a1, b1, c1)
        face_normal = wp.cross(b1 - a1, c1 - a1)
        face_length = wp.length(face_normal)
        if face_length > wp.float64(0.0):
            face_normal = face_normal / face_length
        if first_face >= 0:
            # crossed during the substep: back to `r` in front of the crossed triangle, on the start side
            direction = side * face_normal
            correction = r - wp.dot(x - a1, direction)
            weights = closest_barycentric(x + correction * direction, a1, b1, c1)
            x = x + correction * direction
            was_crossed = 1
        else:
            surface = blend(nearest_weights, a1, b1, c1)
            gap = x - surface
            direction = side * face_normal
            if nearest > wp.float64(1e-12) * (wp.float64(1.0) + r):
                direction = gap / nearest
            correction = r - nearest
            weights = nearest_weights
            x = surface + r * direction
        total = total + correction
        last_normal = direction
        last_motion = blend(weights, a1 - a0, b1 - b0, c1 - c0)
    resolved[i] = x
    push[i] = total
    normal[i] = last_normal
    motion[i] = last_motion
    crossed[i] = was_crossed


@wp.kernel
def closest_on_mesh(bvh: wp.uint64, previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                    triangles: wp.array(dtype=wp.vec3i), points: wp.array(dtype=wp.vec3d), reach: wp.float64,
                    distance: wp.array(dtype=wp.float64), direction: wp.array(dtype=wp.vec3d),
                    face: wp.array(dtype=wp.int32), weights: wp.array(dtype=wp.vec3d),
                    motion: wp.array(dtype=wp.vec3d)):
    """Per point: unsigned distance [m] to the current pose within ``reach`` (inf and face −1 beyond),
    unit direction surface → point (the winding normal where the point lies on the surface), the
    closest face, its barycentric weights, and that surface material's displacement over the substep."""
    i = wp.tid()
    x = points[i]
    query = wp.bvh_query_aabb(wp.uint64(bvh), _lower(x, x, reach), _upper(x, x, reach))
    candidate = int(0)
    best = reach
    best_face = int(-1)
    best_weights = wp.vec3d()
    while wp.bvh_query_next(query, candidate):
        tri = triangles[candidate]
        w = closest_barycentric(x, current[tri[0]], current[tri[1]], current[tri[2]])
        d = wp.length(x - blend(w, current[tri[0]], current[tri[1]], current[tri[2]]))
        if d < best:
            best = d
            best_face = candidate
            best_weights = w
    face[i] = best_face
    if best_face < 0:
        distance[i] = wp.float64(1.0e300) * wp.float64(1.0e300)
        direction[i] = wp.vec3d()
        weights[i] = wp.vec3d()
        motion[i] = wp.vec3d()
        return
    tri = triangles[best_face]
    a1 = current[tri[0]]
    b1 = current[tri[1]]
    c1 = current[tri[2]]
    gap = x - blend(best_weights, a1, b1, c1)
    unit = wp.cross(b1 - a1, c1 - a1)
    if wp.length(unit) > wp.float64(0.0):
        unit = wp.normalize(unit)
    if best > wp.float64(1e-12):
        unit = gap / best
    distance[i] = best
    direction[i] = unit
    weights[i] = best_weights
    motion[i] = blend(best_weights, a1 - previous[tri[0]], b1 - previous[tri[1]], c1 - previous[tri[2]])


@wp.kernel
def inside_closed_shell(mesh: wp.uint64, flipped: wp.uint64, points: wp.array(dtype=wp.vec3d),
                        max_distance: wp.float32, inside: wp.array(dtype=wp.int32),
                        surface: wp.array(dtype=wp.vec3d)):
    """inside[i] = 1 where the generalized winding number of the mesh (with either orientation) around
    point i exceeds 0.5; surface[i]: the closest surface point (float32 BVH, then exact in float64)."""
    i = wp.tid()
    p = wp.vec3f(wp.float32(points[i][0]), wp.float32(points[i][1]), wp.float32(points[i][2]))
    query = wp.mesh_query_point_sign_winding_number(mesh, p, max_distance, 2.0, 0.5)
    reverse = wp.mesh_query_point_sign_winding_number(flipped, p, max_distance, 2.0, 0.5)
    is_inside = int(0)
    if query.result and query.sign < 0.0:
        is_inside = 1
    if reverse.result and reverse.sign < 0.0:
        is_inside = 1
    inside[i] = is_inside
    if query.result:
        closest = wp.mesh_eval_position(mesh, query.face, query.u, query.v)
        surface[i] = wp.vec3d(wp.float64(closest[0]), wp.float64(closest[1]), wp.float64(closest[2]))
    else:
        surface[i] = points[i]

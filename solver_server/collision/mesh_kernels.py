"""Warp kernels of the triangle-mesh collider (collision/mesh.py): two-sided contact kept by CCD.

A point's side of the surface is never read from face normals (docs/contact.md). Over a substep the
collider's triangles move linearly from their previous to their current vertices, and a point moves
from its start x0 to its proposed end x1:

* ``resolve_mesh_contacts``: for every point, the earliest crossing of a moving triangle along
  x0 → x1 (``kernels.geometry.vertex_triangle_ccd``) puts the point back `reach` in front of that
  triangle on the side it started on; otherwise a point closer than `reach` to the surface is moved
  out to `reach` along its own gap direction (the side it is on, which CCD just showed it never
  left). The test repeats (``passes``) from the corrected end, so a point in a concave corner or
  between thin layers ends clear of every triangle it can reach.
* ``collider_edge_contacts``: the points' edges against the mesh's edges, by CCD of both motions and
  by proximity, so a thin rim (an ear, a hem) cannot slip between two cloth vertices; corrections are
  summed per point with atomics and averaged by the caller (Jacobi), the mesh being kinematic.
* ``closest_on_mesh``: unsigned closest point within a reach: distance ≥ 0 and the unit direction
  from the surface to the point, so either side of any triangle is "outside" (DER hair's end-of-step
  tests; it keeps its sides with its own CCD).
* ``inside_closed_shell``: the generalized winding number of ``wp.Mesh`` built with every shell wound outward
  (``protocol.mesh_shells.outward_shells``: an artist's flipped shell counts as closed too), used only to recover
  points that START a job inside a closed shell, or that a CCD carried into one.

The candidate searches (``point_candidates``, ``edge_candidates``, ``edges_through_mesh``) write only their own
item's rows: they take the index of their first item (``first``) and are launched with ``kernels.launch_split``,
over the CPU's cores in contiguous ranges.
"""

from __future__ import annotations

import warp as wp

from ..kernels.bounds import (box_lower, box_upper, keep_candidate, paths_come_within, paths_may_meet,
                              swept_edge_lower, swept_edge_upper)
from ..kernels.geometry import (blend, closest_barycentric, edge_pair_contact, segment_crosses_triangle,
                                start_side, vertex_triangle_ccd)


@wp.func
def pose_vertex(previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d), index: int,
                fraction: wp.float64) -> wp.vec3d:
    """Vertex ``index`` at ``fraction`` of the substep (linear motion; 0 and 1 return the stored poses exactly)."""
    if fraction == wp.float64(0.0):
        return previous[index]
    if fraction == wp.float64(1.0):
        return current[index]
    return previous[index] + fraction * (current[index] - previous[index])


@wp.func
def swept_triangle(previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                   triangles: wp.array(dtype=wp.int32, ndim=2), face: int, begin: wp.float64, end: wp.float64):
    """Corners (a0, b0, c0) of triangle ``face`` at fraction ``begin`` of the substep and (a1, b1, c1) at ``end``."""
    return (pose_vertex(previous, current, triangles[face, 0], begin),
            pose_vertex(previous, current, triangles[face, 1], begin),
            pose_vertex(previous, current, triangles[face, 2], begin),
            pose_vertex(previous, current, triangles[face, 0], end),
            pose_vertex(previous, current, triangles[face, 1], end),
            pose_vertex(previous, current, triangles[face, 2], end))


@wp.func
def within(x: wp.vec3d, built: wp.vec3d, margin: wp.float64) -> bool:
    """Whether x lies within ``margin`` [m] of ``built`` along every axis (a candidate list built there
    still holds every element x's query can meet)."""
    return (wp.abs(x[0] - built[0]) <= margin and wp.abs(x[1] - built[1]) <= margin
            and wp.abs(x[2] - built[2]) <= margin)


@wp.func
def _closer_face(face: int, x0: wp.vec3d, x: wp.vec3d, previous: wp.array(dtype=wp.vec3d),
                 current: wp.array(dtype=wp.vec3d), triangles: wp.array(dtype=wp.int32, ndim=2),
                 begin: wp.float64, end: wp.float64, first_time: wp.float64, first_face: int,
                 nearest: wp.float64, nearest_face: int, nearest_weights: wp.vec3d):
    """One triangle of a point's pass in ``resolve_mesh_contacts``: the earliest crossing (time, face) and the
    nearest face (distance, face, weights) so far, updated with ``face``."""
    a0, b0, c0, a1, b1, c1 = swept_triangle(previous, current, triangles, face, begin, end)
    if not paths_come_within(x0, x, x0, x, a0, a1, b0, b1, c0, c1, nearest):
        # no crossing and no point nearer than the nearest so far (at most the reach): nothing to update
        return first_time, first_face, nearest, nearest_face, nearest_weights
    t = wp.float64(-1.0)
    if paths_may_meet(x0, x, x0, x, a0, a1, b0, b1, c0, c1):
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
    return first_time, first_face, nearest, nearest_face, nearest_weights


@wp.func
def listed_in_box(bvh: wp.uint64, low: wp.vec3f, high: wp.vec3f, found: wp.array(dtype=wp.int32, ndim=2),
                  row: int) -> int:
    """The elements whose boxes in ``bvh`` meet the box low–high, kept in row ``row`` of ``found`` in the tree's
    order while it has room (``keep_candidate``); returns how many there are."""
    query = wp.bvh_query_aabb(bvh, low, high)
    element = int(0)
    n = int(0)
    while wp.bvh_query_next(query, element):
        n = keep_candidate(found, row, n, element)
    return n


# what a query does with its candidate lists (``_PathLists``; control[2] of ``decide_paths``)
PATHS_USE = wp.constant(0)      # the lists hold the paths: every path within the margin of ``built`` uses them
PATHS_RECORD = wp.constant(1)   # new start positions or reaches: kept, no lists (every path queries the tree)
PATHS_BUILD = wp.constant(2)    # the same paths again, too many ending beyond the margin: lists built anew


@wp.func
def same_path(a: wp.vec3d, b: wp.vec3d, reach_a: wp.float64, reach_b: wp.float64) -> bool:
    return a[0] == b[0] and a[1] == b[1] and a[2] == b[2] and reach_a == reach_b


@wp.func
def path_counts(start: wp.array(dtype=wp.vec3d), reach: wp.array(dtype=wp.float64),
                kept_start: wp.array(dtype=wp.vec3d), kept_reach: wp.array(dtype=wp.float64),
                ends: wp.array(dtype=wp.vec3d), built: wp.array(dtype=wp.vec3d), margin: wp.float64, i: int):
    """(1 if point i's start or reach differs from the kept ones, 1 if it ends beyond ``margin`` [m] of where the
    lists were built: always while nothing is built)."""
    differs = int(0)
    beyond = int(0)
    if not same_path(start[i], kept_start[i], reach[i], kept_reach[i]):
        differs = 1
    if not within(ends[i], built[i], margin):
        beyond = 1
    return differs, beyond


@wp.func
def decided_mode(differing: int, beyond: int, forced: int, rebuild_above: wp.float64) -> int:
    """What a query does with its lists (PATHS_*): record new paths (``forced`` when the mesh's pose or the
    query's kind changed), build when more than ``rebuild_above`` points end beyond the margin, else use them."""
    if forced != 0 or differing > 0:
        return PATHS_RECORD
    if wp.float64(beyond) > rebuild_above:
        return PATHS_BUILD
    return PATHS_USE


@wp.func
def refresh_path(mode: int, start: wp.array(dtype=wp.vec3d), reach: wp.array(dtype=wp.float64),
                 ends: wp.array(dtype=wp.vec3d), kept_start: wp.array(dtype=wp.vec3d),
                 kept_reach: wp.array(dtype=wp.float64), built: wp.array(dtype=wp.vec3d), i: int):
    """Point i: on PATHS_RECORD keep its start and reach and forget where lists were built (inf: no path is
    within the margin of it); on PATHS_BUILD the lists are built at its end."""
    if mode == PATHS_RECORD:
        kept_start[i] = start[i]
        kept_reach[i] = reach[i]
        far = wp.float64(wp.inf)
        built[i] = wp.vec3d(far, far, far)
    elif mode == PATHS_BUILD:
        built[i] = ends[i]


@wp.kernel
def compare_paths(start: wp.array(dtype=wp.vec3d), reach: wp.array(dtype=wp.float64),
                  kept_start: wp.array(dtype=wp.vec3d), kept_reach: wp.array(dtype=wp.float64),
                  ends: wp.array(dtype=wp.vec3d), built: wp.array(dtype=wp.vec3d), margin: wp.float64,
                  control: wp.array(dtype=wp.int32)):
    """CUDA's layout, per point: ``path_counts`` summed into control[0] (differing) and control[1] (beyond)."""
    i = wp.tid()
    differs, beyond = path_counts(start, reach, kept_start, kept_reach, ends, built, margin, i)
    if differs == 1:
        wp.atomic_add(control, 0, 1)
    if beyond == 1:
        wp.atomic_add(control, 1, 1)


@wp.kernel
def decide_paths(control: wp.array(dtype=wp.int32), forced: int, rebuild_above: wp.float64,
                 builds: wp.array(dtype=wp.int32)):
    """CUDA's layout, one thread: control[2] = ``decided_mode``; builds[0] counts builds; the counters cleared
    for the next query."""
    mode = decided_mode(control[0], control[1], forced, rebuild_above)
    control[2] = mode
    if mode == PATHS_BUILD:
        builds[0] = builds[0] + 1
    control[0] = 0
    control[1] = 0


@wp.kernel
def refresh_paths(control: wp.array(dtype=wp.int32), start: wp.array(dtype=wp.vec3d),
                  reach: wp.array(dtype=wp.float64), ends: wp.array(dtype=wp.vec3d),
                  kept_start: wp.array(dtype=wp.vec3d), kept_reach: wp.array(dtype=wp.float64),
                  built: wp.array(dtype=wp.vec3d)):
    """CUDA's layout, per point: ``refresh_path`` with the decided mode."""
    i = wp.tid()
    refresh_path(control[2], start, reach, ends, kept_start, kept_reach, built, i)


@wp.kernel
def paths_sequential(start: wp.array(dtype=wp.vec3d), reach: wp.array(dtype=wp.float64),
                     kept_start: wp.array(dtype=wp.vec3d), kept_reach: wp.array(dtype=wp.float64),
                     ends: wp.array(dtype=wp.vec3d), built: wp.array(dtype=wp.vec3d), margin: wp.float64,
                     forced: int, rebuild_above: wp.float64, control: wp.array(dtype=wp.int32),
                     builds: wp.array(dtype=wp.int32)):
    """The CPU layout of ``compare_paths``, ``decide_paths`` and ``refresh_paths`` in one thread and one launch
    (three launches cost more than the loops on the CPU)."""
    differing = int(0)
    beyond = int(0)
    for i in range(start.shape[0]):
        differs, out = path_counts(start, reach, kept_start, kept_reach, ends, built, margin, i)
        differing += differs
        beyond += out
    mode = decided_mode(differing, beyond, forced, rebuild_above)
    control[2] = mode
    if mode == PATHS_BUILD:
        builds[0] = builds[0] + 1
    for i in range(start.shape[0]):
        refresh_path(mode, start, reach, ends, kept_start, kept_reach, built, i)


@wp.kernel
def point_candidates(first: int, control: wp.array(dtype=wp.int32), bvh: wp.uint64,
                     start: wp.array(dtype=wp.vec3d), built: wp.array(dtype=wp.vec3d),
                     reach: wp.array(dtype=wp.float64), margin: wp.float64,
                     found: wp.array(dtype=wp.int32, ndim=2), found_count: wp.array(dtype=wp.int32)):
    """On PATHS_BUILD (control[2]): the triangles whose swept boxes meet point i's box start → built grown by its
    reach and ``margin`` [m], in the tree's order: the first found.shape[1] in found[i], their number (all of them)
    in found_count[i] (a row that overflows is not used: its point queries the tree)."""
    i = first + wp.tid()
    if control[2] != PATHS_BUILD:
        return
    pad = reach[i] + margin
    found_count[i] = listed_in_box(bvh, box_lower(start[i], built[i], pad), box_upper(start[i], built[i], pad),
                                   found, i)


@wp.func
def uses_list(found: wp.array(dtype=wp.int32, ndim=2), found_count: wp.array(dtype=wp.int32), row: int) -> bool:
    """Whether row ``row`` of a candidate list holds every element its search met."""
    return found_count[row] <= found.shape[1]


@wp.kernel
def resolve_mesh_contacts(bvh: wp.uint64, previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                          triangles: wp.array(dtype=wp.int32, ndim=2), start: wp.array(dtype=wp.vec3d),
                          proposed: wp.array(dtype=wp.vec3d), reach: wp.array(dtype=wp.float64), passes: int,
                          begin: wp.float64, end: wp.float64, found: wp.array(dtype=wp.int32, ndim=2),
                          found_count: wp.array(dtype=wp.int32), built: wp.array(dtype=wp.vec3d),
                          margin: wp.float64,
                          resolved: wp.array(dtype=wp.vec3d), push: wp.array(dtype=wp.float64),
                          normal: wp.array(dtype=wp.vec3d), motion: wp.array(dtype=wp.vec3d),
                          crossed: wp.array(dtype=wp.int32)):
    """Per point i (see module docstring). The point moves start → proposed while the triangles move from
    their pose at fraction ``begin`` of the substep to their pose at ``end`` (0 ≤ begin ≤ end ≤ 1; 0 and 1
    read the previous and current vertices exactly; a solver with shorter internal steps passes the part
    of the substep that its step covers). A pass whose point lies within ``margin`` of where the candidate
    lists were built (``built``, ``point_candidates``; inf while none are) tests the point's listed triangles
    (unless its row overflowed), any other pass queries the tree. Outputs: resolved[i] end position; push[i] [m] total normal
    correction (0: no contact); normal[i] unit contact normal of the last correction (towards the
    point's side); motion[i] [m] displacement of the touched surface material over the whole substep;
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
        first_time = wp.float64(2.0)
        first_face = int(-1)
        nearest = r
        nearest_face = int(-1)
        nearest_weights = wp.vec3d()
        if within(x, built[i], margin) and uses_list(found, found_count, i):
            for k in range(found_count[i]):
                first_time, first_face, nearest, nearest_face, nearest_weights = _closer_face(
                    found[i, k], x0, x, previous, current, triangles, begin, end, first_time, first_face, nearest,
                    nearest_face, nearest_weights)
        else:
            query = wp.bvh_query_aabb(bvh, box_lower(x0, x, r), box_upper(x0, x, r))
            face = int(0)
            while wp.bvh_query_next(query, face):
                first_time, first_face, nearest, nearest_face, nearest_weights = _closer_face(
                    face, x0, x, previous, current, triangles, begin, end, first_time, first_face, nearest,
                    nearest_face, nearest_weights)
        if first_face < 0 and nearest_face < 0:
            break
        chosen = first_face
        if chosen < 0:
            chosen = nearest_face
        tri = triangles[chosen]
        a0, b0, c0, a1, b1, c1 = swept_triangle(previous, current, triangles, chosen, begin, end)
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
        last_motion = blend(weights, current[tri[0]] - previous[tri[0]], current[tri[1]] - previous[tri[1]],
                            current[tri[2]] - previous[tri[2]])
    resolved[i] = x
    push[i] = total
    normal[i] = last_normal
    motion[i] = last_motion
    crossed[i] = was_crossed


@wp.kernel
def closest_on_mesh(bvh: wp.uint64, previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                    triangles: wp.array(dtype=wp.int32, ndim=2), points: wp.array(dtype=wp.vec3d), reach: wp.float64,
                    distance: wp.array(dtype=wp.float64), direction: wp.array(dtype=wp.vec3d),
                    face: wp.array(dtype=wp.int32), weights: wp.array(dtype=wp.vec3d),
                    motion: wp.array(dtype=wp.vec3d)):
    """Per point: unsigned distance [m] to the current pose within ``reach`` (inf and face −1 beyond),
    unit direction surface → point (the winding normal where the point lies on the surface), the
    closest face, its barycentric weights, and that surface material's displacement over the substep."""
    i = wp.tid()
    x = points[i]
    query = wp.bvh_query_aabb(wp.uint64(bvh), box_lower(x, x, reach), box_upper(x, x, reach))
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


@wp.func
def _winds_inside(query: wp.MeshQueryPoint) -> bool:
    """Whether a point's winding-number query against a mesh whose shells are wound outward puts it inside one."""
    return query.result and query.sign < 0.0


@wp.kernel
def inside_closed_shell(mesh: wp.uint64, points: wp.array(dtype=wp.vec3d), max_distance: wp.float32,
                        inside: wp.array(dtype=wp.int32), surface: wp.array(dtype=wp.vec3d)):
    """inside[i] = 1 where the generalized winding number of the mesh (its shells wound outward) around point i
    exceeds 0.5; surface[i]: the closest surface point (float32 BVH, then exact in float64)."""
    i = wp.tid()
    p = wp.vec3f(wp.float32(points[i][0]), wp.float32(points[i][1]), wp.float32(points[i][2]))
    query = wp.mesh_query_point_sign_winding_number(mesh, p, max_distance, 2.0, 0.5)
    inside[i] = int(_winds_inside(query))
    if query.result:
        closest = wp.mesh_eval_position(mesh, query.face, query.u, query.v)
        surface[i] = wp.vec3d(wp.float64(closest[0]), wp.float64(closest[1]), wp.float64(closest[2]))
    else:
        surface[i] = points[i]


EXIT_HITS = 8
"""Surfaces a ray crosses at most while it looks for the way out of overlapping closed shells."""


@wp.func
def _outside_every_shell(mesh: wp.uint64, p: wp.vec3f, max_distance: wp.float32) -> bool:
    return not _winds_inside(wp.mesh_query_point_sign_winding_number(mesh, p, max_distance, 2.0, 0.5))


@wp.func
def _exit_along(mesh: wp.uint64, p: wp.vec3f, direction: wp.vec3f, max_distance: wp.float32,
                beyond: wp.float32) -> wp.float32:
    """Distance from p along the unit ``direction`` to the first point ``beyond`` past a surface that lies outside
    every shell (at most EXIT_HITS surfaces crossed), or −1."""
    travelled = wp.float32(0.0)
    for _ in range(EXIT_HITS):
        hit = wp.mesh_query_ray(mesh, p + travelled * direction, direction, max_distance)
        if not hit.result:
            return wp.float32(-1.0)
        travelled = travelled + hit.t + beyond
        if _outside_every_shell(mesh, p + travelled * direction, max_distance):
            return travelled
    return wp.float32(-1.0)


@wp.kernel
def out_of_closed_shells(mesh: wp.uint64, points: wp.array(dtype=wp.vec3d),
                         inside: wp.array(dtype=wp.int32), surface: wp.array(dtype=wp.vec3d),
                         reach: wp.array(dtype=wp.float64), max_distance: wp.float32,
                         moved: wp.array(dtype=wp.vec3d)):
    """moved[i]: point i, when ``inside`` a closed shell, put ``reach`` beyond the surface outside every shell: its
    nearest ``surface`` point when that lies on the outside; where shells overlap (an ear through a head) the
    nearest surface can lead into the other shell, and the point leaves along the shortest of 14 rays (towards
    that surface point, away from it, the 6 axes and the 6 half-diagonals in the plane of two axes) to a
    surface beyond which it is outside every shell. Points not inside are copied."""
    i = wp.tid()
    point = points[i]
    moved[i] = point
    if inside[i] == 0:
        return
    through = surface[i] - point
    length = wp.length(through)
    toward = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(1.0))
    if length > wp.float64(0.0):
        toward = through / length
    nearest = surface[i] + reach[i] * toward
    p = wp.vec3f(wp.float32(point[0]), wp.float32(point[1]), wp.float32(point[2]))
    if _outside_every_shell(mesh, wp.vec3f(wp.float32(nearest[0]), wp.float32(nearest[1]),
                                                    wp.float32(nearest[2])), max_distance):
        moved[i] = nearest
        return
    beyond = wp.float32(1.0e-5)
    best = wp.float32(-1.0)
    best_direction = wp.vec3f()
    for k in range(14):
        direction = wp.vec3f(wp.float32(toward[0]), wp.float32(toward[1]), wp.float32(toward[2]))
        if k == 1:
            direction = -direction
        if k >= 2 and k < 8:
            axis = (k - 2) / 2
            direction = wp.vec3f(0.0, 0.0, 0.0)
            direction[axis] = wp.float32(1.0 - 2.0 * float((k - 2) % 2))
        if k >= 8:
            first = (k - 8) / 2
            second = (first + 1) % 3
            direction = wp.vec3f(0.0, 0.0, 0.0)
            direction[first] = wp.float32(0.70710678)
            direction[second] = wp.float32(0.70710678 * (1.0 - 2.0 * float((k - 8) % 2)))
        distance = _exit_along(mesh, p, direction, max_distance, beyond)
        if distance >= wp.float32(0.0) and (best < wp.float32(0.0) or distance < best):
            best = distance
            best_direction = direction
    if best >= wp.float32(0.0):
        unit = wp.vec3d(wp.float64(best_direction[0]), wp.float64(best_direction[1]), wp.float64(best_direction[2]))
        moved[i] = point + (wp.float64(best) + reach[i]) * unit
    else:
        moved[i] = nearest


@wp.func
def _passes_through_mesh(bvh: wp.uint64, previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                         fraction: wp.float64, triangles: wp.array(dtype=wp.int32, ndim=2),
                         p: wp.vec3d, q: wp.vec3d) -> bool:
    """Whether segment p–q passes through a triangle of the mesh at ``fraction`` of the substep (whose swept
    boxes the BVH's contain)."""
    query = wp.bvh_query_aabb(bvh, box_lower(p, q, wp.float64(0.0)), box_upper(p, q, wp.float64(0.0)))
    t = int(0)
    while wp.bvh_query_next(query, t):
        if segment_crosses_triangle(p, q, pose_vertex(previous, current, triangles[t, 0], fraction),
                                    pose_vertex(previous, current, triangles[t, 1], fraction),
                                    pose_vertex(previous, current, triangles[t, 2], fraction)):
            return True
    return False


@wp.kernel
def edges_through_mesh(first: int, control: wp.array(dtype=wp.int32), triangle_bvh: wp.uint64,
                       previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                       fraction: wp.float64, mesh_triangles: wp.array(dtype=wp.int32, ndim=2),
                       start: wp.array(dtype=wp.vec3d), point_edges: wp.array(dtype=wp.int32, ndim=2),
                       through: wp.array(dtype=wp.int32)):
    """When the query records new paths (control[2] == PATHS_RECORD: new starts, or a new pose): through[e] = 1
    where point edge e at its start already passes through a triangle of the mesh at ``fraction`` of the substep
    (``collider_edge_contacts`` leaves such an edge free), else 0. A query that uses or builds lists has the
    starts and the pose of the recording one (``decided_mode``), so its flags stand."""
    e = first + wp.tid()
    if control[2] != PATHS_RECORD:
        return
    through[e] = 0
    if _passes_through_mesh(triangle_bvh, previous, current, fraction, mesh_triangles, start[point_edges[e, 0]],
                            start[point_edges[e, 1]]):
        through[e] = 1


@wp.kernel
def edge_candidates(first: int, control: wp.array(dtype=wp.int32), bvh: wp.uint64,
                    start: wp.array(dtype=wp.vec3d), built: wp.array(dtype=wp.vec3d),
                    point_edges: wp.array(dtype=wp.int32, ndim=2),
                    reach: wp.array(dtype=wp.float64), margin: wp.float64, found: wp.array(dtype=wp.int32, ndim=2),
                    found_count: wp.array(dtype=wp.int32)):
    """On PATHS_BUILD: the mesh edges whose swept boxes meet point edge e's box (both points start → built, grown
    by their larger reach and ``margin`` [m]), in the tree's order (as ``point_candidates``)."""
    e = first + wp.tid()
    if control[2] != PATHS_BUILD:
        return
    ia = point_edges[e, 0]
    ib = point_edges[e, 1]
    pad = wp.max(reach[ia], reach[ib]) + margin
    found_count[e] = listed_in_box(bvh, swept_edge_lower(start[ia], built[ia], start[ib], built[ib], pad),
                                   swept_edge_upper(start[ia], built[ia], start[ib], built[ib], pad), found, e)


# a point edge whose correction exceeds this fraction of its reach (closer to a mesh edge than a tenth of the reach,
# or crossed) lies deep in the contact offset (contacts[3]); a cloth edge sagging a few millimetres over a rim
# between two vertices that the vertex contact holds at their offset stays above that
DEEP_EDGE_FRACTION = wp.constant(wp.float64(0.9))


@wp.func
def _mesh_edge_contact(f: int, ia: int, ib: int, a0: wp.vec3d, b0: wp.vec3d, a1: wp.vec3d, b1: wp.vec3d,
                       r: wp.float64, previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                       mesh_edges: wp.array(dtype=wp.int32, ndim=2), inverse_mass: wp.array(dtype=wp.float64),
                       begin: wp.float64, end: wp.float64, correction: wp.array(dtype=wp.vec3d),
                       count: wp.array(dtype=wp.int32), contacts: wp.array(dtype=wp.int32),
                       crossed_point: wp.array(dtype=wp.int32)):
    """Point edge (ia, ib) moving a0 b0 → a1 b1 against mesh edge f (``collider_edge_contacts``); a pair whose
    swept boxes stay farther apart than ``r`` neither crossed nor touches and is passed over at once."""
    one = wp.float64(1.0)
    c0 = pose_vertex(previous, current, mesh_edges[f, 0], begin)
    d0 = pose_vertex(previous, current, mesh_edges[f, 1], begin)
    c1 = pose_vertex(previous, current, mesh_edges[f, 0], end)
    d1 = pose_vertex(previous, current, mesh_edges[f, 1], end)
    if not paths_come_within(a0, a1, b0, b1, c0, c1, d0, d1, d0, d1, r):
        return
    contact = edge_pair_contact(a0, b0, c0, d0, a1, b1, c1, d1, r)
    error = contact.error
    direction = contact.direction
    s = contact.s
    w_a = (one - s) * inverse_mass[ia]
    w_b = s * inverse_mass[ib]
    denominator = (one - s) * w_a + s * w_b
    if denominator <= wp.float64(0.0) or error <= wp.float64(0.0):
        return
    lam = error / denominator
    wp.atomic_add(correction, ia, (lam * w_a) * direction)
    wp.atomic_add(correction, ib, (lam * w_b) * direction)
    wp.atomic_add(count, ia, 1)
    wp.atomic_add(count, ib, 1)
    wp.atomic_add(contacts, 0, 1)
    if error > DEEP_EDGE_FRACTION * r:
        wp.atomic_add(contacts, 3, 1)
    if contact.crossed != 0:
        wp.atomic_add(contacts, 1, 1)
        crossed_point[ia] = 1
        crossed_point[ib] = 1


@wp.kernel
def collider_edge_contacts(bvh: wp.uint64, previous: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                           mesh_edges: wp.array(dtype=wp.int32, ndim=2), start: wp.array(dtype=wp.vec3d),
                           proposed: wp.array(dtype=wp.vec3d), point_edges: wp.array(dtype=wp.int32, ndim=2),
                           reach: wp.array(dtype=wp.float64), inverse_mass: wp.array(dtype=wp.float64),
                           begin: wp.float64, end: wp.float64, through: wp.array(dtype=wp.int32),
                           found: wp.array(dtype=wp.int32, ndim=2), found_count: wp.array(dtype=wp.int32),
                           built: wp.array(dtype=wp.vec3d), margin: wp.float64,
                           correction: wp.array(dtype=wp.vec3d), count: wp.array(dtype=wp.int32),
                           contacts: wp.array(dtype=wp.int32), crossed_point: wp.array(dtype=wp.int32)):
    """Point edge e (start → proposed) against every mesh edge moving from its pose at fraction ``begin`` of
    the substep to its pose at ``end`` (as ``resolve_mesh_contacts``; the swept boxes cover the whole substep)
    whose swept box it meets: crossed during that part, or closer than the endpoints' larger reach. The point edge is
    moved back to that distance on the side it started on; the mesh edge does not move. contacts[0]
    counts the pairs in contact, contacts[1] those that had crossed, contacts[3] those closer than
    DEEP_EDGE_FRACTION of the reach (crossed or not); crossed_point is set to 1 at both
    points of an edge that had crossed. An edge whose points lie within ``margin`` of where the candidate
    lists were built (``built``, ``edge_candidates``) tests its listed mesh edges (unless its row overflowed),
    any other edge queries the tree.

    A point edge that already passes through a mesh triangle at the start (``through``, from
    ``edges_through_mesh``: a thin part such as an ear got between its two points earlier) is left free
    (contacts[2] counts these): keeping the sides it has would hold it through the mesh for the rest of the
    shot, while free, the vertex contact and the cloth's own elasticity draw it out around the rim."""
    e = wp.tid()
    if through[e] != 0:
        wp.atomic_add(contacts, 2, 1)
        return
    ia = point_edges[e, 0]
    ib = point_edges[e, 1]
    a0 = start[ia]
    b0 = start[ib]
    a1 = proposed[ia]
    b1 = proposed[ib]
    r = wp.max(reach[ia], reach[ib])
    if within(a1, built[ia], margin) and within(b1, built[ib], margin) and uses_list(found, found_count, e):
        for k in range(found_count[e]):
            _mesh_edge_contact(found[e, k], ia, ib, a0, b0, a1, b1, r, previous, current, mesh_edges, inverse_mass,
                               begin, end, correction, count, contacts, crossed_point)
        return
    query = wp.bvh_query_aabb(bvh, swept_edge_lower(a0, a1, b0, b1, r), swept_edge_upper(a0, a1, b0, b1, r))
    f = int(0)
    while wp.bvh_query_next(query, f):
        _mesh_edge_contact(f, ia, ib, a0, b0, a1, b1, r, previous, current, mesh_edges, inverse_mass, begin, end,
                           correction, count, contacts, crossed_point)

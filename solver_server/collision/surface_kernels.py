"""Warp kernels of contact between PD surfaces (collision/self_collision.py): vertex–triangle and
edge–edge, each by CCD over the pass (start → current positions) and by proximity, two-sided.

Every pass is one Jacobi sweep: each contact computes a position-based correction that restores the
separation d = the two sides' thicknesses on the side the pair started on (the sign of the coplanarity
function at the start, never a winding normal), weighted by inverse masses, and adds it to per-point
sums with atomics; the host averages the sums per point. Pairs come from candidate lists: ``wp.Bvh`` AABB
queries over the boxes of the elements' motion from the substep's start to the positions at the list's
build, padded by the largest separation and a margin, so the list holds every pair a pass can need while
no point has moved farther than the margin since the build (then it is built again). The searches write only
their own item's row: they take their first item's index (``first``) and run over the CPU's cores in
contiguous ranges (``kernels.launch_split``).

Rules for pairs: a point never touches a triangle it is a corner of, edges sharing a point never
touch, and two elements of one object touch only when that object has self-collision. Against another
object a point may hold (``holds``: a taut cloth under a heavy body): it then does not move, and the other side
takes the whole correction (``pair_inverse_mass``).
"""

from __future__ import annotations

import warp as wp

from ..kernels.bounds import (box_lower, box_upper, keep_candidate, paths_come_within, paths_may_meet,
                              swept_edge_lower, swept_edge_upper)
from ..kernels.geometry import (blend, closest_barycentric, edge_pair_contact, start_side,
                                vertex_triangle_ccd)


@wp.func
def _may_touch(owner_a: int, owner_b: int, self_contact: wp.array(dtype=wp.int32)) -> bool:
    return owner_a != owner_b or self_contact[owner_a] != 0


@wp.func
def _record_crossed(contacts: wp.array(dtype=wp.int32), crossed_pairs: wp.array(dtype=wp.int32, ndim=2),
                    p: int, q: int, r: int, s: int):
    """Count a pair that passed through each other (contacts[2]) and keep its four points while rows last."""
    row = wp.atomic_add(contacts, 2, 1)
    if row < crossed_pairs.shape[0]:
        crossed_pairs[row, 0] = p
        crossed_pairs[row, 1] = q
        crossed_pairs[row, 2] = r
        crossed_pairs[row, 3] = s


@wp.func
def _count_unsettled(contacts: wp.array(dtype=wp.int32), crossed: bool, error: wp.float64, tolerance: wp.float64):
    """Count a corrected pair in contacts[3] when it had crossed or its error [m] exceeds ``tolerance`` [m]: while
    none is counted, another pass would only move resting layers by less than the tolerance."""
    if crossed or error > tolerance:
        wp.atomic_add(contacts, 3, 1)


@wp.func
def _settled_share(point_owner: wp.array(dtype=wp.int32), p: int, q: int, settled: wp.float64,
                   settled_within: wp.float64) -> wp.float64:
    """The share of its separation a pair of points p, q may keep as residue once layers rest: ``settled_within``
    when both belong to one object (a cloth's own folds), else ``settled`` (a body weighing on a cloth)."""
    if point_owner[p] == point_owner[q]:
        return settled_within
    return settled


@wp.func
def _add_four(correction: wp.array(dtype=wp.vec3d), count: wp.array(dtype=wp.int32), p: int, q: int, r: int, s: int,
              move_p: wp.vec3d, move_q: wp.vec3d, move_r: wp.vec3d, move_s: wp.vec3d):
    """One contact's corrections [m] of its four points added to the per-point sums and counts (Jacobi)."""
    wp.atomic_add(correction, p, move_p)
    wp.atomic_add(correction, q, move_q)
    wp.atomic_add(correction, r, move_r)
    wp.atomic_add(correction, s, move_s)
    wp.atomic_add(count, p, 1)
    wp.atomic_add(count, q, 1)
    wp.atomic_add(count, r, 1)
    wp.atomic_add(count, s, 1)


@wp.kernel
def point_triangle_candidates(first: int, bvh: wp.uint64, start: wp.array(dtype=wp.vec3d),
                              built: wp.array(dtype=wp.vec3d),
                              triangles: wp.array(dtype=wp.int32, ndim=2), triangle_owner: wp.array(dtype=wp.int32),
                              point_owner: wp.array(dtype=wp.int32), self_contact: wp.array(dtype=wp.int32),
                              reach: wp.float64, found: wp.array(dtype=wp.int32, ndim=2),
                              found_count: wp.array(dtype=wp.int32)):
    """The triangles point i may touch while the points stay within the build's margin: those whose boxes
    (``bvh``: start → built, grown by the pad and the margin) meet the point's box start → built grown by
    ``reach`` [m] (the pad and the margin), less its own triangles and those of objects it does not touch;
    in the tree's order, the first found.shape[1] of them kept in found[i], their number (all of them, so a
    caller sees an overflow) in found_count[i]."""
    i = first + wp.tid()
    query = wp.bvh_query_aabb(bvh, box_lower(start[i], built[i], reach), box_upper(start[i], built[i], reach))
    t = int(0)
    n = int(0)
    while wp.bvh_query_next(query, t):
        if triangles[t, 0] == i or triangles[t, 1] == i or triangles[t, 2] == i \
                or not _may_touch(point_owner[i], triangle_owner[t], self_contact):
            continue
        n = keep_candidate(found, i, n, t)
    found_count[i] = n


@wp.kernel
def edge_edge_candidates(first: int, bvh: wp.uint64, start: wp.array(dtype=wp.vec3d),
                         built: wp.array(dtype=wp.vec3d),
                         edges: wp.array(dtype=wp.int32, ndim=2), edge_owner: wp.array(dtype=wp.int32),
                         self_contact: wp.array(dtype=wp.int32), reach: wp.float64,
                         found: wp.array(dtype=wp.int32, ndim=2), found_count: wp.array(dtype=wp.int32)):
    """The edges f > e that edge e may touch while the points stay within the build's margin (as
    ``point_triangle_candidates``): no shared point, objects that touch."""
    e = first + wp.tid()
    ia = edges[e, 0]
    ib = edges[e, 1]
    query = wp.bvh_query_aabb(bvh, swept_edge_lower(start[ia], built[ia], start[ib], built[ib], reach),
                              swept_edge_upper(start[ia], built[ia], start[ib], built[ib], reach))
    f = int(0)
    n = int(0)
    while wp.bvh_query_next(query, f):
        if f <= e:
            continue
        ic = edges[f, 0]
        id = edges[f, 1]
        if ic == ia or ic == ib or id == ia or id == ib or not _may_touch(edge_owner[e], edge_owner[f], self_contact):
            continue
        n = keep_candidate(found, e, n, f)
    found_count[e] = n


@wp.func
def pair_inverse_mass(point: int, other_side: int, point_owner: wp.array(dtype=wp.int32),
                      inverse_mass: wp.array(dtype=wp.float64), holds: wp.array(dtype=wp.int32), move: wp.vec3d,
                      down: wp.vec3d):
    """The inverse mass a contact gives ``point`` when its other side has point ``other_side`` and the contact
    moves ``point`` along ``move``: against another object that weighs on it (the move has a part along ``down``,
    the unit direction of gravity; every move where there is no gravity), a point that holds (a taut cloth
    under a heavy body) does not move, so the body takes the whole correction instead of the light cloth taking
    all of it; else its own. A taut cloth lying over a body that rests on the ground does not hold: it is lifted,
    not the body pushed down."""
    if holds[point] != 0 and point_owner[point] != point_owner[other_side] \
            and (wp.dot(move, down) > wp.float64(0.0) or wp.length(down) == wp.float64(0.0)):
        return wp.float64(0.0)
    return inverse_mass[point]


@wp.kernel
def point_triangle_contacts(start: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                            triangles: wp.array(dtype=wp.int32, ndim=2), thickness: wp.array(dtype=wp.float64),
                            inverse_mass: wp.array(dtype=wp.float64), holds: wp.array(dtype=wp.int32),
                            point_owner: wp.array(dtype=wp.int32), down: wp.vec3d,
                            settled: wp.float64, settled_within: wp.float64,
                            found: wp.array(dtype=wp.int32, ndim=2),
                            found_count: wp.array(dtype=wp.int32), correction: wp.array(dtype=wp.vec3d),
                            count: wp.array(dtype=wp.int32), contacts: wp.array(dtype=wp.int32),
                            crossed_pairs: wp.array(dtype=wp.int32, ndim=2)):
    """Point i against its candidate triangles (``point_triangle_candidates``): crossed during the pass (CCD)
    or closer than the separation. Adds the corrections of point and corners to correction/count;
    contacts[0] += pairs, contacts[2] += pairs that had passed through each other, whose four points go to
    crossed_pairs (rows beyond its length are counted, not kept), contacts[3] += pairs that had crossed or
    lay closer than (1 − ``settled``) × their separation (``settled_within`` for a pair within one object)."""
    i = wp.tid()
    x0 = start[i]
    x1 = current[i]
    for k in range(found_count[i]):
        t = found[i, k]
        ia = triangles[t, 0]
        ib = triangles[t, 1]
        ic = triangles[t, 2]
        a0 = start[ia]
        b0 = start[ib]
        c0 = start[ic]
        a1 = current[ia]
        b1 = current[ib]
        c1 = current[ic]
        separation = thickness[i] + wp.max(thickness[ia], wp.max(thickness[ib], thickness[ic]))
        if not paths_come_within(x0, x1, x0, x1, a0, a1, b0, b1, c0, c1, separation):
            continue    # never within the separation, so neither crossed nor touching
        weights = closest_barycentric(x1, a1, b1, c1)
        gap = x1 - blend(weights, a1, b1, c1)
        distance = wp.length(gap)
        crossed = False
        if paths_may_meet(x0, x1, x0, x1, a0, a1, b0, b1, c0, c1):
            crossed = vertex_triangle_ccd(x0, x1, a0, b0, c0, a1, b1, c1) >= wp.float64(0.0)
        if not crossed and distance >= separation:
            continue
        side = start_side(x0, x1, a0, b0, c0, a1, b1, c1)
        face = wp.cross(b1 - a1, c1 - a1)
        if wp.length(face) > wp.float64(0.0):
            face = wp.normalize(face)
        direction = side * face
        error = separation - wp.dot(gap, direction)
        if not crossed and distance > wp.float64(1e-12):
            direction = gap / distance
            error = separation - distance
        w_point = pair_inverse_mass(i, ia, point_owner, inverse_mass, holds, direction, down)
        w_a = pair_inverse_mass(ia, i, point_owner, inverse_mass, holds, -direction, down)
        w_b = pair_inverse_mass(ib, i, point_owner, inverse_mass, holds, -direction, down)
        w_c = pair_inverse_mass(ic, i, point_owner, inverse_mass, holds, -direction, down)
        denominator = w_point + weights[0] * weights[0] * w_a + weights[1] * weights[1] * w_b \
            + weights[2] * weights[2] * w_c
        if denominator <= wp.float64(0.0):
            # both sides hold: the contact moves them by their own masses
            w_point = inverse_mass[i]
            w_a = inverse_mass[ia]
            w_b = inverse_mass[ib]
            w_c = inverse_mass[ic]
            denominator = w_point + weights[0] * weights[0] * w_a + weights[1] * weights[1] * w_b \
                + weights[2] * weights[2] * w_c
        if denominator <= wp.float64(0.0) or error <= wp.float64(0.0):
            continue
        lam = error / denominator
        _add_four(correction, count, i, ia, ib, ic, (lam * w_point) * direction,
                  (-lam * weights[0] * w_a) * direction, (-lam * weights[1] * w_b) * direction,
                  (-lam * weights[2] * w_c) * direction)
        wp.atomic_add(contacts, 0, 1)
        _count_unsettled(contacts, crossed, error, _settled_share(point_owner, i, ia, settled, settled_within)
                         * separation)
        if crossed:
            _record_crossed(contacts, crossed_pairs, i, ia, ib, ic)


@wp.kernel
def edge_edge_contacts(start: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                       edges: wp.array(dtype=wp.int32, ndim=2), thickness: wp.array(dtype=wp.float64),
                       inverse_mass: wp.array(dtype=wp.float64), holds: wp.array(dtype=wp.int32),
                       point_owner: wp.array(dtype=wp.int32), down: wp.vec3d,
                       settled: wp.float64, settled_within: wp.float64,
                       found: wp.array(dtype=wp.int32, ndim=2),
                       found_count: wp.array(dtype=wp.int32), correction: wp.array(dtype=wp.vec3d),
                       count: wp.array(dtype=wp.int32), contacts: wp.array(dtype=wp.int32),
                       crossed_pairs: wp.array(dtype=wp.int32, ndim=2)):
    """Edge e against its candidate edges (``edge_edge_candidates``): passed through it during the pass (CCD)
    or closer than the separation. Adds the four endpoints' corrections; contacts[1] += pairs, contacts[2]
    += pairs that had passed through each other (their points to crossed_pairs, as in
    point_triangle_contacts; contacts[3] as there)."""
    e = wp.tid()
    ia = edges[e, 0]
    ib = edges[e, 1]
    a0 = start[ia]
    b0 = start[ib]
    a1 = current[ia]
    b1 = current[ib]
    for k in range(found_count[e]):
        f = found[e, k]
        ic = edges[f, 0]
        id = edges[f, 1]
        separation = wp.max(thickness[ia], thickness[ib]) + wp.max(thickness[ic], thickness[id])
        c0 = start[ic]
        d0 = start[id]
        c1 = current[ic]
        d1 = current[id]
        if not paths_come_within(a0, a1, b0, b1, c0, c1, d0, d1, d0, d1, separation):
            continue    # never within the separation, so neither crossed nor touching
        contact = edge_pair_contact(a0, b0, c0, d0, a1, b1, c1, d1, separation)
        direction = contact.direction
        error = contact.error
        s = contact.s
        u = contact.u
        w_a = (wp.float64(1.0) - s) * pair_inverse_mass(ia, ic, point_owner, inverse_mass, holds, direction, down)
        w_b = s * pair_inverse_mass(ib, ic, point_owner, inverse_mass, holds, direction, down)
        w_c = (wp.float64(1.0) - u) * pair_inverse_mass(ic, ia, point_owner, inverse_mass, holds, -direction, down)
        w_d = u * pair_inverse_mass(id, ia, point_owner, inverse_mass, holds, -direction, down)
        denominator = (wp.float64(1.0) - s) * w_a + s * w_b + (wp.float64(1.0) - u) * w_c + u * w_d
        if denominator <= wp.float64(0.0):
            # both sides hold: the contact moves them by their own masses
            w_a = (wp.float64(1.0) - s) * inverse_mass[ia]
            w_b = s * inverse_mass[ib]
            w_c = (wp.float64(1.0) - u) * inverse_mass[ic]
            w_d = u * inverse_mass[id]
            denominator = (wp.float64(1.0) - s) * w_a + s * w_b + (wp.float64(1.0) - u) * w_c + u * w_d
        if denominator <= wp.float64(0.0) or error <= wp.float64(0.0):
            continue
        lam = error / denominator
        _add_four(correction, count, ia, ib, ic, id, (lam * w_a) * direction, (lam * w_b) * direction,
                  (-lam * w_c) * direction, (-lam * w_d) * direction)
        wp.atomic_add(contacts, 1, 1)
        _count_unsettled(contacts, contact.crossed != 0, error,
                         _settled_share(point_owner, ia, ic, settled, settled_within) * separation)
        if contact.crossed != 0:
            _record_crossed(contacts, crossed_pairs, ia, ib, ic, id)


@wp.kernel
def join_zones(pairs: wp.array(dtype=wp.int32, ndim=2), first: int, chunk: int, label: wp.array(dtype=wp.int32),
               changed: wp.array(dtype=wp.int32)):
    """One round of minimum-label propagation over the pairs [first + t·chunk, first + (t + 1)·chunk) (four
    points each): every point of a pair takes the smallest label among the pair's points; changed[0]
    counts lowerings. Repeated until nothing changes, the labels name the connected components (impact
    zones): each zone ends labelled by its smallest point index, on any device and in any order of the
    rounds' updates."""
    first = first + wp.tid() * chunk
    last = wp.min(first + chunk, pairs.shape[0])
    for row in range(first, last):
        smallest = wp.min(wp.min(label[pairs[row, 0]], label[pairs[row, 1]]),
                          wp.min(label[pairs[row, 2]], label[pairs[row, 3]]))
        for k in range(4):
            point = pairs[row, k]
            if label[point] > smallest:
                wp.atomic_min(label, point, smallest)
                wp.atomic_add(changed, 0, 1)

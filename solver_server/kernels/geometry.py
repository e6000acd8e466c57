"""Shared ``@wp.func`` geometry in float64: closest points, segment–triangle crossing, vertex–triangle and
edge–edge CCD.

Used by the collider kernels (``collision/mesh_kernels.py``) and testable on their own through the
small kernels at the bottom of this module (``tests/kernels/test_geometry_kernels.py`` compares them
with the vectorized ``xp`` reference ``collision.mesh.closest_points_on_triangles`` and with exact
crossing times).
"""

from __future__ import annotations

import warp as wp

from .bounds import paths_may_meet

CCD_SAMPLES = wp.constant(8)         # sub-intervals of [0, 1] scanned for a sign change of the coplanarity function
CCD_BISECTIONS = wp.constant(40)    # bisection steps inside the first sub-interval with a sign change (2^-40 of it)
CCD_INSIDE = wp.constant(1e-7)      # relative tolerance (of the triangle's longest edge) for "inside the triangle"
ON_PLANE = wp.constant(wp.float64(1e-12))   # [m] a segment end this close to a triangle's plane lies on it
BERNSTEIN_MARGIN = wp.constant(wp.float64(1e-9))   # relative: rounding of the coefficients stays far below it


@wp.func
def closest_barycentric(p: wp.vec3d, a: wp.vec3d, b: wp.vec3d, c: wp.vec3d) -> wp.vec3d:
    """Barycentric weights of the point of triangle (a, b, c) closest to p (Ericson, RTCD §5.1.5;
    Voronoi regions in the order vertex a, vertex b, edge ab, vertex c, edge ac, edge bc, face).
    A degenerate triangle falls back to its best edge or vertex region."""
    zero = wp.float64(0.0)
    one = wp.float64(1.0)
    ab = b - a
    ac = c - a
    ap = p - a
    d1 = wp.dot(ab, ap)
    d2 = wp.dot(ac, ap)
    if d1 <= zero and d2 <= zero:
        return wp.vec3d(one, zero, zero)
    bp = p - b
    d3 = wp.dot(ab, bp)
    d4 = wp.dot(ac, bp)
    if d3 >= zero and d4 <= d3:
        return wp.vec3d(zero, one, zero)
    vc = d1 * d4 - d3 * d2
    if vc <= zero and d1 >= zero and d3 <= zero and d1 - d3 != zero:
        v = d1 / (d1 - d3)
        return wp.vec3d(one - v, v, zero)
    cp = p - c
    d5 = wp.dot(ab, cp)
    d6 = wp.dot(ac, cp)
    if d6 >= zero and d5 <= d6:
        return wp.vec3d(zero, zero, one)
    vb = d5 * d2 - d1 * d6
    if vb <= zero and d2 >= zero and d6 <= zero and d2 - d6 != zero:
        w = d2 / (d2 - d6)
        return wp.vec3d(one - w, zero, w)
    va = d3 * d6 - d5 * d4
    if va <= zero and (d4 - d3) >= zero and (d5 - d6) >= zero and (d4 - d3) + (d5 - d6) != zero:
        w = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        return wp.vec3d(zero, one - w, w)
    denominator = va + vb + vc
    if denominator == zero:
        third = wp.float64(1.0 / 3.0)
        return wp.vec3d(third, third, third)
    v = vb / denominator
    w = vc / denominator
    return wp.vec3d(one - v - w, v, w)


@wp.func
def blend(weights: wp.vec3d, a: wp.vec3d, b: wp.vec3d, c: wp.vec3d) -> wp.vec3d:
    """weights[0]·a + weights[1]·b + weights[2]·c."""
    return weights[0] * a + weights[1] * b + weights[2] * c


@wp.func
def lerp3(start: wp.vec3d, end: wp.vec3d, t: wp.float64) -> wp.vec3d:
    return start + t * (end - start)


@wp.func
def coplanarity(t: wp.float64, x0: wp.vec3d, x1: wp.vec3d, a0: wp.vec3d, b0: wp.vec3d, c0: wp.vec3d,
                a1: wp.vec3d, b1: wp.vec3d, c1: wp.vec3d) -> wp.float64:
    """(x − a)·((b − a) × (c − a)) at time t of linear motions: a cubic in t, zero when the vertex lies
    in the triangle's plane; its sign is the vertex's side of the (unnormalized) winding normal."""
    a = lerp3(a0, a1, t)
    return wp.dot(lerp3(x0, x1, t) - a, wp.cross(lerp3(b0, b1, t) - a, lerp3(c0, c1, t) - a))


@wp.func
def start_side(x0: wp.vec3d, x1: wp.vec3d, a0: wp.vec3d, b0: wp.vec3d, c0: wp.vec3d,
               a1: wp.vec3d, b1: wp.vec3d, c1: wp.vec3d) -> wp.float64:
    """+1 or −1: the side of the triangle's winding normal the vertex is on at t = 0 (the first
    sampled time with a non-zero coplanarity value decides when the vertex starts in the plane)."""
    zero = wp.float64(0.0)
    for k in range(int(CCD_SAMPLES) + 1):
        value = coplanarity(wp.float64(k) / wp.float64(CCD_SAMPLES), x0, x1, a0, b0, c0, a1, b1, c1)
        if value > zero:
            return wp.float64(1.0)
        if value < zero:
            return wp.float64(-1.0)
    return wp.float64(1.0)


@wp.func
def segment_closest_parameters_near_parallel(p1: wp.vec3d, q1: wp.vec3d, p2: wp.vec3d, q2: wp.vec3d,
                                             parallel: wp.float64) -> wp.vec2d:
    """(s, t) in [0, 1]² of the closest points p1 + s (q1 − p1) and p2 + t (q2 − p2) of two segments
    (Ericson, RTCD §5.1.9; degenerate segments handled as points). Segments whose directions' cross
    product is below ``parallel`` (relative: a·e − b² ≤ parallel · a·e) count as parallel, and s starts
    from 0 there."""
    zero = wp.float64(0.0)
    one = wp.float64(1.0)
    tiny = wp.float64(1e-300)
    d1 = q1 - p1
    d2 = q2 - p2
    r = p1 - p2
    a = wp.dot(d1, d1)
    e = wp.dot(d2, d2)
    f = wp.dot(d2, r)
    s = zero
    t = zero
    if a <= tiny and e <= tiny:
        return wp.vec2d(zero, zero)
    if a <= tiny:
        return wp.vec2d(zero, wp.clamp(f / e, zero, one))
    c = wp.dot(d1, r)
    if e <= tiny:
        return wp.vec2d(wp.clamp(-c / a, zero, one), zero)
    b = wp.dot(d1, d2)
    denominator = a * e - b * b
    if denominator > wp.max(tiny, parallel * a * e):
        s = wp.clamp((b * f - c * e) / denominator, zero, one)
    t = (b * s + f) / e
    if t < zero:
        t = zero
        s = wp.clamp(-c / a, zero, one)
    elif t > one:
        t = one
        s = wp.clamp((b - c) / a, zero, one)
    return wp.vec2d(s, t)


@wp.func
def segment_closest_parameters(p1: wp.vec3d, q1: wp.vec3d, p2: wp.vec3d, q2: wp.vec3d) -> wp.vec2d:
    """``segment_closest_parameters_near_parallel`` with only exactly parallel segments taken as parallel."""
    return segment_closest_parameters_near_parallel(p1, q1, p2, q2, wp.float64(0.0))


@wp.func
def edge_coplanarity(t: wp.float64, a0: wp.vec3d, b0: wp.vec3d, c0: wp.vec3d, d0: wp.vec3d, a1: wp.vec3d,
                     b1: wp.vec3d, c1: wp.vec3d, d1: wp.vec3d) -> wp.float64:
    """(c − a)·((b − a) × (d − c)) at time t for edges ab and cd moving linearly: zero when the two
    edges' lines meet; its sign is the side of edge ab's line that cd passes on."""
    a = lerp3(a0, a1, t)
    c = lerp3(c0, c1, t)
    return wp.dot(c - a, wp.cross(lerp3(b0, b1, t) - a, lerp3(d0, d1, t) - c))


@wp.func
def moving_coplanarity(edge_edge: bool, t: wp.float64, p0: wp.vec3d, q0: wp.vec3d, r0: wp.vec3d, s0: wp.vec3d,
                       p1: wp.vec3d, q1: wp.vec3d, r1: wp.vec3d, s1: wp.vec3d) -> wp.float64:
    """The coplanarity function at time t of four points moving linearly (pqrs at 0 → pqrs at 1): of edge pq
    against edge rs (``edge_coplanarity``) when ``edge_edge``, else of vertex p against triangle qrs
    (``coplanarity``)."""
    if edge_edge:
        return edge_coplanarity(t, p0, q0, r0, s0, p1, q1, r1, s1)
    return coplanarity(t, p0, p1, q0, r0, s0, q1, r1, s1)


@wp.func
def next_coplanar_time(edge_edge: bool, first: int, p0: wp.vec3d, q0: wp.vec3d, r0: wp.vec3d, s0: wp.vec3d,
                       p1: wp.vec3d, q1: wp.vec3d, r1: wp.vec3d, s1: wp.vec3d) -> wp.vec2d:
    """The CCD bracket: (t, k) with t the bisected root of ``moving_coplanarity`` in the first of the CCD_SAMPLES
    sub-intervals of [0, 1], from sub-interval ``first`` on, whose ends have opposite signs (or reach zero), and
    k the sub-interval after it (where a scan that rejects this root goes on); (−1, CCD_SAMPLES) without one."""
    zero = wp.float64(0.0)
    samples = wp.float64(CCD_SAMPLES)
    previous = moving_coplanarity(edge_edge, wp.float64(first) / samples, p0, q0, r0, s0, p1, q1, r1, s1)
    for k in range(first, int(CCD_SAMPLES)):
        t_high = wp.float64(k + 1) / samples
        value = moving_coplanarity(edge_edge, t_high, p0, q0, r0, s0, p1, q1, r1, s1)
        if (previous > zero and value <= zero) or (previous < zero and value >= zero):
            low = wp.float64(k) / samples
            high = t_high
            low_value = previous
            for _ in range(CCD_BISECTIONS):
                middle = wp.float64(0.5) * (low + high)
                middle_value = moving_coplanarity(edge_edge, middle, p0, q0, r0, s0, p1, q1, r1, s1)
                if (low_value > zero) == (middle_value > zero) and middle_value != zero:
                    low = middle
                    low_value = middle_value
                else:
                    high = middle
            return wp.vec2d(high, wp.float64(k + 1))
        previous = value
    return wp.vec2d(wp.float64(-1.0), samples)


@wp.func
def gap_at(edge_edge: bool, t: wp.float64, p0: wp.vec3d, q0: wp.vec3d, r0: wp.vec3d, s0: wp.vec3d,
           p1: wp.vec3d, q1: wp.vec3d, r1: wp.vec3d, s1: wp.vec3d) -> wp.vec2d:
    """(distance, scale) at time t of four points moving linearly (pqrs at 0 → pqrs at 1): of edge pq to
    edge rs and the longer edge's length when ``edge_edge``, else of vertex p to triangle qrs and its longest
    edge's length."""
    a = lerp3(p0, p1, t)
    b = lerp3(q0, q1, t)
    c = lerp3(r0, r1, t)
    d = lerp3(s0, s1, t)
    if edge_edge:
        st = segment_closest_parameters(a, b, c, d)
        gap = lerp3(a, b, st[0]) - lerp3(c, d, st[1])
        return wp.vec2d(wp.length(gap), wp.max(wp.length(b - a), wp.length(d - c)))
    closest = blend(closest_barycentric(a, b, c, d), b, c, d)
    return wp.vec2d(wp.length(a - closest), wp.max(wp.length(c - b), wp.max(wp.length(d - b), wp.length(d - c))))


@wp.func
def stays_off_plane(edge_edge: bool, p0: wp.vec3d, q0: wp.vec3d, r0: wp.vec3d, s0: wp.vec3d,
                    p1: wp.vec3d, q1: wp.vec3d, r1: wp.vec3d, s1: wp.vec3d) -> bool:
    """True when ``moving_coplanarity`` (a cubic in t) cannot vanish on [0, 1]: its four Bernstein coefficients,
    from its values at 0, 1/3, 2/3 and 1, share one sign with a margin of BERNSTEIN_MARGIN × the largest (the cubic
    lies inside their convex hull). Elements resting or sliding near each other pass this in four evaluations
    instead of the scan's nine; a cubic near zero anywhere fails it and is scanned as before."""
    f0 = moving_coplanarity(edge_edge, wp.float64(0.0), p0, q0, r0, s0, p1, q1, r1, s1)
    f1 = moving_coplanarity(edge_edge, wp.float64(1.0) / wp.float64(3.0), p0, q0, r0, s0, p1, q1, r1, s1)
    f2 = moving_coplanarity(edge_edge, wp.float64(2.0) / wp.float64(3.0), p0, q0, r0, s0, p1, q1, r1, s1)
    f3 = moving_coplanarity(edge_edge, wp.float64(1.0), p0, q0, r0, s0, p1, q1, r1, s1)
    sixth = wp.float64(1.0) / wp.float64(6.0)
    b1 = (wp.float64(-5.0) * f0 + wp.float64(18.0) * f1 - wp.float64(9.0) * f2 + wp.float64(2.0) * f3) * sixth
    b2 = (wp.float64(2.0) * f0 - wp.float64(9.0) * f1 + wp.float64(18.0) * f2 - wp.float64(5.0) * f3) * sixth
    margin = BERNSTEIN_MARGIN * wp.max(wp.max(wp.abs(f0), wp.abs(f3)), wp.max(wp.abs(b1), wp.abs(b2)))
    low = wp.min(wp.min(f0, f3), wp.min(b1, b2))
    high = wp.max(wp.max(f0, f3), wp.max(b1, b2))
    return low > margin or high < -margin


@wp.func
def first_crossing(edge_edge: bool, p0: wp.vec3d, q0: wp.vec3d, r0: wp.vec3d, s0: wp.vec3d,
                   p1: wp.vec3d, q1: wp.vec3d, r1: wp.vec3d, s1: wp.vec3d) -> wp.float64:
    """Earliest time t in [0, 1] at which the moving elements pass through each other (edge pq through edge
    rs when ``edge_edge``, else vertex p through triangle qrs), −1 when they do not: the roots of
    ``moving_coplanarity`` from the CCD bracket (``next_coplanar_time``), earliest first, until one at which
    the elements meet (``gap_at``: distance within CCD_INSIDE × the scale). A crossing is a change of side,
    so elements that only touch the plane and turn back do not cross. A cubic that ``stays_off_plane`` has no
    root to scan for."""
    if stays_off_plane(edge_edge, p0, q0, r0, s0, p1, q1, r1, s1):
        return wp.float64(-1.0)
    first = int(0)
    while first < int(CCD_SAMPLES):
        root = next_coplanar_time(edge_edge, first, p0, q0, r0, s0, p1, q1, r1, s1)
        t = root[0]
        if t < wp.float64(0.0):
            return t
        gap = gap_at(edge_edge, t, p0, q0, r0, s0, p1, q1, r1, s1)
        if gap[0] <= wp.float64(CCD_INSIDE) * gap[1] + wp.float64(1e-12):
            return t
        first = int(root[1])
    return wp.float64(-1.0)


@wp.func
def vertex_triangle_ccd(x0: wp.vec3d, x1: wp.vec3d, a0: wp.vec3d, b0: wp.vec3d, c0: wp.vec3d,
                        a1: wp.vec3d, b1: wp.vec3d, c1: wp.vec3d) -> wp.float64:
    """Earliest time t in [0, 1] at which a vertex moving x0 → x1 passes through the triangle moving
    (a0, b0, c0) → (a1, b1, c1), both linearly; −1 when it does not (``first_crossing``)."""
    return first_crossing(False, x0, a0, b0, c0, x1, a1, b1, c1)


@wp.func
def segment_crosses_triangle(p: wp.vec3d, q: wp.vec3d, a: wp.vec3d, b: wp.vec3d, c: wp.vec3d) -> bool:
    """Whether segment p–q passes through the interior of triangle abc: p and q on opposite sides of its plane,
    each farther than ON_PLANE from it (an end lying on the plane, such as a hair root on its scalp, lies there
    within rounding: it touches the triangle, it does not pass through it, on every device alike), and the line
    through them strictly inside all three edges (signed volumes; touching an edge or a corner does not count)."""
    zero = wp.float64(0.0)
    normal = wp.cross(b - a, c - a)
    # signed volumes against the plane's ON_PLANE band: dot(n, x − a) compared with |n| · ON_PLANE
    band = wp.length(normal) * ON_PLANE
    side_p = wp.dot(normal, p - a)
    side_q = wp.dot(normal, q - a)
    if not ((side_p > band and side_q < -band) or (side_p < -band and side_q > band)):
        return False
    line = q - p
    around_ab = wp.dot(line, wp.cross(a - p, b - p))
    around_bc = wp.dot(line, wp.cross(b - p, c - p))
    around_ca = wp.dot(line, wp.cross(c - p, a - p))
    if around_ab > zero and around_bc > zero and around_ca > zero:
        return True
    return around_ab < zero and around_bc < zero and around_ca < zero


# ----------------------------------------------------------------------------------------- test kernels
@wp.kernel
def closest_points_kernel(points: wp.array(dtype=wp.vec3d), a: wp.array(dtype=wp.vec3d),
                          b: wp.array(dtype=wp.vec3d), c: wp.array(dtype=wp.vec3d),
                          barycentric: wp.array(dtype=wp.vec3d)):
    """barycentric[i] = closest_barycentric(points[i], a[i], b[i], c[i])."""
    i = wp.tid()
    barycentric[i] = closest_barycentric(points[i], a[i], b[i], c[i])


@wp.kernel
def segment_crosses_triangle_kernel(p: wp.array(dtype=wp.vec3d), q: wp.array(dtype=wp.vec3d),
                                    corners: wp.array(dtype=wp.vec3d), crosses: wp.array(dtype=wp.int32)):
    """crosses[i] = segment_crosses_triangle(p[i], q[i], corners 3i..3i+2)."""
    i = wp.tid()
    crosses[i] = wp.where(segment_crosses_triangle(p[i], q[i], corners[3 * i], corners[3 * i + 1],
                                                   corners[3 * i + 2]), 1, 0)


@wp.kernel
def vertex_triangle_ccd_kernel(x0: wp.array(dtype=wp.vec3d), x1: wp.array(dtype=wp.vec3d),
                               start_corners: wp.array(dtype=wp.vec3d), end_corners: wp.array(dtype=wp.vec3d),
                               times: wp.array(dtype=wp.float64)):
    """times[i] = vertex_triangle_ccd of vertex path i against triangle corners 3i..3i+2 (start, end)."""
    i = wp.tid()
    times[i] = vertex_triangle_ccd(x0[i], x1[i], start_corners[3 * i], start_corners[3 * i + 1],
                                   start_corners[3 * i + 2], end_corners[3 * i], end_corners[3 * i + 1],
                                   end_corners[3 * i + 2])


@wp.func
def edge_edge_ccd(a0: wp.vec3d, b0: wp.vec3d, c0: wp.vec3d, d0: wp.vec3d, a1: wp.vec3d, b1: wp.vec3d,
                  c1: wp.vec3d, d1: wp.vec3d) -> wp.float64:
    """Earliest time t in [0, 1] at which edge ab (a0 b0 → a1 b1) passes through edge cd (linear
    motions), −1 when it does not (``first_crossing``)."""
    return first_crossing(True, a0, b0, c0, d0, a1, b1, c1, d1)


@wp.struct
class EdgePairContact:
    """The correction one edge pair asks for (``edge_pair_contact``): move edge ab along ``direction`` (and
    edge cd against it) until they are ``error`` [m] further apart; error ≤ 0: no correction. s, u: the
    closest points' parameters on ab and cd at the end; crossed: 1 if the edges passed through each other."""
    direction: wp.vec3d
    error: wp.float64
    s: wp.float64
    u: wp.float64
    crossed: int


@wp.func
def edge_pair_contact(a0: wp.vec3d, b0: wp.vec3d, c0: wp.vec3d, d0: wp.vec3d, a1: wp.vec3d, b1: wp.vec3d,
                      c1: wp.vec3d, d1: wp.vec3d, separation: wp.float64) -> EdgePairContact:
    """Edges ab and cd moving linearly from (a0, b0, c0, d0) to (a1, b1, c1, d1): if they passed through
    each other (edge–edge CCD), ab goes back to the side of cd's line it had at the start (the sign of the
    coplanarity there, never a winding normal) to ``separation`` [m]; otherwise, if closer than the
    separation, they are pushed apart along their gap."""
    contact = EdgePairContact()
    st = segment_closest_parameters(a1, b1, c1, d1)
    contact.s = st[0]
    contact.u = st[1]
    contact.error = wp.float64(0.0)
    contact.crossed = 0
    gap = lerp3(a1, b1, st[0]) - lerp3(c1, d1, st[1])
    distance = wp.length(gap)
    crossed = False
    if paths_may_meet(a0, a1, b0, b1, c0, c1, d0, d1, d0, d1):
        crossed = edge_edge_ccd(a0, b0, c0, d0, a1, b1, c1, d1) >= wp.float64(0.0)
    if crossed:
        normal = wp.cross(b1 - a1, d1 - c1)
        if wp.length(normal) > wp.float64(0.0):
            normal = wp.normalize(normal)
            contact.direction = normal
            if edge_coplanarity(wp.float64(0.0), a0, b0, c0, d0, a1, b1, c1, d1) > wp.float64(0.0):
                contact.direction = -normal    # c − a was along +normal: edge ab belongs on the −normal side
            contact.error = separation - wp.dot(gap, contact.direction)
            contact.crossed = 1
    elif distance < separation and distance > wp.float64(1e-12):
        contact.direction = gap / distance
        contact.error = separation - distance
    return contact

"""Boxes for ``wp.Bvh`` queries: float32 boxes around float64 geometry, padded, and the swept boxes of
mesh elements (triangles, edges) over a substep."""

from __future__ import annotations

import warp as wp


@wp.func
def box_lower(p: wp.vec3d, q: wp.vec3d, pad: wp.float64) -> wp.vec3f:
    """Lower corner of the box around p and q grown by pad [m], rounded outward enough for float32."""
    return wp.vec3f(wp.float32(wp.min(p[0], q[0]) - pad), wp.float32(wp.min(p[1], q[1]) - pad),
                    wp.float32(wp.min(p[2], q[2]) - pad))


@wp.func
def box_upper(p: wp.vec3d, q: wp.vec3d, pad: wp.float64) -> wp.vec3f:
    """Upper corner of the box around p and q grown by pad [m]."""
    return wp.vec3f(wp.float32(wp.max(p[0], q[0]) + pad), wp.float32(wp.max(p[1], q[1]) + pad),
                    wp.float32(wp.max(p[2], q[2]) + pad))


@wp.func
def swept_edge_lower(a0: wp.vec3d, a1: wp.vec3d, b0: wp.vec3d, b1: wp.vec3d, pad: wp.float64) -> wp.vec3f:
    """Lower corner of the box of an edge whose ends move a0 → a1 and b0 → b1, grown by pad [m]."""
    return wp.min(box_lower(a0, a1, pad), box_lower(b0, b1, pad))


@wp.func
def swept_edge_upper(a0: wp.vec3d, a1: wp.vec3d, b0: wp.vec3d, b1: wp.vec3d, pad: wp.float64) -> wp.vec3f:
    """Upper corner of the box of an edge whose ends move a0 → a1 and b0 → b1, grown by pad [m]."""
    return wp.max(box_upper(a0, a1, pad), box_upper(b0, b1, pad))


@wp.func
def keep_candidate(found: wp.array(dtype=wp.int32, ndim=2), row: int, count: int, item: int) -> int:
    """Candidate ``item`` kept as number ``count`` of row ``row`` of a candidate list while the row has room;
    returns the row's new count (every candidate is counted, so the caller sees a row that overflowed)."""
    if count < found.shape[1]:
        found[row, count] = item
    return count + 1


@wp.kernel
def element_bounds(start: wp.array(dtype=wp.vec3d), current: wp.array(dtype=wp.vec3d),
                   elements: wp.array(dtype=wp.int32, ndim=2), pad: wp.float64,
                   lowers: wp.array(dtype=wp.vec3f), uppers: wp.array(dtype=wp.vec3f)):
    """Box of element k's corners (a triangle's 3, an edge's 2: the columns of ``elements``) at the start
    and at the end of the substep, grown by pad [m] (callers add 1e-6 m or more for float32 rounding)."""
    k = wp.tid()
    low = start[elements[k, 0]]
    high = low
    for j in range(elements.shape[1]):
        for pose in range(2):
            p = start[elements[k, j]]
            if pose == 1:
                p = current[elements[k, j]]
            low = wp.vec3d(wp.min(low[0], p[0]), wp.min(low[1], p[1]), wp.min(low[2], p[2]))
            high = wp.vec3d(wp.max(high[0], p[0]), wp.max(high[1], p[1]), wp.max(high[2], p[2]))
    lowers[k] = box_lower(low, low, pad)
    uppers[k] = box_upper(high, high, pad)


@wp.func
def paths_come_within(p0: wp.vec3d, p1: wp.vec3d, q0: wp.vec3d, q1: wp.vec3d, r0: wp.vec3d, r1: wp.vec3d,
                      s0: wp.vec3d, s1: wp.vec3d, t0: wp.vec3d, t1: wp.vec3d, gap: wp.float64) -> bool:
    """False when the box of the path p0 → p1 (and of q, for an edge: pass q = p) grown by ``gap`` [m] misses
    the box of the other element's corners r, s, t over the substep (pass t = s for an edge): then the two
    come no closer than ``gap`` along some axis during the substep. Exact float64 boxes."""
    low_a = wp.min(wp.min(p0, p1), wp.min(q0, q1))
    high_a = wp.max(wp.max(p0, p1), wp.max(q0, q1))
    low_b = wp.min(wp.min(wp.min(r0, r1), wp.min(s0, s1)), wp.min(t0, t1))
    high_b = wp.max(wp.max(wp.max(r0, r1), wp.max(s0, s1)), wp.max(t0, t1))
    return (low_a[0] <= high_b[0] + gap and low_b[0] <= high_a[0] + gap and low_a[1] <= high_b[1] + gap
            and low_b[1] <= high_a[1] + gap and low_a[2] <= high_b[2] + gap and low_b[2] <= high_a[2] + gap)


@wp.func
def paths_may_meet(p0: wp.vec3d, p1: wp.vec3d, q0: wp.vec3d, q1: wp.vec3d, r0: wp.vec3d, r1: wp.vec3d,
                   s0: wp.vec3d, s1: wp.vec3d, t0: wp.vec3d, t1: wp.vec3d) -> bool:
    """False when the box of the path p0 → p1 (and of q, for an edge: pass q = p) misses the box of the
    other element's corners r, s, t over the substep (pass t = s for an edge): then no CCD crossing is
    possible, and the cubic need not be scanned. Exact boxes, no padding."""
    low_a = wp.min(wp.min(p0, p1), wp.min(q0, q1))
    high_a = wp.max(wp.max(p0, p1), wp.max(q0, q1))
    low_b = wp.min(wp.min(wp.min(r0, r1), wp.min(s0, s1)), wp.min(t0, t1))
    high_b = wp.max(wp.max(wp.max(r0, r1), wp.max(s0, s1)), wp.max(t0, t1))
    return (low_a[0] <= high_b[0] and low_b[0] <= high_a[0] and low_a[1] <= high_b[1] and low_b[1] <= high_a[1]
            and low_a[2] <= high_b[2] and low_b[2] <= high_a[2])

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

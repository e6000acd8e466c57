"""Closest points of segment pairs in array code (``xp``: numpy or CuPy), shared by the strand solvers' contact
and interaction searches. The Warp device function with the same arithmetic is
``kernels.geometry.segment_closest_parameters_near_parallel``."""

from __future__ import annotations

# segments whose directions' cross product is at most this (relative: a·e − b² ≤ PARALLEL · a·e) count as parallel
PARALLEL = 1e-12
# floor of a squared segment length [m²] used as a divisor, so zero-length segments come out as points
TINY = 1e-300


def _dot(xp, a, b):
    return xp.einsum("nc,nc->n", a, b)


def segment_closest_parameters(xp, p1, q1, p2, q2):
    """Parameters s, t (n,) in [0, 1] of the closest points p1 + s (q1 − p1) and p2 + t (q2 − p2) of segments
    [p1, q1] and [p2, q2] (rows independent, end points (n, 3) [m]; Ericson, RTCD §5.1.9). Parallel pairs take
    s from 0; a zero-length segment is a point."""
    d1 = q1 - p1
    d2 = q2 - p2
    r = p1 - p2
    a = _dot(xp, d1, d1)
    e = _dot(xp, d2, d2)
    f = _dot(xp, d2, r)
    c = _dot(xp, d1, r)
    b = _dot(xp, d1, d2)
    denominator = a * e - b * b
    parallel = denominator <= PARALLEL * a * e
    s = xp.where(parallel, 0.0, xp.clip((b * f - c * e) / xp.where(parallel, 1.0, denominator), 0.0, 1.0))
    safe_a = xp.maximum(a, TINY)
    t = (b * s + f) / xp.maximum(e, TINY)
    # t outside [0, 1]: clamp it and recompute s for the clamped t
    below, above = t < 0.0, t > 1.0
    t = xp.clip(t, 0.0, 1.0)
    s = xp.where(below, xp.clip(-c / safe_a, 0.0, 1.0), s)
    s = xp.where(above, xp.clip((b - c) / safe_a, 0.0, 1.0), s)
    return s, t

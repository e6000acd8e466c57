"""Vectorized geometric queries for contact detection: segment–segment closest points and the
coplanarity times of two moving segments (seed 000 eq. 4.1)."""

from __future__ import annotations

from ..strand_geometry import segment_closest_parameters
from .frames import cross3, row_lengths


def _dot(xp, a, b):
    return xp.einsum("nc,nc->n", a, b)


def segment_closest_points(xp, p1, q1, p2, q2):
    """Closest points of segments [p1, q1] and [p2, q2] (rows independent, shapes (n, 3)).

    Returns (s, t, distance): parameters in [0, 1] of the closest points on each segment
    (``strand_geometry.segment_closest_parameters``) and their distance [m].
    """
    s, t = segment_closest_parameters(xp, p1, q1, p2, q2)
    closest1 = p1 + s[:, None] * (q1 - p1)
    closest2 = p2 + t[:, None] * (q2 - p2)
    return s, t, row_lengths(xp, closest1 - closest2)


def overlap_far_end(xp, p1, q1, p2, q2, s):
    """For (nearly) parallel segments [p1, q1] and [p2, q2] touching along a stretch: the end of that stretch
    farther from the point s of segment 1 (rows independent, shapes (n, 3) and (n,)).

    The stretch is the part of segment 1 that segment 2 projects onto (segment 1's parameters [lo, hi]).
    Returns (s_far, t_far): its far end on segment 1 and that point's projection onto segment 2, both in
    [0, 1]."""
    d1 = q1 - p1
    d2 = q2 - p2
    a = _dot(xp, d1, d1)
    start, end = _dot(xp, p2 - p1, d1) / a, _dot(xp, q2 - p1, d1) / a
    lo = xp.clip(xp.minimum(start, end), 0.0, 1.0)
    hi = xp.clip(xp.maximum(start, end), 0.0, 1.0)
    s_far = xp.where(xp.abs(s - lo) >= xp.abs(s - hi), lo, hi)
    t_far = xp.clip(_dot(xp, p1 + s_far[:, None] * d1 - p2, d2) / _dot(xp, d2, d2), 0.0, 1.0)
    return s_far, t_far


def coplanarity_times(xp, x0, x1, x2, x3, v0, v1, v2, v3, bisection_steps: int = 40):
    """Times τ ∈ [0, 1] where four linearly moving points become coplanar (up to 3 per row).

    Solves ((x1−x0) + τ(v1−v0)) × ((x2−x0) + τ(v2−v0)) · ((x3−x0) + τ(v3−v0)) = 0 by splitting [0, 1] at the
    cubic's critical points and bisecting every sub-interval with a sign change.  Returns (n, 3) times,
    NaN where there is no root.
    """
    a1, a2, a3 = x1 - x0, x2 - x0, x3 - x0
    b1, b2, b3 = v1 - v0, v2 - v0, v3 - v0

    def cubic(tau):
        tau = tau[:, None]
        return _dot(xp, cross3(xp, a1 + tau * b1, a2 + tau * b2), a3 + tau * b3)

    # coefficients of the cubic c3 τ³ + c2 τ² + c1 τ + c0
    c0 = _dot(xp, cross3(xp, a1, a2), a3)
    c3 = _dot(xp, cross3(xp, b1, b2), b3)
    c2 = (_dot(xp, cross3(xp, b1, b2), a3) + _dot(xp, cross3(xp, a1, b2), b3) + _dot(xp, cross3(xp, b1, a2), b3))
    c1 = (_dot(xp, cross3(xp, a1, a2), b3) + _dot(xp, cross3(xp, a1, b2), a3) + _dot(xp, cross3(xp, b1, a2), a3))
    # critical points of the cubic (roots of 3 c3 τ² + 2 c2 τ + c1), clipped to [0, 1]; 0 where absent
    qa, qb, qc = 3.0 * c3, 2.0 * c2, c1
    quadratic = xp.abs(qa) > 1e-300
    discriminant = qb * qb - 4.0 * qa * qc
    root_disc = xp.sqrt(xp.maximum(discriminant, 0.0))
    safe_qa = xp.where(quadratic, qa, 1.0)
    safe_qb = xp.where(xp.abs(qb) > 1e-300, qb, 1.0)
    crit_a = xp.where(quadratic, (-qb - root_disc) / (2.0 * safe_qa), -qc / safe_qb)
    crit_b = xp.where(quadratic, (-qb + root_disc) / (2.0 * safe_qa), -qc / safe_qb)
    valid = xp.where(quadratic, discriminant > 0.0, xp.abs(qb) > 1e-300)
    crit_a = xp.clip(xp.where(valid, crit_a, 0.0), 0.0, 1.0)
    crit_b = xp.clip(xp.where(valid, crit_b, 0.0), 0.0, 1.0)
    lo_crit, hi_crit = xp.minimum(crit_a, crit_b), xp.maximum(crit_a, crit_b)
    zero = xp.zeros_like(c0)
    bounds = [(zero, lo_crit), (lo_crit, hi_crit), (hi_crit, zero + 1.0)]
    roots = []
    for left, right in bounds:  # three monotone pieces
        f_left, f_right = cubic(left), cubic(right)
        has_root = (f_left * f_right <= 0.0) & (right > left)
        lo, hi = left.copy(), right.copy()
        for _ in range(bisection_steps):
            mid = 0.5 * (lo + hi)
            f_mid = cubic(mid)
            go_left = f_left * f_mid <= 0.0
            hi = xp.where(go_left, mid, hi)
            lo = xp.where(go_left, lo, mid)
            f_left = xp.where(go_left, f_left, f_mid)
        roots.append(xp.where(has_root, 0.5 * (lo + hi), xp.nan))
    return xp.stack(roots, axis=1)

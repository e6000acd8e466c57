"""Reference and material frames of discrete elastic rods (Bergou et al. 2008/2010), vectorized.

Every edge j carries an orthonormal reference frame (t^j, u^j, v^j) with v = t × u.  At rest the frames are
*space-parallel* (u^{j+1} = P(t^j → t^{j+1}) u^j along each strand, computed with a segmented parallel
prefix product of quaternions, no loop over vertices).  During simulation they are *time-parallel*: each
step transports the previous step's u^j to the new tangent.  The material frame of edge j is the
reference frame rotated by the twist angle θ^j about t^j:  m1 = cos θ u + sin θ v,  m2 = −sin θ u + cos θ v.

The frame jets below give the exact first and second derivatives of a time-parallel-transported frame with
respect to its edge vector at the transport base point (derivation in docs/der.md §2).
"""

from __future__ import annotations

import numpy as np

from .jet import Jet, cross3


def row_lengths(xp, vectors):
    """Euclidean lengths (n,) of the rows of vectors (n, 3).  On numpy summed component by component: its
    norm (or sum) over a 3-wide axis is a strided reduction, 5× slower on (20 000, 3) (259 vs 49 µs); a
    device backend keeps its one fused reduction."""
    if xp is np:
        x, y, z = vectors[:, 0], vectors[:, 1], vectors[:, 2]
        return np.sqrt(x * x + y * y + z * z)
    return xp.linalg.norm(vectors, axis=1)


def normalize_rows(xp, a):
    """Unit vectors of a (n, 3) array."""
    return a / row_lengths(xp, a)[:, None]


def parallel_transport(xp, a, b, x):
    """Rotate x (n, 3) by the minimal rotation taking unit a to unit b (rows independent)."""
    axis = cross3(xp, a, b)
    cos_angle = xp.einsum("nc,nc->n", a, b)
    denominator = xp.maximum(1.0 + cos_angle, 1e-12)
    axis_dot_x = xp.einsum("nc,nc->n", axis, x)
    return (cos_angle[:, None] * x + cross3(xp, axis, x) + (axis_dot_x / denominator)[:, None] * axis)


def any_perpendicular(xp, t):
    """A unit vector perpendicular to each unit row of t (n, 3)."""
    helper = xp.zeros_like(t)
    use_x = xp.abs(t[:, 0]) < 0.9
    helper[use_x, 0] = 1.0
    helper[~use_x, 1] = 1.0
    u = helper - xp.einsum("nc,nc->n", helper, t)[:, None] * t
    return normalize_rows(xp, u)


def _quat_mul(xp, p, q):
    """Hamilton product of quaternions stored (w, x, y, z) in rows."""
    pw, pv = p[:, 0], p[:, 1:]
    qw, qv = q[:, 0], q[:, 1:]
    w = pw * qw - xp.einsum("nc,nc->n", pv, qv)
    v = pw[:, None] * qv + qw[:, None] * pv + cross3(xp, pv, qv)
    return xp.concatenate((w[:, None], v), axis=1)


def _quat_rotate(xp, q, x):
    w, v = q[:, 0], q[:, 1:]
    vx = cross3(xp, v, x)
    return x + 2.0 * w[:, None] * vx + 2.0 * cross3(xp, v, vx)


def space_parallel_frames(xp, tangents, edge_local_index, edge_strand_first_edge):
    """Space-parallel reference directors u (n_edges, 3) along each strand.

    tangents: unit edge tangents (n_edges, 3); edge_local_index: position of each edge in its strand (n_edges,);
    edge_strand_first_edge: global index of the first edge of each edge's strand (n_edges,).
    """
    n_edges = tangents.shape[0]
    previous = xp.maximum(xp.arange(n_edges) - 1, 0)
    # rotation carrying the previous edge's tangent onto this one (identity on a strand's first edge)
    quats = xp.concatenate(
        (1.0 + xp.einsum("nc,nc->n", tangents[previous], tangents)[:, None], cross3(xp, tangents[previous], tangents)),
        axis=1)
    first = edge_local_index == 0
    quats[first] = xp.asarray([1.0, 0.0, 0.0, 0.0])
    quats = quats / xp.linalg.norm(quats, axis=1, keepdims=True)
    shift = 1
    max_local = int(edge_local_index.max()) if n_edges else 0
    while shift <= max_local:  # segmented Hillis-Steele prefix product, O(log length) vectorized passes
        reach = edge_local_index >= shift
        combined = quats.copy()
        combined[reach] = _quat_mul(xp, quats[reach], quats[xp.nonzero(reach)[0] - shift])
        quats = combined
        shift *= 2
    first_u = any_perpendicular(xp, tangents[edge_strand_first_edge])
    u = _quat_rotate(xp, quats, first_u)
    return orthonormalize(xp, tangents, u)


def orthonormalize(xp, tangents, u):
    """Remove drift: make u exactly unit and perpendicular to the unit tangents."""
    u = u - xp.einsum("nc,nc->n", u, tangents)[:, None] * tangents
    return normalize_rows(xp, u)


def time_parallel_reference(xp, old_tangents, old_u, tangents):
    """Reference directors u (n, 3) of edges whose unit tangents moved from old_tangents to tangents in time:
    old_u carried by the minimal rotation, then made exactly unit and perpendicular (the DER reference frame
    update, time-parallel transport)."""
    return orthonormalize(xp, tangents, parallel_transport(xp, old_tangents, tangents, old_u))


def shortest_turn(xp, angle):
    """angle (n,) [rad] shifted by a whole number of turns into [−π, π]: the shorter way round."""
    return angle - 2.0 * xp.pi * xp.round(angle / (2.0 * xp.pi))


def material_directors(xp, u, v, theta):
    cos_t, sin_t = xp.cos(theta)[:, None], xp.sin(theta)[:, None]
    return cos_t * u + sin_t * v, -sin_t * u + cos_t * v


def reference_twist_value(xp, t_prev_edge, t_next_edge, u_prev_edge, u_next_edge):
    """Signed angle from P(t^{i-1}→t^i) u^{i-1} to u^i about t^i, in (−π, π] (n,)."""
    transported = parallel_transport(xp, t_prev_edge, t_next_edge, u_prev_edge)
    cos_r = xp.einsum("nc,nc->n", transported, u_next_edge)
    sin_r = xp.einsum("nc,nc->n", cross3(xp, transported, u_next_edge), t_next_edge)
    return xp.arctan2(sin_r, cos_r)


def _skew(xp, t):
    """Matrices [t]x (n, 3, 3) with [t]x y = t × y."""
    zero = xp.zeros(t.shape[0], dtype=t.dtype)
    return xp.stack((xp.stack((zero, -t[:, 2], t[:, 1]), axis=1),
                     xp.stack((t[:, 2], zero, -t[:, 0]), axis=1),
                     xp.stack((-t[:, 1], t[:, 0], zero), axis=1)), axis=1)


def tangent_jet(xp, edge, slot: int, k: int, with_hessian: bool) -> Jet:
    """Jet of t = e/|e| for edge vectors e (n, 3) stored in local variables slot..slot+2."""
    n = edge.shape[0]
    length = row_lengths(xp, edge)
    t = edge / length[:, None]
    projector = xp.eye(3, dtype=edge.dtype)[None] - t[:, :, None] * t[:, None, :]
    grad = xp.zeros((n, 3, k), dtype=edge.dtype)
    grad[:, :, slot:slot + 3] = projector / length[:, None, None]
    hess = None
    if with_hessian:
        hess = xp.zeros((n, 3, k, k), dtype=edge.dtype)
        # d2 t_c / de_a de_b = -(t_a P_cb + t_b P_ca + t_c P_ab) / |e|^2
        block = -(t[:, None, :, None] * projector[:, :, None, :] + t[:, None, None, :] * projector[:, :, :, None]
                  + t[:, :, None, None] * projector[:, None, :, :]) / (length * length)[:, None, None, None]
        hess[:, :, slot:slot + 3, slot:slot + 3] = block
    return Jet(t, grad, hess)


def frame_jets(xp, edge, u, v, theta, edge_slot: int, theta_slot: int | None, k: int, with_hessian: bool):
    """Jets of the material directors (m1, m2) of one edge per element.

    edge (n, 3) is the current edge vector, (u, v) its current reference frame, theta (n,) its twist angle
    (None: the reference directors themselves, with no twist variable).  Derivatives are those of the
    frame transported in time from the current configuration (exact at the transport base point).
    """
    n = edge.shape[0]
    length = row_lengths(xp, edge)
    t = edge / length[:, None]
    if theta is None:
        m1, m2 = u, v
    else:
        m1, m2 = material_directors(xp, u, v, theta)
    es = slice(edge_slot, edge_slot + 3)
    inv_len = (1.0 / length)[:, None, None]
    g1 = xp.zeros((n, 3, k), dtype=edge.dtype)
    g2 = xp.zeros((n, 3, k), dtype=edge.dtype)
    g1[:, :, es] = -t[:, :, None] * m1[:, None, :] * inv_len
    g2[:, :, es] = -t[:, :, None] * m2[:, None, :] * inv_len
    if theta_slot is not None:
        g1[:, :, theta_slot] = m2
        g2[:, :, theta_slot] = -m1
    h1 = h2 = None
    if with_hessian:
        h1 = xp.zeros((n, 3, k, k), dtype=edge.dtype)
        h2 = xp.zeros((n, 3, k, k), dtype=edge.dtype)
        projector = xp.eye(3, dtype=edge.dtype)[None] - t[:, :, None] * t[:, None, :]
        skew = _skew(xp, t)  # skew[c, b] = (t × e_b)_c
        inv_len2 = (1.0 / (length * length))[:, None, None, None]

        def edge_block(m, other, sign):
            # [-m_c P_ab + t_c (t_a m_b + m_a t_b) + sign * 1/2 (other_a T_cb + other_b T_ca)] / |e|^2
            return (-m[:, :, None, None] * projector[:, None, :, :]
                    + t[:, :, None, None] * (t[:, None, :, None] * m[:, None, None, :]
                                             + m[:, None, :, None] * t[:, None, None, :])
                    + sign * 0.5 * (other[:, None, :, None] * skew[:, :, None, :]
                                    + other[:, None, None, :] * skew[:, :, :, None])) * inv_len2

        h1[:, :, es, es] = edge_block(m1, m2, -1.0)
        h2[:, :, es, es] = edge_block(m2, m1, +1.0)
        if theta_slot is not None:
            h1[:, :, theta_slot, theta_slot] = -m1
            h2[:, :, theta_slot, theta_slot] = -m2
            mixed1 = -t[:, :, None] * m2[:, None, :] * inv_len  # d2 m1 / dθ de
            mixed2 = t[:, :, None] * m1[:, None, :] * inv_len
            h1[:, :, theta_slot, es] = mixed1
            h1[:, :, es, theta_slot] = mixed1
            h2[:, :, theta_slot, es] = mixed2
            h2[:, :, es, theta_slot] = mixed2
    return Jet(m1, g1, h1), Jet(m2, g2, h2)

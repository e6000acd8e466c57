"""Vectorized unit-quaternion algebra, (..., 4) arrays in (w, x, y, z) order."""

from __future__ import annotations

import numpy as np


def multiply(a, b, xp=np):
    """Hamilton product a ⊗ b of (..., 4) arrays."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return xp.stack([
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    ], axis=-1)


def conjugate(q, xp=np):
    """q̄ of (..., 4)."""
    return q * xp.asarray([1.0, -1.0, -1.0, -1.0])


def pure(v, xp=np):
    """(..., 3) vector -> (..., 4) pure quaternion (0, v)."""
    return xp.concatenate([xp.zeros_like(v[..., :1]), v], axis=-1)


def rotate(q, v, xp=np):
    """Rotate (..., 3) vectors v by unit quaternions q: R(q) v."""
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * xp.cross(u, v)
    return v + w * t + xp.cross(u, t)


def axis(q, index: int, xp=np):
    """Material axis d_index (0: d1, 1: d2, 2: d3) = R(q) e_index, shape (..., 3)."""
    e = np.zeros(3)
    e[index] = 1.0
    return rotate(q, xp.broadcast_to(xp.asarray(e), q.shape[:-1] + (3,)), xp)


def from_two_vectors(a, b, xp=np):
    """Shortest-arc unit quaternions rotating unit vectors a onto unit vectors b, (..., 3) -> (..., 4).

    Antiparallel pairs rotate by π about an axis perpendicular to a.
    """
    dot = xp.sum(a * b, axis=-1, keepdims=True)
    cross = xp.cross(a, b)
    q = xp.concatenate([1.0 + dot, cross], axis=-1)
    helper = xp.where(xp.abs(a[..., :1]) < 0.9, xp.asarray([1.0, 0.0, 0.0]), xp.asarray([0.0, 1.0, 0.0]))
    perpendicular = xp.cross(a, helper)
    flipped = pure(perpendicular / xp.linalg.norm(perpendicular, axis=-1, keepdims=True), xp)
    q = xp.where(dot > -1.0 + 1e-12, q, flipped)
    return normalize(q, xp)


def normalize(q, xp=np):
    return q / xp.linalg.norm(q, axis=-1, keepdims=True)


def from_matrices(matrices):
    """Unit quaternions (S, 4) of rotation matrices (S, 3, 3) (numpy, host), Shepperd's method:
    of the four algebraically equal forms each row uses the one with the largest pivot."""
    m = np.asarray(matrices, np.float64)
    trace = np.trace(m, axis1=1, axis2=2)
    diagonal = np.diagonal(m, axis1=1, axis2=2)
    pivots = np.concatenate([trace[:, None], diagonal], axis=1)
    choice = np.argmax(pivots, axis=1)
    s = np.sqrt(np.maximum(1.0 + trace, 0.0)) * 2.0
    safe = np.maximum(s, 1e-300)
    forms = [np.stack([0.25 * s, (m[:, 2, 1] - m[:, 1, 2]) / safe, (m[:, 0, 2] - m[:, 2, 0]) / safe,
                       (m[:, 1, 0] - m[:, 0, 1]) / safe], axis=1)]
    for i in range(3):
        j, k = (i + 1) % 3, (i + 2) % 3
        s = np.sqrt(np.maximum(1.0 + m[:, i, i] - m[:, j, j] - m[:, k, k], 0.0)) * 2.0
        form = np.empty((len(m), 4))
        safe = np.maximum(s, 1e-300)
        form[:, 0] = (m[:, k, j] - m[:, j, k]) / safe
        form[:, 1 + i] = 0.25 * s
        form[:, 1 + j] = (m[:, j, i] + m[:, i, j]) / safe
        form[:, 1 + k] = (m[:, k, i] + m[:, i, k]) / safe
        forms.append(form)
    stacked = np.stack(forms, axis=1)                                       # (S, 4 forms, 4)
    q = stacked[np.arange(len(m)), choice]
    return q / np.linalg.norm(q, axis=1, keepdims=True)


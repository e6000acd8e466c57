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


def from_matrix(matrix):
    """Unit quaternion (4,) of a 3×3 rotation matrix (numpy, host; scale is removed first)."""
    m = np.asarray(matrix, np.float64)
    m = m / np.linalg.norm(m, axis=0, keepdims=True)
    u, _, vt = np.linalg.svd(m)
    m = u @ vt
    trace = np.trace(m)
    if trace > 0:
        s = 2.0 * np.sqrt(trace + 1.0)
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    else:
        i = int(np.argmax(np.diag(m)))
        j, k = (i + 1) % 3, (i + 2) % 3
        s = 2.0 * np.sqrt(1.0 + m[i, i] - m[j, j] - m[k, k])
        q = np.zeros(4)
        q[0] = (m[k, j] - m[j, k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (m[j, i] + m[i, j]) / s
        q[1 + k] = (m[k, i] + m[i, k]) / s
    q = np.asarray(q, np.float64)
    return q / np.linalg.norm(q)

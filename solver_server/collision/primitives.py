"""Analytic collider shapes: signed distance and outward normal for batches of points.

Primitive fields (scene ``shape``, in the collider's local space, carried to world space by
its ``matrix_world``; see docs/ARCHITECTURE.md §2):

- plane  {"normal": (3,), "point": (3,)} or {"normal", "offset": float}: points x with
         normal·(x − point) = 0, i.e. normal·x = offset; the solid side is below (−normal)
- sphere {"center": (3,), "radius": float [m]}
- box    {"center": (3,), "size": (3,) full edge lengths [m]}
- torus  {"center": (3,), "major_radius", "minor_radius" [m]}, ring in the local XY plane

``matrix_world`` = T·R·S is split into translation, rotation R (polar factor) and the axis
scales S (column norms). Box sizes scale per axis exactly; a sphere uses radius × the largest
axis scale (a non-uniformly scaled sphere is treated as its bounding sphere, as the add-on
documents); a torus uses the mean XY scale for its major and the mean scale for its minor radius.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


def decompose(matrix: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(4, 4) affine -> translation (3,), rotation (3, 3) with det +1, axis scales (3,)."""
    linear = matrix[:3, :3]
    u, _, vt = np.linalg.svd(linear)
    rotation = u @ vt
    if np.linalg.det(rotation) < 0:
        u[:, -1] *= -1
        rotation = u @ vt
    scale = np.linalg.norm(linear, axis=0)
    return matrix[:3, 3].copy(), rotation, scale


class Primitive(ABC):
    """Base: world-space parameters are recomputed by :meth:`set_matrix`."""

    def __init__(self, shape: dict, matrix: np.ndarray):
        self.shape = shape
        self._uploaded: dict[str, tuple] = {}   # name -> (host array, xp, dtype, device copy)
        self.set_matrix(matrix)

    def _device(self, xp, name: str, dtype):
        """The host array attribute ``name`` on ``xp``'s device, uploaded once per pose (set_matrix
        replaces the host arrays, which invalidates the copy)."""
        host = getattr(self, name)
        cached = self._uploaded.get(name)
        if cached is not None and cached[0] is host and cached[1] is xp and cached[2] == dtype:
            return cached[3]
        device = xp.asarray(host, dtype=dtype)
        self._uploaded[name] = (host, xp, dtype, device)
        return device

    @abstractmethod
    def set_matrix(self, matrix: np.ndarray) -> None:
        """Place the primitive with the object's (4, 4) world matrix."""

    @abstractmethod
    def signed_distance(self, xp, points):
        """points (n, 3) -> (distance (n,) [m], positive outside; outward unit normal (n, 3))."""


def _safe_normalize(xp, vectors, fallback_axis: int):
    """Unit vectors (n, 3) and lengths (n,) of ``vectors``; the unit axis ``fallback_axis`` (made on
    the device, no upload) where a vector is shorter than 1e-12, with length 0."""
    length = xp.linalg.norm(vectors, axis=1)
    tiny = length < 1e-12
    length = xp.where(tiny, 1.0, length)
    fallback = xp.eye(3, dtype=vectors.dtype)[fallback_axis]
    unit = xp.where(tiny[:, None], fallback, vectors / length[:, None])
    return unit, xp.where(tiny, 0.0, length)


class Plane(Primitive):
    def set_matrix(self, matrix):
        normal = np.asarray(self.shape["normal"], float)
        point_local = normal * (self.shape["offset"] / float(normal @ normal))
        world_normal = np.linalg.inv(matrix[:3, :3]).T @ normal
        self.normal = world_normal / np.linalg.norm(world_normal)
        self.point = matrix[:3, :3] @ point_local + matrix[:3, 3]

    def signed_distance(self, xp, points):
        normal = self._device(xp, "normal", points.dtype)
        distance = (points - self._device(xp, "point", points.dtype)) @ normal
        return distance, xp.broadcast_to(normal, points.shape)


class Sphere(Primitive):
    def set_matrix(self, matrix):
        _, _, scale = decompose(matrix)
        self.center = matrix[:3, :3] @ np.asarray(self.shape["center"], float) + matrix[:3, 3]
        self.radius = float(self.shape["radius"] * scale.max())

    def signed_distance(self, xp, points):
        offset = points - self._device(xp, "center", points.dtype)
        normal, length = _safe_normalize(xp, offset, 2)
        return length - self.radius, normal


class Box(Primitive):
    def set_matrix(self, matrix):
        _, rotation, scale = decompose(matrix)
        self.center = matrix[:3, :3] @ np.asarray(self.shape["center"], float) + matrix[:3, 3]
        self.rotation = rotation
        self.half = 0.5 * np.asarray(self.shape["size"], float) * scale

    def signed_distance(self, xp, points):
        rotation = self._device(xp, "rotation", points.dtype)
        local = (points - self._device(xp, "center", points.dtype)) @ rotation
        half = self._device(xp, "half", points.dtype)
        excess = xp.abs(local) - half
        outside_vec = xp.maximum(excess, 0.0) * xp.sign(local)
        outside_len = xp.linalg.norm(outside_vec, axis=1)
        inside = outside_len <= 0.0
        axis = xp.argmax(excess, axis=1)
        inside_normal = xp.zeros_like(local)
        rows = xp.arange(len(local))
        sign = xp.sign(local[rows, axis])
        inside_normal[rows, axis] = xp.where(sign == 0, 1.0, sign)
        outside_normal = outside_vec / xp.where(inside, 1.0, outside_len)[:, None]
        normal_local = xp.where(inside[:, None], inside_normal, outside_normal)
        distance = xp.where(inside, excess.max(axis=1), outside_len)
        return distance, normal_local @ rotation.T


class Torus(Primitive):
    def set_matrix(self, matrix):
        _, rotation, scale = decompose(matrix)
        self.center = matrix[:3, :3] @ np.asarray(self.shape["center"], float) + matrix[:3, 3]
        self.rotation = rotation
        self.major = float(self.shape["major_radius"] * scale[:2].mean())
        self.minor = float(self.shape["minor_radius"] * scale.mean())

    def signed_distance(self, xp, points):
        rotation = self._device(xp, "rotation", points.dtype)
        local = (points - self._device(xp, "center", points.dtype)) @ rotation
        radial = local.copy()
        radial[:, 2] = 0.0
        radial_dir, _ = _safe_normalize(xp, radial, 0)
        tube = local - self.major * radial_dir
        normal_local, length = _safe_normalize(xp, tube, 2)
        return length - self.minor, normal_local @ rotation.T


PRIMITIVES = {"plane": Plane, "sphere": Sphere, "box": Box, "torus": Torus}

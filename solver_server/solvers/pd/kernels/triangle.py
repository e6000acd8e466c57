"""Warp kernels of the PD local step for cloth triangles (membrane strain with the σ clamp; the cloth shear of
``constraints.triangle_strain``) fused with its right-hand-side assembly.

``triangle_forces``: per triangle F = Ds·Dm⁻¹ (3×2; Ds columns x_1 − x_0, x_2 − x_0), its projection P onto
singular values in [σmin, σmax] and the columns h_i = ω (P Dm⁻ᵀ)[:, i], i = 0, 1: the right-hand-side
contributions Aᵀ W p to corners 1 and 2, corner 0 taking −(h_0 + h_1). ``gather_triangle_rhs``: each particle
adds its corners' contributions (``incidence.corner_incidence``): no atomics, one order of sums on every device.

The projection is ``projections.project_strain_2d`` per triangle: the 2×2 eigen-decomposition of FᵀF in closed
form, P = F·V diag(σ*/σ) Vᵀ; a degenerate triangle (σ2 ≈ 0) takes P = σ1* u1 v1ᵀ + σ2* u2 v2ᵀ with
u2 = F v2 / σ2 as in the SVD, or any unit vector perpendicular to u1 when F v2 vanishes (a collinear triangle:
the SVD is not unique there, numpy's LAPACK makes its own choice).
"""

from __future__ import annotations

import numpy as np
import warp as wp

from ....kernels import launch_items, warp_device_of, warp_view
from ..incidence import corner_incidence

wp.set_module_options({"enable_backward": False})

ISOTROPIC = wp.constant(wp.float64(1e-14))    # |eigenvector candidate| below this × λ1: FᵀF ∝ I
DEGENERATE = wp.constant(wp.float64(1e-9))    # σ2 below this × σ1: the triangle is flat (rank 1)


@wp.func
def perpendicular_unit(u: wp.vec3d, hint: wp.vec3d) -> wp.vec3d:
    """A unit vector perpendicular to the unit ``u``: ``hint`` without its u part where that is not tiny,
    else the cross product of u with its least-aligned axis."""
    rest = hint - wp.dot(hint, u) * u
    length = wp.length(rest)
    if length > wp.float64(1e-12):
        return rest / length
    axis = wp.vec3d(wp.float64(1.0), wp.float64(0.0), wp.float64(0.0))
    if wp.abs(u[0]) > wp.float64(0.5):
        axis = wp.vec3d(wp.float64(0.0), wp.float64(1.0), wp.float64(0.0))
    return wp.normalize(wp.cross(u, axis))


@wp.func
def membrane_projection(f0: wp.vec3d, f1: wp.vec3d, low: wp.float64, high: wp.float64):
    """The columns (p0, p1) of the nearest 3×2 matrix to F = [f0 f1] with singular values in [low, high]."""
    a = wp.dot(f0, f0)
    b = wp.dot(f0, f1)
    d = wp.dot(f1, f1)
    half_trace = wp.float64(0.5) * (a + d)
    root = wp.sqrt(wp.max(wp.float64(0.25) * (a - d) * (a - d) + b * b, wp.float64(0.0)))
    lam1 = half_trace + root
    lam2 = wp.max(half_trace - root, wp.float64(0.0))
    sigma1 = wp.sqrt(lam1)
    sigma2 = wp.sqrt(lam2)
    # eigenvector of λ1: (b, λ1 − a) or (λ1 − d, b), whichever is longer
    v1 = wp.vec2d(b, lam1 - a)
    other = wp.vec2d(lam1 - d, b)
    if wp.dot(other, other) > wp.dot(v1, v1):
        v1 = other
    norm = wp.length(v1)
    if norm < ISOTROPIC * wp.max(lam1, wp.float64(1e-300)):
        v1 = wp.vec2d(wp.float64(1.0), wp.float64(0.0))
    else:
        v1 = v1 / norm
    v2 = wp.vec2d(-v1[1], v1[0])
    if sigma2 >= DEGENERATE * wp.max(sigma1, wp.float64(1e-300)):
        s1 = wp.clamp(sigma1, low, high) / wp.max(sigma1, wp.float64(1e-300))
        s2 = wp.clamp(sigma2, low, high) / sigma2
        scale = s1 * wp.outer(v1, v1) + s2 * wp.outer(v2, v2)
        return f0 * scale[0, 0] + f1 * scale[1, 0], f0 * scale[0, 1] + f1 * scale[1, 1]
    # rank 1: F = σ1 u1 v1ᵀ; u2 ⊥ u1 in the columns' plane (or any ⊥)
    image = f0 * v1[0] + f1 * v1[1]
    u1 = wp.vec3d(wp.float64(1.0), wp.float64(0.0), wp.float64(0.0))
    if sigma1 > wp.float64(0.0):
        u1 = image / wp.length(image)
    u2 = perpendicular_unit(u1, f0 * v2[0] + f1 * v2[1])
    c1 = wp.clamp(sigma1, low, high) * u1
    c2 = wp.clamp(sigma2, low, high) * u2
    return c1 * v1[0] + c2 * v2[0], c1 * v1[1] + c2 * v2[1]


@wp.kernel
def triangle_forces(triangles: wp.array(dtype=wp.int32, ndim=2), rest_inverse: wp.array(dtype=wp.mat22d),
                    low: wp.array(dtype=wp.float64), high: wp.array(dtype=wp.float64),
                    weight: wp.array(dtype=wp.float64), q: wp.array(dtype=wp.vec3d), first: int, chunk: int,
                    forces: wp.array(dtype=wp.vec3d)):
    """forces[2t + i] = ω_t (P Dm⁻ᵀ)[:, i] for triangles [first + t·chunk, first + (t + 1)·chunk)."""
    start = first + wp.tid() * chunk
    for t in range(start, wp.min(start + chunk, triangles.shape[0])):
        origin = q[triangles[t, 0]]
        e1 = q[triangles[t, 1]] - origin
        e2 = q[triangles[t, 2]] - origin
        m = rest_inverse[t]
        f0 = e1 * m[0, 0] + e2 * m[1, 0]
        f1 = e1 * m[0, 1] + e2 * m[1, 1]
        p0, p1 = membrane_projection(f0, f1, low[t], high[t])
        w = weight[t]
        forces[2 * t] = w * (p0 * m[0, 0] + p1 * m[0, 1])
        forces[2 * t + 1] = w * (p0 * m[1, 0] + p1 * m[1, 1])


@wp.kernel
def gather_triangle_rhs(incident_start: wp.array(dtype=wp.int32), incident_corner: wp.array(dtype=wp.int32),
                        forces: wp.array(dtype=wp.vec3d), first: int, chunk: int, rhs: wp.array(dtype=wp.vec3d)):
    """rhs[p] += its triangles' contributions at its corners (corner 0: minus the other two), for particles
    [first + t·chunk, first + (t + 1)·chunk)."""
    start = first + wp.tid() * chunk
    for particle in range(start, wp.min(start + chunk, incident_start.shape[0] - 1)):
        total = rhs[particle]
        for k in range(incident_start[particle], incident_start[particle + 1]):
            code = incident_corner[k]
            t = code // 3
            corner = code % 3
            if corner == 0:
                total = total - (forces[2 * t] + forces[2 * t + 1])
            else:
                total = total + forces[2 * t + corner - 1]
        rhs[particle] = total


class TriangleStrainLocal:
    """The triangle-strain batch's local step and right-hand-side assembly in two launches.

    triangles (T, 3); rest_inverse (T, 2, 2) Dm⁻¹ [1/m]; limits (T, 2) [σmin, σmax]; weights (T,) ω [N·m];
    particle_count n; backend: the job's array backend (the arrays live on its device).
    """

    def __init__(self, backend, triangles: np.ndarray, rest_inverse: np.ndarray, limits: np.ndarray,
                 weights: np.ndarray, particle_count: int):
        xp = backend.xp
        start, corner = corner_incidence(triangles, particle_count)
        floats = lambda values: xp.asarray(np.ascontiguousarray(values, dtype=np.float64))  # noqa: E731
        self._arrays = [xp.asarray(np.ascontiguousarray(triangles, dtype=np.int32)), floats(rest_inverse),
                        floats(limits[:, 0]), floats(limits[:, 1]), floats(weights)]
        types = [wp.int32, wp.mat22d, wp.float64, wp.float64, wp.float64]
        self._views = [warp_view(array, dtype) for array, dtype in zip(self._arrays, types)]
        self._incidence = [xp.asarray(start), xp.asarray(corner)]
        self._incidence_views = [warp_view(array, wp.int32) for array in self._incidence]
        self.forces = xp.zeros((2 * len(triangles), 3), dtype=xp.float64)
        self._forces_view = warp_view(self.forces, wp.vec3d)
        self.device = warp_device_of(self._arrays[0])
        self.count = particle_count
        self.per_item = None            # None: the device's layout (tests force the other one)

    def add_rhs(self, q, rhs) -> None:
        """rhs (n, 3) += Aᵀ W p(q) for positions q (n, 3) [m]; both C-contiguous float64 on the device."""
        launch_items(triangle_forces, len(self._arrays[0]), self.device, [*self._views, warp_view(q, wp.vec3d)],
                     [self._forces_view], per_item=self.per_item, split=True)
        launch_items(gather_triangle_rhs, self.count, self.device, [*self._incidence_views, self._forces_view],
                     [warp_view(rhs, wp.vec3d)], per_item=self.per_item, split=True)

"""Warp kernels of the PD local step for tetrahedra (seed §3.5, eqs. 3-17 … 3-23) fused with its right-hand-side
assembly (eq. 2-8): the tet strain (σ clamped to [σmin, σmax]) and volume (det = 1) constraints of
``constraints.tet_strain`` / ``constraints.tet_volume`` in one pass over the tets.

``tet_forces``: per tet F = Ds·Dm⁻¹ (Ds columns x_i − x_3), the strain projection P_s, the volume projection
P_v, and H = (ω_s P_s + ω_v P_v)·Dm⁻ᵀ. Column i of H is the tet's right-hand-side contribution Aᵀ W p to its
corner i < 3 and corner 3 takes minus their sum (the selector rows of eq. 3-23). ``gather_tet_rhs``: each
particle adds its corners' columns (``incidence.corner_incidence``): no atomics, one order of sums on every
device.

The projections are the arithmetic of ``projections.py`` per element. The rotation of F = R S: the scaled
Newton iteration X ← ½(X/γ + γ X⁻ᵀ), γ = |det X|^(1/3), quadratic: a step of size s leaves an error of about
s²/2, so a tet stops after a step below POLAR_LAST_STEP (at most POLAR_ITERATIONS), and γ = 1 once the steps are
below POLAR_UNSCALED_FROM, where the scaling no longer pays for its cube root. Stretches already in the band
keep F; inverted tets and the rest of the out-of-band ones go through ``wp.svd3`` (U, V proper rotations, the
sign of an inversion on σ3: the signed SVD). The volume projection is Gauss–Newton on P = F − λ cof(P) (the
closest point on σ1σ2σ3 = 1, Bouaziz et al. 2014; a tet stops once det is within VOLUME_TOLERANCE of 1 and a
step moves no entry more than that, at most VOLUME_ITERATIONS), for inverted tets the same in singular-value
space from |σ|. A full SVD per tet costs 0.7 µs on one CPU core against ~0.13 µs for the polar iteration
(49 000 tets after an impact: 6.5 ms), so the SVD stays the exception.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from ....kernels import launch_items, warp_device_of, warp_view
from ..incidence import corner_incidence

wp.set_module_options({"enable_backward": False})

POLAR_ITERATIONS = 10
POLAR_LAST_STEP = wp.constant(wp.float64(1e-6))      # a step this small leaves an error ≈ ½ step² ≤ 5e-13
POLAR_UNSCALED_FROM = wp.constant(wp.float64(1e-2))  # steps below this are near the fixed point: no γ scaling
VOLUME_ITERATIONS = 8
VOLUME_TOLERANCE = wp.constant(wp.float64(1e-9))
INVERTED_RELATIVE_DET = wp.constant(wp.float64(1e-12))   # strain: det F ≤ this · (largest |F_ij|)³ is inverted
INVERTED_VOLUME_DET = wp.constant(wp.float64(1e-9))      # volume: det F ≤ this is inverted
PSD_TOLERANCE = wp.constant(wp.float64(-1e-10))         # Sylvester's criterion, leading minors ≥ this


@wp.func
def cofactor(m: wp.mat33d) -> wp.mat33d:
    """The cofactor matrix of m: m⁻ᵀ = cofactor(m) / det m."""
    return wp.mat33d(m[1, 1] * m[2, 2] - m[1, 2] * m[2, 1], m[1, 2] * m[2, 0] - m[1, 0] * m[2, 2],
                     m[1, 0] * m[2, 1] - m[1, 1] * m[2, 0],
                     m[0, 2] * m[2, 1] - m[0, 1] * m[2, 2], m[0, 0] * m[2, 2] - m[0, 2] * m[2, 0],
                     m[0, 1] * m[2, 0] - m[0, 0] * m[2, 1],
                     m[0, 1] * m[1, 2] - m[0, 2] * m[1, 1], m[0, 2] * m[1, 0] - m[0, 0] * m[1, 2],
                     m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0])


@wp.func
def cofactor_determinant(m: wp.mat33d, cof: wp.mat33d) -> wp.float64:
    return m[0, 0] * cof[0, 0] + m[0, 1] * cof[0, 1] + m[0, 2] * cof[0, 2]


@wp.func
def largest_entry(m: wp.mat33d) -> wp.float64:
    largest = wp.float64(0.0)
    for i in range(3):
        for j in range(3):
            largest = wp.max(largest, wp.abs(m[i, j]))
    return largest


@wp.func
def polar_rotation(f: wp.mat33d) -> wp.mat33d:
    """R of F = R S (det F > 0) by the scaled Newton iteration (``projections.polar_rotation``). Its steps
    depend on the spread of F's singular values, not on R: a start from a nearby rotation saves none."""
    x = f
    scaled = int(1)
    for _ in range(POLAR_ITERATIONS):
        cof = cofactor(x)
        det = cofactor_determinant(x, cof)
        gamma = wp.float64(1.0)
        if scaled == 1:
            gamma = wp.cbrt(wp.abs(det))
        updated = wp.float64(0.5) * (x * (wp.float64(1.0) / gamma) + cof * (gamma / det))
        change = largest_entry(updated - x)
        x = updated
        if change < POLAR_LAST_STEP:
            break
        if change < POLAR_UNSCALED_FROM:
            scaled = 0
    return x


@wp.func
def positive_semidefinite(s: wp.mat33d) -> bool:
    """Sylvester's criterion (leading minors ≥ PSD_TOLERANCE) for a symmetric s."""
    minor2 = s[0, 0] * s[1, 1] - s[0, 1] * s[1, 0]
    return s[0, 0] >= PSD_TOLERANCE and minor2 >= PSD_TOLERANCE and wp.determinant(s) >= PSD_TOLERANCE


@wp.func
def svd_clamp(f: wp.mat33d, low: wp.float64, high: wp.float64) -> wp.mat33d:
    """U clamp(σ, low, high) Vᵀ of the signed SVD (an inversion's sign on σ3, which the clamp undoes)."""
    u = wp.mat33d()
    sigma = wp.vec3d()
    v = wp.mat33d()
    wp.svd3(f, u, sigma, v)
    clamped = wp.vec3d(wp.clamp(sigma[0], low, high), wp.clamp(sigma[1], low, high), wp.clamp(sigma[2], low, high))
    return u * wp.diag(clamped) * wp.transpose(v)


@wp.func
def inverted(f: wp.mat33d) -> bool:
    """det F ≤ INVERTED_RELATIVE_DET · (largest |F_ij|)³: inverted or flat for the strain projection."""
    scale = wp.max(largest_entry(f), wp.float64(1e-300))
    return wp.determinant(f) <= INVERTED_RELATIVE_DET * scale * scale * scale


@wp.func
def strain_projection(f: wp.mat33d, low: wp.float64, high: wp.float64) -> wp.mat33d:
    """The nearest matrix to F with signed singular values in [low, high] (``projections.project_strain_3d``)."""
    if inverted(f):
        return svd_clamp(f, low, high)
    rotation = polar_rotation(f)
    if low == wp.float64(1.0) and high == wp.float64(1.0):
        return rotation
    stretch = wp.transpose(rotation) * f
    stretch = wp.float64(0.5) * (stretch + wp.transpose(stretch))
    eye = wp.identity(n=3, dtype=wp.float64)
    if positive_semidefinite(stretch - low * eye) and positive_semidefinite(high * eye - stretch):
        return f
    return svd_clamp(f, low, high)


@wp.func
def volume_projection_svd(f: wp.mat33d) -> wp.mat33d:
    """det = 1 projection of an inverted F in singular-value space from |σ| (Gauss–Newton on s1 s2 s3 = 1)."""
    u = wp.mat33d()
    sigma = wp.vec3d()
    v = wp.mat33d()
    wp.svd3(f, u, sigma, v)
    target = wp.vec3d(wp.abs(sigma[0]), wp.abs(sigma[1]), wp.abs(sigma[2]))
    s = target
    for _ in range(3 * VOLUME_ITERATIONS):
        constraint = s[0] * s[1] * s[2] - wp.float64(1.0)
        grad = wp.vec3d(s[1] * s[2], s[0] * s[2], s[0] * s[1])
        lam = (constraint + wp.dot(grad, target - s)) / wp.max(wp.dot(grad, grad), wp.float64(1e-30))
        s = target - lam * grad
    return u * wp.diag(s) * wp.transpose(v)


@wp.func
def volume_projection(f: wp.mat33d) -> wp.mat33d:
    """The closest matrix to F with det = 1 (``projections.project_volume_3d``)."""
    if wp.determinant(f) <= INVERTED_VOLUME_DET:
        return volume_projection_svd(f)
    p = f
    for _ in range(VOLUME_ITERATIONS):
        cof = cofactor(p)
        det = cofactor_determinant(p, cof)
        lam = (det - wp.float64(1.0) + wp.ddot(cof, f - p)) / wp.max(wp.ddot(cof, cof), wp.float64(1e-30))
        updated = f - lam * cof
        change = largest_entry(updated - p)
        p = updated
        if change < VOLUME_TOLERANCE and wp.abs(det - wp.float64(1.0)) < VOLUME_TOLERANCE:
            break
    return p


@wp.kernel
def tet_forces(tets: wp.array(dtype=wp.int32, ndim=2), rest_inverse: wp.array(dtype=wp.mat33d),
               low: wp.array(dtype=wp.float64), high: wp.array(dtype=wp.float64),
               strain_weight: wp.array(dtype=wp.float64), volume_weight: wp.array(dtype=wp.float64),
               q: wp.array(dtype=wp.vec3d), first: int, chunk: int, forces: wp.array(dtype=wp.mat33d)):
    """forces[t] = (ω_s P_s(F) + ω_v P_v(F)) Dm⁻ᵀ for tets [first + t·chunk, first + (t + 1)·chunk); the volume
    projection only where ω_v > 0."""
    start = first + wp.tid() * chunk
    for t in range(start, wp.min(start + chunk, tets.shape[0])):
        pivot = q[tets[t, 3]]
        deformed = wp.matrix_from_cols(q[tets[t, 0]] - pivot, q[tets[t, 1]] - pivot, q[tets[t, 2]] - pivot)
        f = deformed * rest_inverse[t]
        target = strain_weight[t] * strain_projection(f, low[t], high[t])
        if volume_weight[t] > wp.float64(0.0):
            target = target + volume_weight[t] * volume_projection(f)
        forces[t] = target * wp.transpose(rest_inverse[t])


@wp.kernel
def gather_tet_rhs(incident_start: wp.array(dtype=wp.int32), incident_corner: wp.array(dtype=wp.int32),
                   forces: wp.array(dtype=wp.mat33d), first: int, chunk: int, rhs: wp.array(dtype=wp.vec3d)):
    """rhs[p] += the columns of its tets' forces at its corners (corner 3: minus the sum of the three), for
    particles [first + t·chunk, first + (t + 1)·chunk)."""
    start = first + wp.tid() * chunk
    for particle in range(start, wp.min(start + chunk, incident_start.shape[0] - 1)):
        total = rhs[particle]
        for k in range(incident_start[particle], incident_start[particle + 1]):
            code = incident_corner[k]
            h = forces[code // 4]
            corner = code % 4
            if corner == 3:
                total = total - (wp.vec3d(h[0, 0], h[1, 0], h[2, 0]) + wp.vec3d(h[0, 1], h[1, 1], h[2, 1])
                                 + wp.vec3d(h[0, 2], h[1, 2], h[2, 2]))
            else:
                total = total + wp.vec3d(h[0, corner], h[1, corner], h[2, corner])
        rhs[particle] = total


class TetLocal:
    """The tet strain and volume batches' local step and right-hand-side assembly in two launches.

    tets (T, 4); rest_inverse (T, 3, 3) Dm⁻¹ [1/m]; limits (T, 2) [σmin, σmax]; strain_weight (T,) ω_s [J];
    volume_weight (T,) ω_v [J] (0: no volume constraint on that tet); particle_count n; backend: the job's
    array backend (the arrays live on its device).
    """

    def __init__(self, backend, tets: np.ndarray, rest_inverse: np.ndarray, limits: np.ndarray,
                 strain_weight: np.ndarray, volume_weight: np.ndarray, particle_count: int):
        xp = backend.xp
        start, corner = corner_incidence(tets, particle_count)
        floats = lambda values: xp.asarray(np.ascontiguousarray(values, dtype=np.float64))  # noqa: E731
        self._arrays = [xp.asarray(np.ascontiguousarray(tets, dtype=np.int32)), floats(rest_inverse),
                        floats(limits[:, 0]), floats(limits[:, 1]), floats(strain_weight), floats(volume_weight)]
        types = [wp.int32, wp.mat33d, wp.float64, wp.float64, wp.float64, wp.float64]
        self._views = [warp_view(array, dtype) for array, dtype in zip(self._arrays, types)]
        self._incidence = [xp.asarray(start), xp.asarray(corner)]
        self._incidence_views = [warp_view(array, wp.int32) for array in self._incidence]
        self.forces = xp.zeros((len(tets), 3, 3), dtype=xp.float64)
        self._forces_view = warp_view(self.forces, wp.mat33d)
        self.device = warp_device_of(self._arrays[0])
        self.count = particle_count
        self.per_item = None            # None: the device's layout (tests force the other one)

    def add_rhs(self, q, rhs) -> None:
        """rhs (n, 3) += Aᵀ W p(q) of both batches for positions q (n, 3) [m]; C-contiguous float64 on the device."""
        launch_items(tet_forces, len(self.forces), self.device, [*self._views, warp_view(q, wp.vec3d)],
                     [self._forces_view], per_item=self.per_item, split=True)
        launch_items(gather_tet_rhs, self.count, self.device, [*self._incidence_views, self._forces_view],
                     [warp_view(rhs, wp.vec3d)], per_item=self.per_item, split=True)

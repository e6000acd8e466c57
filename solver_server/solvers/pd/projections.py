"""Batched projections of deformation gradients onto {U Σ* Vᵀ : σ* ∈ [σmin, σmax]} (seed eq. 3-21/3-22).

Fast path without per-matrix LAPACK calls: the rotation R of the polar decomposition F = R S by
the scaled Newton iteration X ← ½(γX + (γX)⁻ᵀ) (3×3 inverses by cofactors, vectorized), and an
in-band test of the stretch S (Sylvester's criterion on S − σmin I and σmax I − S). Elements
whose stretches already lie in [σmin, σmax] project to F itself; with σmin = σmax = 1 the
projection is R. Only inverted elements (det F ≤ 0) and out-of-band elements with a non-trivial
band go through the batched SVD.
"""

from __future__ import annotations


def _cofactor(xp, m):
    """Component-major (3, 3, C) -> cofactor matrices (3, 3, C) and determinants (C,)."""
    a, b, c = m[0, 0], m[0, 1], m[0, 2]
    d, e, f = m[1, 0], m[1, 1], m[1, 2]
    g, h, i = m[2, 0], m[2, 1], m[2, 2]
    cof = xp.empty_like(m)
    cof[0, 0] = e * i - f * h
    cof[0, 1] = f * g - d * i
    cof[0, 2] = d * h - e * g
    cof[1, 0] = c * h - b * i
    cof[1, 1] = a * i - c * g
    cof[1, 2] = b * g - a * h
    cof[2, 0] = b * f - c * e
    cof[2, 1] = c * d - a * f
    cof[2, 2] = a * e - b * d
    det = a * cof[0, 0] + b * cof[0, 1] + c * cof[0, 2]
    return cof, det


def _component_major(xp, matrices):
    return xp.ascontiguousarray(xp.moveaxis(matrices, 0, -1))


def polar_rotation(xp, matrices, max_iterations: int = 10, tolerance: float = 1e-9):
    """Rotation factor of F = R S for matrices with det > 0, (C, 3, 3) -> (C, 3, 3).
    Stops when the largest entry change is below ``tolerance`` (quadratic convergence)."""
    x = _component_major(xp, matrices)
    for _ in range(max_iterations):
        cof, det = _cofactor(xp, x)
        gamma = xp.cbrt(xp.abs(det))
        updated = 0.5 * (x / gamma + cof * (gamma / det))     # ½(γX + (γX)⁻ᵀ), X⁻ᵀ = cof/det, γ = |det|^(-1/3)
        change = float(xp.abs(updated - x).max()) if x.size else 0.0
        x = updated
        if change < tolerance:
            break
    return xp.moveaxis(x, -1, 0)


def _positive_semidefinite(xp, sym):
    """Sylvester's criterion (with a small tolerance) for component-major symmetric (3, 3, C)."""
    tol = -1e-10
    m2 = sym[0, 0] * sym[1, 1] - sym[0, 1] * sym[1, 0]
    _, m3 = _cofactor(xp, sym)
    return (sym[0, 0] >= tol) & (m2 >= tol) & (m3 >= tol)


def _svd_clamp(xp, matrices, low, high):
    """Signed SVD projection (handles inversion): U, V proper rotations, σ3 < 0 for det F < 0,
    then σ clamped to [low, high] (which un-inverts). (K, 3, 3) -> (K, 3, 3)."""
    u, sigma, vt = xp.linalg.svd(matrices)
    flip_u = xp.linalg.det(u) < 0
    flip_v = xp.linalg.det(vt) < 0
    u[:, :, 2] *= xp.where(flip_u, -1.0, 1.0)[:, None]
    vt[:, 2, :] *= xp.where(flip_v, -1.0, 1.0)[:, None]
    sigma[:, 2] *= xp.where(flip_u ^ flip_v, -1.0, 1.0)
    sigma = xp.clip(sigma, low[:, None], high[:, None])
    return (u * sigma[:, None, :]) @ vt


def project_strain_3d(xp, matrices, low, high):
    """F (C, 3, 3) -> nearest matrix with signed singular values in [low, high] (C,) each."""
    _, det = _cofactor(xp, _component_major(xp, matrices))
    inverted = det <= 1e-12 * xp.maximum(xp.abs(matrices).max(axis=(1, 2)), 1e-300) ** 3
    result = xp.empty_like(matrices)
    good = ~inverted
    if bool(good.any()):
        f = matrices[good]
        rotation = polar_rotation(xp, f)
        lo, hi = low[good], high[good]
        trivial = (lo == 1.0) & (hi == 1.0)
        projected = xp.where(trivial[:, None, None], rotation, f)
        needs_svd = ~trivial
        if bool(needs_svd.any()):
            stretch = _component_major(xp, xp.swapaxes(rotation, 1, 2) @ f)
            stretch = 0.5 * (stretch + xp.swapaxes(stretch, 0, 1))
            eye = xp.eye(3, dtype=f.dtype)[:, :, None]
            in_band = _positive_semidefinite(xp, stretch - lo * eye) & _positive_semidefinite(xp, hi * eye - stretch)
            needs_svd &= ~in_band
        if bool(needs_svd.any()):
            projected[needs_svd] = _svd_clamp(xp, f[needs_svd], lo[needs_svd], hi[needs_svd])
        result[good] = projected
    if bool(inverted.any()):
        result[inverted] = _svd_clamp(xp, matrices[inverted], low[inverted], high[inverted])
    return result


def project_strain_2d(xp, matrices, low, high):
    """Triangle F (C, 3, 2) -> U clamp(σ) Vᵀ, closed form from the 2×2 eigen-decomposition of FᵀF.

    P = F · V diag(σ*/σ) Vᵀ; degenerate triangles (σ2 ≈ 0) fall back to the batched SVD."""
    c = xp.swapaxes(matrices, 1, 2) @ matrices               # (C, 2, 2)
    a, b, d = c[:, 0, 0], c[:, 0, 1], c[:, 1, 1]
    half_trace = 0.5 * (a + d)
    root = xp.sqrt(xp.maximum(0.25 * (a - d) ** 2 + b * b, 0.0))
    lam1, lam2 = half_trace + root, xp.maximum(half_trace - root, 0.0)
    sigma1, sigma2 = xp.sqrt(lam1), xp.sqrt(lam2)
    # eigenvector of λ1: (b, λ1 − a) or (λ1 − d, b), whichever is longer
    v1a = xp.stack([b, lam1 - a], axis=1)
    v1b = xp.stack([lam1 - d, b], axis=1)
    use_a = (v1a * v1a).sum(axis=1) >= (v1b * v1b).sum(axis=1)
    v1 = xp.where(use_a[:, None], v1a, v1b)
    norm = xp.linalg.norm(v1, axis=1)
    isotropic = norm < 1e-14 * xp.maximum(lam1, 1e-300)
    v1 = xp.where(isotropic[:, None], xp.asarray([1.0, 0.0]), v1 / xp.where(isotropic, 1.0, norm)[:, None])
    v2 = xp.stack([-v1[:, 1], v1[:, 0]], axis=1)
    degenerate = sigma2 < 1e-9 * xp.maximum(sigma1, 1e-300)
    s1 = xp.clip(sigma1, low, high) / xp.maximum(sigma1, 1e-300)
    s2 = xp.clip(sigma2, low, high) / xp.where(degenerate, 1.0, sigma2)
    scale = s1[:, None, None] * (v1[:, :, None] * v1[:, None, :]) + s2[:, None, None] * (v2[:, :, None] * v2[:, None, :])
    result = matrices @ scale
    if bool(degenerate.any()):
        u, sigma, vt = xp.linalg.svd(matrices[degenerate], full_matrices=False)
        sigma = xp.clip(sigma, low[degenerate][:, None], high[degenerate][:, None])
        result[degenerate] = (u * sigma[:, None, :]) @ vt
    return result


def _volume_projection_svd(xp, matrices, iterations: int):
    """SVD form of the det = 1 projection (used for inverted elements): closest point on
    s1 s2 s3 = 1 to |σ| by Gauss–Newton in σ-space, U and V kept proper rotations."""
    u, sigma, vt = xp.linalg.svd(matrices)
    flip_u = xp.linalg.det(u) < 0
    flip_v = xp.linalg.det(vt) < 0
    u[:, :, 2] *= xp.where(flip_u, -1.0, 1.0)[:, None]
    vt[:, 2, :] *= xp.where(flip_v, -1.0, 1.0)[:, None]
    target = sigma
    s = target.copy()
    for _ in range(iterations):
        constraint = s[:, 0] * s[:, 1] * s[:, 2] - 1.0
        grad = xp.stack([s[:, 1] * s[:, 2], s[:, 0] * s[:, 2], s[:, 0] * s[:, 1]], axis=1)
        lam = (constraint + (grad * (target - s)).sum(axis=1)) / xp.maximum((grad * grad).sum(axis=1), 1e-30)
        s = target - lam[:, None] * grad
    return (u * s[:, None, :]) @ vt


def project_volume_3d(xp, matrices, iterations: int = 8, tolerance: float = 1e-9):
    """F (C, 3, 3) -> the closest matrix (Frobenius) with det = 1.

    Gauss–Newton on the Lagrange condition P = F − λ cof(P): with G = cof(P_k) (∂det/∂P),
    λ = (det P_k − 1 + G:(F − P_k)) / ‖G‖², P_{k+1} = F − λG. By unitary invariance this equals the
    closest point on σ1σ2σ3 = 1 in singular-value space (Bouaziz et al. 2014), without an SVD.
    Inverted elements (det F ≤ 0) use the SVD form, which restores positive volume."""
    f = _component_major(xp, matrices)
    _, det_f = _cofactor(xp, f)
    inverted = det_f <= 1e-9
    p = f.copy()
    for _ in range(iterations):
        cof, det = _cofactor(xp, p)
        if p.shape[-1] and float(xp.abs(det - 1.0).max()) < tolerance:
            break
        lam = (det - 1.0 + (cof * (f - p)).sum(axis=(0, 1))) / xp.maximum((cof * cof).sum(axis=(0, 1)), 1e-30)
        p = f - lam * cof
    result = xp.moveaxis(p, -1, 0)
    if bool(inverted.any()):
        result[inverted] = _volume_projection_svd(xp, matrices[inverted], 3 * iterations)
    return result

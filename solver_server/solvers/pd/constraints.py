"""Projective Dynamics constraint batches (seed §3): one sparse selector per constraint type.

A batch of C constraints with m rows each is stored as a sparse selector ``A`` of shape
(C·m, n): ``A @ q`` (q: (n, 3) positions) gives the constraint-space state A_c q for every
constraint at once, reshaped to (C, m, 3). ``project`` maps it to the nearest state on the
constraint manifold A'_c p_c (the local step, seed eq. 2-7). The global matrix receives
Aᵀ W A and the right-hand side Aᵀ W P (W = ω_c repeated m times), seed eq. 2-8.

Weights ω_c are derived from physical parameters (units in each builder's docstring) so that
the PD energy Σ ω_c/2 ‖A_c q − p_c‖² approximates the continuum elastic energy [J].
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse

from ...sim.errors import SceneError
from .projections import project_strain_2d, project_strain_3d, project_volume_3d

log = logging.getLogger(__name__)


@dataclass
class ConstraintBatch:
    """C constraints of one type. selector: scipy.sparse (C·m, n); weights: (C,) ω_c;
    rows: m; project(xp, Aq (C, m, 3), q (n, 3)) -> (C, m, 3)."""

    name: str
    selector: scipy.sparse.csr_matrix
    weights: np.ndarray
    rows: int
    project: Callable

    @property
    def count(self) -> int:
        return len(self.weights)

    def normal_matrix(self) -> scipy.sparse.csr_matrix:
        """Σ_c ω_c A_cᵀ A_c, (n, n)."""
        row_weights = np.repeat(self.weights, self.rows)
        return (self.selector.T @ scipy.sparse.diags(row_weights) @ self.selector).tocsr()

    def weighted_transpose(self) -> scipy.sparse.csr_matrix:
        """Aᵀ W, (n, C·m): maps projections to right-hand-side contributions."""
        row_weights = np.repeat(self.weights, self.rows)
        return (self.selector.T @ scipy.sparse.diags(row_weights)).tocsr()


def _selector(stencil: np.ndarray, vertices: np.ndarray, n: int) -> scipy.sparse.csr_matrix:
    """stencil (C, m, k) coefficients on vertices (C, k) -> sparse (C·m, n)."""
    count, rows, width = stencil.shape
    row_index = np.broadcast_to(np.arange(count * rows).reshape(count, rows, 1), stencil.shape)
    col_index = np.broadcast_to(vertices[:, None, :], stencil.shape)
    return scipy.sparse.csr_matrix(
        (stencil.ravel(), (row_index.ravel(), col_index.ravel())), shape=(count * rows, n)
    )


# ----------------------------------------------------------------------------- edges

def unique_edges(triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """triangles (F, 3) -> (edges (E, 2) sorted vertex pairs, edge_of (F, 3): index of the
    edge (t[k], t[k+1]) of each triangle)."""
    pairs = np.stack([triangles, np.roll(triangles, -1, axis=1)], axis=2).reshape(-1, 2)
    pairs = np.sort(pairs, axis=1)
    edges, inverse = np.unique(pairs, axis=0, return_inverse=True)
    return edges, inverse.reshape(-1, 3)


def triangle_areas(rest: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """(F,) [m²]."""
    a, b, c = (rest[triangles[:, k]] for k in range(3))
    return 0.5 * np.linalg.norm(np.cross(b - a, c - a), axis=1)


def edge_strain(rest: np.ndarray, triangles: np.ndarray, stretch: np.ndarray, limits: np.ndarray) -> ConstraintBatch:
    """Edge springs with strain limits (seed §3.3, eq. 3-1, with the projection onto
    lengths in [σmin·r, σmax·r]).

    stretch: (F,) membrane Young's modulus Y [N/m] per triangle; limits: (F, 2).
    Weight ω_e = Y · A_adj / r_e² [N/m], A_adj = area of the triangles adjacent to the edge:
    this matches the continuum membrane energy under isotropic stretch (a triangular spring
    network has Poisson ratio 1/3).
    """
    n = len(rest)
    edges, edge_of = unique_edges(triangles)
    areas = triangle_areas(rest, triangles)
    count = len(edges)
    stiffness_area = np.bincount(edge_of.ravel(), weights=np.repeat(areas * stretch, 3), minlength=count)
    low = np.full(count, np.inf)
    high = np.full(count, -np.inf)
    np.minimum.at(low, edge_of.ravel(), np.repeat(limits[:, 0], 3))
    np.maximum.at(high, edge_of.ravel(), np.repeat(limits[:, 1], 3))
    rest_length = np.linalg.norm(rest[edges[:, 0]] - rest[edges[:, 1]], axis=1)
    if np.any(rest_length < 1e-9):
        bad = int(np.argmax(rest_length < 1e-9))
        raise SceneError(f"edge ({edges[bad, 0]}, {edges[bad, 1]}) has zero rest length (merge by distance?)")
    weights = stiffness_area / rest_length**2
    stencil = np.tile(np.array([[[1.0, -1.0]]]), (count, 1, 1))
    selector = _selector(stencil, edges, n)
    min_length = low * rest_length
    max_length = high * rest_length

    def project(xp, state, positions):
        vector = state[:, 0, :]
        length = xp.linalg.norm(vector, axis=1)
        target = xp.clip(length, xp.asarray(min_length), xp.asarray(max_length))
        scale = target / xp.maximum(length, 1e-12)
        return (vector * scale[:, None])[:, None, :]

    batch = ConstraintBatch("edge_strain", selector, weights, 1, project)
    batch.edges = edges
    batch.rest_length = rest_length
    batch.limits = np.stack([low, high], axis=1)
    return batch


# ----------------------------------------------------------------------------- pins

def soft_pins(indices: np.ndarray, weights: np.ndarray, n: int) -> ConstraintBatch:
    """Positional constraints (seed §3.2) for partially weighted pins: ω = weight·pin_stiffness
    [N/m]. The projection is the (animated) target, supplied as ``targets`` before each step;
    targets change only the right-hand side."""
    stencil = np.ones((len(indices), 1, 1))
    selector = _selector(stencil, indices[:, None], n)
    batch = ConstraintBatch("soft_pins", selector, weights, 1, None)
    batch.targets = None

    def project(xp, state, positions):
        return batch.targets[:, None, :]

    batch.project = project
    return batch


# ----------------------------------------------------------------------------- strain (SVD clamp)

def triangle_strain(rest: np.ndarray, triangles: np.ndarray, shear: np.ndarray, limits: np.ndarray) -> ConstraintBatch:
    """Continuum membrane strain per triangle (cloth shear): F = Ds·Dm⁻¹ (3×2) projected to the
    nearest matrix with singular values in [σmin, σmax].

    shear: (F,) membrane shear modulus μ [N/m]. PD energy ω/2 ‖F − P‖² with ω = 2 μ A [J]
    equals μ‖F − R‖²·A, whose small-strain limit is the linear shear energy μγ²/2 per area.
    """
    n = len(rest)
    a, b, c = (rest[triangles[:, k]] for k in range(3))
    e1, e2 = b - a, c - a
    t1 = e1 / np.linalg.norm(e1, axis=1)[:, None]
    e2_perp = e2 - (e2 * t1).sum(axis=1)[:, None] * t1
    t2_norm = np.linalg.norm(e2_perp, axis=1)
    if np.any(t2_norm < 1e-12):
        raise SceneError(f"triangle {int(np.argmax(t2_norm < 1e-12))} is degenerate (zero area)")
    t2 = e2_perp / t2_norm[:, None]
    dm = np.zeros((len(triangles), 2, 2))
    dm[:, 0, 0] = np.linalg.norm(e1, axis=1)
    dm[:, 0, 1] = (e2 * t1).sum(axis=1)
    dm[:, 1, 1] = t2_norm
    dm_inv = np.linalg.inv(dm)  # (F, 2, 2)
    # row j of Fᵀ = Σ_i Dm⁻¹[i, j] (x_{i+1} − x_0)
    stencil = np.zeros((len(triangles), 2, 3))
    stencil[:, :, 1] = dm_inv[:, 0, :]
    stencil[:, :, 2] = dm_inv[:, 1, :]
    stencil[:, :, 0] = -(dm_inv[:, 0, :] + dm_inv[:, 1, :])
    area = 0.5 * dm[:, 0, 0] * dm[:, 1, 1]
    weights = 2.0 * shear * area
    low, high = limits[:, 0].copy(), limits[:, 1].copy()

    def project(xp, state, positions):
        gradient = xp.swapaxes(state, 1, 2)  # (C, 3, 2)
        return xp.swapaxes(project_strain_2d(xp, gradient, xp.asarray(low), xp.asarray(high)), 1, 2)

    batch = ConstraintBatch("triangle_strain", _selector(stencil, triangles, n), weights, 2, project)
    batch.triangles = triangles
    batch.rest_inverse = dm_inv
    batch.limits = np.asarray(limits, dtype=float)
    return batch


def tet_rest_frames(rest: np.ndarray, tets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(Dm⁻¹ (T, 3, 3), signed rest volume (T,)) with vertex 3 as pivot (seed eq. 3-17)."""
    x = rest[tets]
    dm = np.stack([x[:, 0] - x[:, 3], x[:, 1] - x[:, 3], x[:, 2] - x[:, 3]], axis=2)
    volume = np.linalg.det(dm) / 6.0
    return dm, volume


def tet_strain(rest: np.ndarray, tets: np.ndarray, young: np.ndarray, limits: np.ndarray) -> ConstraintBatch:
    """Tetrahedral strain (seed §3.5, eqs. 3-17 … 3-23, appendix B): F = Ds·Dm⁻¹, batched SVD,
    σ clamped to [σmin, σmax], inversion handled, ω volume-weighted.

    young: (T,) Young's modulus E [Pa]. ω = E·V [J]: the PD energy (E/2)‖F − R‖²·V has uniaxial
    small-strain modulus E with zero Poisson coupling; the Poisson ratio is added by the
    separate volume constraint (see ``tet_volume``).
    """
    n = len(rest)
    dm, volume = tet_rest_frames(rest, tets)
    if np.any(volume <= 0):
        bad = int(np.argmax(volume <= 0))
        if np.any(volume[bad] == 0) or np.all(volume <= 0):
            raise SceneError(f"tetrahedron {bad} has zero or negative volume (vertex order or degenerate tet)")
        raise SceneError(f"tetrahedron {bad} is inverted in the rest state (vertex order)")
    dm_inv = np.linalg.inv(dm)
    stencil = np.zeros((len(tets), 3, 4))
    stencil[:, :, :3] = np.swapaxes(dm_inv, 1, 2)  # row j, vertex i: Dm⁻¹[i, j]
    stencil[:, :, 3] = -dm_inv.sum(axis=1)          # eq. 3-23
    weights = young * volume
    low, high = limits[:, 0].copy(), limits[:, 1].copy()

    def project(xp, state, positions):
        gradient = xp.swapaxes(state, 1, 2)
        return xp.swapaxes(project_strain_3d(xp, gradient, xp.asarray(low), xp.asarray(high)), 1, 2)

    batch = ConstraintBatch("tet_strain", _selector(stencil, tets, n), weights, 3, project)
    batch.volume = volume
    batch.tets = tets
    batch.rest_inverse = dm_inv
    batch.limits = np.asarray(limits, dtype=float)
    return batch


def tet_volume(rest: np.ndarray, tets: np.ndarray, young: np.ndarray, poisson: np.ndarray) -> ConstraintBatch | None:
    """Volume preservation per tetrahedron: F projected to the closest matrix with det = 1
    (closest point on σ1σ2σ3 = 1 in singular-value space, Bouaziz et al. 2014; inverted elements
    start from |σ|, which restores positive volume).

    Linearised, ‖F − P(F)‖² ≈ ε_vol²/3, so ω = 3·K_extra·V with K_extra = E/3 · 2ν/(1 − 2ν) [Pa]
    brings the bulk modulus of the tet strain energy (E/3) up to E/(3(1 − 2ν)).
    Returns None when every ν is 0; ``elements`` holds the indices of the given tets that have the constraint.
    """
    keep = poisson > 0
    if not np.any(keep):
        return None
    elements = np.nonzero(keep)[0]
    tets, young, poisson = tets[keep], young[keep], poisson[keep]
    n = len(rest)
    dm, volume = tet_rest_frames(rest, tets)
    dm_inv = np.linalg.inv(dm)
    stencil = np.zeros((len(tets), 3, 4))
    stencil[:, :, :3] = np.swapaxes(dm_inv, 1, 2)
    stencil[:, :, 3] = -dm_inv.sum(axis=1)
    extra_bulk = young / 3.0 * 2.0 * poisson / (1.0 - 2.0 * poisson)
    weights = 3.0 * extra_bulk * volume

    def project(xp, state, positions):
        return xp.swapaxes(project_volume_3d(xp, xp.swapaxes(state, 1, 2)), 1, 2)

    batch = ConstraintBatch("tet_volume", _selector(stencil, tets, n), weights, 3, project)
    batch.elements = elements          # rows of the given tets that have the constraint
    return batch


# ----------------------------------------------------------------------------- bending

def mean_value_laplacian(rest: np.ndarray, triangles: np.ndarray, object_id: str | None = None):
    """Mean-value Laplace–Beltrami weights (seed eq. 3-8, tan(θ/2) by eq. 3-11).

    Returns (interior vertex ids (K,), sparse L (K, n) with δ_i = Σ_j w_j (q_i − q_j), i.e.
    row i has +Σw_j at i and −w_j at j; ring scale c_i = Σ_j w_j l_j² / 4 [m] (K,)).
    Boundary vertices (an edge used by one triangle) get no bending constraint (seed §3.4.2).
    Near-collinear corners (θ → π, tan(θ/2) → ∞) are logged as a warning and clamped.
    """
    n = len(rest)
    corners_from = triangles.ravel()                                  # corner vertex i
    nxt = np.roll(triangles, -1, axis=1).ravel()
    prv = np.roll(triangles, 1, axis=1).ravel()
    u = rest[nxt] - rest[corners_from]
    v = rest[prv] - rest[corners_from]
    lu = np.linalg.norm(u, axis=1)
    lv = np.linalg.norm(v, axis=1)
    sin_term = np.linalg.norm(np.cross(u, v), axis=1)
    cos_term = (u * v).sum(axis=1)
    collinear = sin_term < 1e-6 * lu * lv
    if np.any(collinear):
        log.warning("object %r: %d triangle corners are nearly collinear (mean-value weight clamped); "
                    "check the triangulation for redundant vertices", object_id, int(collinear.sum()))
    tan_half = (lu * lv - cos_term) / np.maximum(sin_term, 1e-6 * lu * lv)
    rows = np.concatenate([corners_from, corners_from])
    cols = np.concatenate([nxt, prv])
    vals = np.concatenate([tan_half / lu, tan_half / lv])
    weights = scipy.sparse.csr_matrix((vals, (rows, cols)), shape=(n, n))  # w_ij summed over both triangles
    edges, edge_of = unique_edges(triangles)
    use = np.bincount(edge_of.ravel(), minlength=len(edges))
    boundary_edges = edges[use == 1]
    on_boundary = np.zeros(n, bool)
    on_boundary[boundary_edges.ravel()] = True
    in_mesh = np.zeros(n, bool)
    in_mesh[triangles.ravel()] = True
    interior = np.nonzero(in_mesh & ~on_boundary)[0]
    w_rows = weights[interior]
    laplacian = scipy.sparse.diags(np.asarray(weights.sum(axis=1)).ravel()).tocsr()[interior] - w_rows
    coo = w_rows.tocoo()
    lengths_sq = ((rest[interior[coo.row]] - rest[coo.col]) ** 2).sum(axis=1)
    scale = np.bincount(coo.row, weights=coo.data * lengths_sq, minlength=len(interior)) / 4.0
    return interior, laplacian.tocsr(), scale


def bending(rest: np.ndarray, triangles: np.ndarray, bend: np.ndarray, vertex_areas: np.ndarray,
            object_id: str | None = None) -> ConstraintBatch | None:
    """Mean-curvature bending (seed §3.4, eqs. 3-8 … 3-14).

    bend: (n,) bending rigidity D [N·m] per vertex; vertex_areas (n,) [m²] (one third of the
    adjacent triangle areas). δ_i ≈ −c_i ∇²q = −c_i (κ1+κ2) N, so ω_i = D·A_i / c_i² [N·m]
    makes ω/2‖δ − δ*‖² the plate energy (D/2)(κ1+κ2)²·A_i (checked in tests). The projection is
    the seed's eq. 3-14, H_m·N_s: the rest mean curvature with its sign relative to the surface
    normal, along the current ring normal N_s (area-weighted, from the triangle winding). The
    seed's main form, eq. 3-10 (‖v_m‖ along v_s/‖v_s‖), is the same while the curvature keeps its
    sign, but makes an inverted (snapped-through) curvature free of energy — a curved sheet then
    collapses; 3-14 penalises that and needs no small-‖v_s‖ special case.
    Returns None without interior vertices.
    """
    interior, laplacian, scale = mean_value_laplacian(rest, triangles, object_id)
    keep = bend[interior] > 0
    interior, laplacian, scale = interior[keep], laplacian[keep], scale[keep]
    if len(interior) == 0:
        return None
    weights = bend[interior] * vertex_areas[interior] / scale**2
    rest_curvature = laplacian @ rest                                  # v_m, (K, 3)
    rest_magnitude = np.linalg.norm(rest_curvature, axis=1)
    # orientation of v_m relative to the ring normal, for the eq. 3-14 fallback
    n = len(rest)
    normal_rows = np.repeat(np.arange(len(triangles)), 3)
    face_to_vertex = scipy.sparse.csr_matrix((np.ones(3 * len(triangles)), (triangles.ravel(), normal_rows)),
                                             shape=(n, len(triangles)))[interior]
    tri = triangles

    device_matrices = {}

    def ring_normals(xp, positions):
        a, b, c = positions[tri[:, 0]], positions[tri[:, 1]], positions[tri[:, 2]]
        face = xp.cross(b - a, c - a)
        if xp is np:
            matrix = face_matrix
        else:  # CUDA: the same sparse matrix, moved to the device once
            if "device" not in device_matrices:
                import cupyx.scipy.sparse as device_sparse  # noqa: PLC0415

                device_matrices["device"] = device_sparse.csr_matrix(face_matrix.tocsr())
            matrix = device_matrices["device"]
        normal = matrix @ face
        return normal / xp.maximum(xp.linalg.norm(normal, axis=1), 1e-30)[:, None]

    face_matrix = face_to_vertex
    rest_normals = ring_normals(np, rest)
    orientation = np.sign((rest_curvature * rest_normals).sum(axis=1))
    orientation[orientation == 0] = 1.0
    signed_magnitude = orientation * rest_magnitude
    curved = rest_magnitude > 1e-12 * np.maximum(scale, 1e-300)
    signed_device = signed_magnitude

    def project(xp, state, positions):
        if not curved.any():
            return xp.zeros_like(state)            # flat rest: the target curvature is zero
        normals = ring_normals(xp, positions)
        return (xp.asarray(signed_device)[:, None] * normals)[:, None, :]

    batch = ConstraintBatch("bending", laplacian.tocsr(), weights, 1, project)
    batch.triangles = tri
    batch.interior = interior
    batch.signed_magnitude = signed_magnitude
    batch.curved = bool(curved.any())
    return batch

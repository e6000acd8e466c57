"""Elastic energy of all strands (stretch + bend + twist), its gradient and banded Hessian.

Energies (seed 000 eqs. 2.1, 2.6, 2.7; l̄_i is the Voronoi length ½(|ē^{i−1}| + |ē^i|)):

    E_stretch = Σ_edges  ½ k_s (|e|/|ē| − 1)² |ē|                       k_s = E π r²
    E_bend    = Σ_i  1/(2 l̄_i) · ½ Σ_{j∈{i−1,i}} (ω_i^j − ω̄_i^j)ᵀ B^j (ω_i^j − ω̄_i^j)   B = diag(E I1, E I2)
    E_twist   = Σ_i  ½ k_t (τ_i − τ̄_i)² / l̄_i                          k_t = G J = G π r⁴/2

The ½ Σ_j averages the two edge frames (Bergou 2008 writes 1/(2 l_i) Σ_j with l_i = 2 l̄_i).

The Hessian is returned in LAPACK lower band storage `band[d, j] = H[j + d, j]`, shape (11, n_dofs).
`project=True` makes every element Hessian positive semi-definite (stretch: compressive term dropped;
bend/twist: negative eigenvalues clamped), used when the exact Hessian makes the system indefinite.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import warp as wp

from ...kernels import launch_split, warp_device_of, warp_view
from .kernels import bend_twist as bend_twist_kernels
from .kernels import stretch as stretch_kernels
from .frames import normalize_rows, row_lengths
from .jet import cross3
from .model import BAND_WIDTH, DerModel, ElementSubset, index_view, strands_view
from .strains import LOCAL_VARIABLES, bend_strain_jets, bend_strain_values, twist_strain_jet


@dataclass
class Configuration:
    """Positions (N, 3) [m], twist angles (E,) [rad], reference directors u (E, 3) transported to the
    current tangents, and the unwrapped reference twist (B,) [rad]."""
    positions: Any
    theta: Any
    reference_u: Any
    reference_twist: Any


def _local_to_element(xp, dtype):
    """(8, 11) map from element DOFs [x_{i-1}, θ^{i-1}, x_i, θ^i, x_{i+1}] to local [e0, e1, θ0, θ1]."""
    a = xp.zeros((LOCAL_VARIABLES, 11), dtype=dtype)
    eye = xp.eye(3, dtype=dtype)
    a[0:3, 0:3] = -eye
    a[0:3, 4:7] = eye
    a[3:6, 4:7] = -eye
    a[3:6, 8:11] = eye
    a[6, 3] = 1.0
    a[7, 7] = 1.0
    return a


def _bend_inputs(xp, model: DerModel, config: Configuration, bends=None):
    """Edge vectors, reference frames (u, v, θ) of both edges and rest-length products of the bend/twist
    elements `bends` (index array; None: all)."""
    x = config.positions
    bend_edges = model.bend_edges if bends is None else model.bend_edges[bends]
    prev_edge, next_edge = bend_edges[:, 0], bend_edges[:, 1]
    vertex = model.bend_vertex if bends is None else model.bend_vertex[bends]
    e0 = x[vertex] - x[vertex - 1]
    e1 = x[vertex + 1] - x[vertex]
    t0 = normalize_rows(xp, e0)
    t1 = normalize_rows(xp, e1)
    u0, u1 = config.reference_u[prev_edge], config.reference_u[next_edge]
    frame0 = (u0, cross3(xp, t0, u0), config.theta[prev_edge])
    frame1 = (u1, cross3(xp, t1, u1), config.theta[next_edge])
    rest_product = model.rest_edge_length[prev_edge] * model.rest_edge_length[next_edge]
    return e0, e1, frame0, frame1, rest_product


def strand_elastic_energy(xp, model: DerModel, config: Configuration):
    """Elastic energy of every strand (S,) [J]."""
    x = config.positions
    edges = x[model.edge_vertex + 1] - x[model.edge_vertex]
    strain = row_lengths(xp, edges) / model.rest_edge_length - 1.0
    stretch = 0.5 * model.stretch_stiffness * strain * strain * model.rest_edge_length
    energy = xp.bincount(model.edge_strand, weights=stretch, minlength=model.n_strands)
    if model.bend_vertex.shape[0]:
        e0, e1, frame0, frame1, rest_product = _bend_inputs(xp, model, config)
        omega = bend_strain_values(xp, e0, e1, rest_product, frame0, frame1)
        bend = xp.sum(model.bend_weight * (omega - model.rest_bend) ** 2, axis=(1, 2))
        tau = config.theta[model.bend_edges[:, 1]] - config.theta[model.bend_edges[:, 0]] + config.reference_twist
        twist = 0.5 * model.twist_weight * (tau - model.rest_twist) ** 2
        energy = energy + xp.bincount(model.vertex_strand[model.bend_vertex], weights=bend + twist,
                                      minlength=model.n_strands)
    return energy


def strand_energy_and_gradient(xp, model: DerModel, config: Configuration, subset: ElementSubset | None = None):
    """Elastic energy of every strand (S,) [J] and the gradient (n_dofs,) [N or N·m] of the total, from one
    pass over the elements (two Warp launches, a thread per strand: stretching, bend and twist).

    subset: only the elements of some strands (model.element_subset); the other strands' energies and
    gradient entries are then 0 (config must still be full size)."""
    x = config.positions
    grad = xp.zeros(model.n_dofs, dtype=x.dtype)
    energy = add_stretch(xp, model, x, grad, None, False, subset)
    if model.bend_vertex.shape[0]:
        add_bend_twist(xp, model, config, grad, energy, subset)
    return energy, grad


def add_bend_twist(xp, model: DerModel, config: Configuration, grad, energy, subset: ElementSubset | None = None,
                   band=None):
    """Add the bend and twist energy of every strand (or subset.strands) to energy (S,) [J], its gradient
    into grad (n_dofs,) and, if band (11, n_dofs) is given, its Gauss–Newton Hessian into that lower band:
    one Warp launch, a thread per strand (kernels.bend_twist.bend_twist_terms; the closed form of the
    gradient)."""
    def floats(array, width=None):
        array = xp.ascontiguousarray(array, dtype=xp.float64)
        return warp_view(array.reshape(-1, width) if width == 4 else array, wp.float64 if width != 3 else wp.vec3d)

    strands = strands_view(model, subset)
    launch_split(bend_twist_kernels.bend_twist_terms, strands.shape[0], warp_device_of(config.positions), [], [
        strands, index_view(model, "strand_offsets"), index_view(model, "bend_vertex"),
        index_view(model, "bend_edges"), index_view(model, "bend_dof"), floats(config.positions, 3), floats(config.theta), floats(config.reference_u, 3),
        floats(config.reference_twist), floats(model.rest_edge_length), floats(model.bend_weight, 4),
        floats(model.rest_bend, 4), floats(model.twist_weight), floats(model.rest_twist),
        warp_view(energy, wp.float64), warp_view(grad, wp.float64), int(band is not None),
        warp_view(xp.zeros((BAND_WIDTH, 0), dtype=xp.float64) if band is None else band, wp.float64)])


def elastic_energy(xp, model: DerModel, config: Configuration):
    """Total elastic energy [J] (float)."""
    return float(xp.sum(strand_elastic_energy(xp, model, config)))


def add_stretch(xp, model: DerModel, positions, grad, band, project: bool, subset: ElementSubset | None = None):
    """Add the stretching energy's gradient into grad (n_dofs,) and, if band is not None, its Hessian into the
    lower band (11, n_dofs), for every strand (or subset.strands); returns the energy of every strand (S,) [J]
    (0 outside the subset). One Warp launch, a thread per strand (kernels.stretch.stretch_terms)."""
    strands = strands_view(model, subset)
    energy = xp.zeros(model.n_strands, dtype=positions.dtype)
    count = strands.shape[0]
    device = warp_device_of(positions)
    no_band = band is None
    if no_band:
        band = xp.zeros((BAND_WIDTH, 0), dtype=positions.dtype)
    launch_split(stretch_kernels.stretch_terms, count, device, [], [
        strands, index_view(model, "strand_offsets"), index_view(model, "vertex_dof"),
        warp_view(xp.ascontiguousarray(positions, dtype=xp.float64), wp.vec3d),
        warp_view(xp.ascontiguousarray(model.stretch_stiffness, dtype=xp.float64), wp.float64),
        warp_view(xp.ascontiguousarray(model.rest_edge_length, dtype=xp.float64), wp.float64),
        int(not no_band), int(project), warp_view(energy, wp.float64), warp_view(grad, wp.float64),
        warp_view(band, wp.float64)])
    return energy


def _bend_twist_blocks(xp, model: DerModel, config: Configuration, project: bool, bends=None):
    """Gradient (B, 11) and exact Hessian (B, 11, 11) of bend + twist per interior vertex (jets); bends: only those
    elements (index array; None: all). The gradient alone, and the gradient with the Gauss–Newton Hessian, are
    add_bend_twist's kernel."""

    def pick(array):
        return array if bends is None else array[bends]

    e0, e1, frame0, frame1, rest_product = _bend_inputs(xp, model, config, bends)
    weights = pick(model.bend_weight).reshape(-1, 4)
    rest = pick(model.rest_bend).reshape(-1, 4)
    twist_weight = pick(model.twist_weight)
    rest_twist = pick(model.rest_twist)
    reference_twist = pick(config.reference_twist)
    theta0, theta1 = frame0[2], frame1[2]
    a = _local_to_element(xp, e0.dtype)
    omega_jets = bend_strain_jets(xp, e0, e1, rest_product, frame0, frame1, True)
    tau = twist_strain_jet(xp, e0, e1, frame0[0], frame1[0], reference_twist, theta0, theta1, True)
    residuals = [(2.0 * weights[:, c], omega_jets[c].value - rest[:, c], omega_jets[c]) for c in range(4)]
    residuals.append((twist_weight, tau.value - rest_twist, tau))
    grad8 = sum((w * r)[:, None] * j.grad for w, r, j in residuals)
    hess8 = sum(w[:, None, None] * (j.grad[:, :, None] * j.grad[:, None, :] + r[:, None, None] * j.hess)
                for w, r, j in residuals)
    hess = xp.swapaxes(a, 0, 1)[None] @ hess8 @ a[None]
    if project:
        hess = project_psd(xp, hess)
    return grad8 @ a, hess


def project_psd(xp, blocks):
    """Clamp negative eigenvalues of symmetric blocks (n, k, k) to zero."""
    values, vectors = xp.linalg.eigh(0.5 * (blocks + xp.swapaxes(blocks, 1, 2)))
    values = xp.maximum(values, 0.0)
    return (vectors * values[:, None, :]) @ xp.swapaxes(vectors, 1, 2)


def _scatter_gradient(xp, n_dofs, start, blocks, out):
    width = blocks.shape[1]
    index = start[:, None] + xp.arange(width)
    out += xp.bincount(index.ravel(), weights=blocks.ravel(), minlength=n_dofs)


def scatter_band(xp, n_dofs, start, blocks, band):
    """Add element Hessians (n, w, w) on consecutive DOFs start..start+w-1 into lower band storage."""
    width = blocks.shape[1]
    rows, cols = xp.tril_indices(width)
    flat = start[:, None] + ((rows - cols) * n_dofs + cols)[None, :]           # one pass over the (n, w(w+1)/2) slots
    # the lower triangles as one take along the flattened blocks (a (rows, cols) fancy index costs 3× more)
    lower = xp.take(blocks.reshape(blocks.shape[0], width * width), rows * width + cols, axis=1)
    band += xp.bincount(flat.ravel(), weights=lower.ravel(),
                        minlength=BAND_WIDTH * n_dofs).reshape(BAND_WIDTH, n_dofs)


ELASTIC_PARTS = ("stretch", "bend_twist")


def elastic_gradient_hessian(xp, model: DerModel, config: Configuration, with_hessian: bool = True,
                             project: bool = False, gauss_newton: bool = False, subset: ElementSubset | None = None,
                             parts=ELASTIC_PARTS):
    """Gradient (n_dofs,) [N or N·m] and, if asked, lower band Hessian (11, n_dofs) of the elastic energy.

    gauss_newton: the Hessian keeps only Σ w ∇s ∇sᵀ of every strain s (PSD, about the cost of a gradient);
    a quasi-Newton matrix, not the exact Hessian.  subset: only the elements of some strands
    (model.element_subset); the other strands' entries are then 0.  parts: the energies included, of
    ELASTIC_PARTS (the stretching of the edges; bending and twisting at the interior vertices)."""
    unknown = set(parts) - set(ELASTIC_PARTS)
    if unknown:
        raise ValueError(f"unknown elastic energy part(s) {sorted(unknown)}; choose from {ELASTIC_PARTS}")
    n = model.n_dofs
    bends = None if subset is None else subset.bends
    grad = xp.zeros(n, dtype=config.positions.dtype)
    band = xp.zeros((BAND_WIDTH, n), dtype=config.positions.dtype) if with_hessian else None
    if "stretch" in parts:
        add_stretch(xp, model, config.positions, grad, band, project or gauss_newton, subset)
    bend_start = model.bend_dof if bends is None else model.bend_dof[bends]
    if "bend_twist" in parts and bend_start.shape[0] and not with_hessian:
        # the closed-form gradient: the line search's kernel (its energies are not needed here)
        add_bend_twist(xp, model, config, grad, xp.zeros(model.n_strands, dtype=grad.dtype), subset)
    elif "bend_twist" in parts and bend_start.shape[0] and gauss_newton:
        # gradient and Gauss–Newton Hessian straight into the band (kernels.bend_twist)
        add_bend_twist(xp, model, config, grad, xp.zeros(model.n_strands, dtype=grad.dtype), subset, band)
    elif "bend_twist" in parts and bend_start.shape[0]:
        b_grad, b_hess = _bend_twist_blocks(xp, model, config, project, bends)
        _scatter_gradient(xp, n, bend_start, b_grad, grad)
        scatter_band(xp, n, bend_start, b_hess, band)
    return grad, band


def band_to_dense(xp, band):
    """Dense symmetric matrix from lower band storage (tests and debugging only)."""
    n = band.shape[1]
    dense = xp.zeros((n, n), dtype=band.dtype)
    for d in range(band.shape[0]):  # loop over the 11 diagonals, not over entries
        idx = xp.arange(n - d)
        dense[idx + d, idx] = band[d, : n - d]
        dense[idx, idx + d] = band[d, : n - d]
    return dense

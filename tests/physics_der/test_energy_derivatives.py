"""Analytic gradients and Hessians of every DER energy against finite differences (float64)."""

import dataclasses

import numpy as np
import pytest

from solver_server.solvers.der.energy import band_to_dense, elastic_energy, elastic_gradient_hessian
from solver_server.solvers.der.model import DerMaterial, build_model
from solver_server.solvers.der.state import rest_state, transported_configuration


def _curly_strands():
    s = np.linspace(0.0, 1.0, 6)
    helix = np.stack((0.3 * np.cos(4 * s), 0.3 * np.sin(4 * s), -0.8 * s), axis=1)
    wavy = np.stack((np.linspace(0, 0.6, 5), 0.1 * np.sin(np.linspace(0, 3, 5)), np.zeros(5)), axis=1) + [1.0, 0, 0]
    return np.concatenate((helix, wavy)), np.array([0, 6, 11])


def _isolated(model, keep):
    """The model with every energy but `keep` switched off (stretch_stiffness, bend_weight, twist_weight)."""
    zero = {name: np.zeros_like(getattr(model, name))
            for name in ("stretch_stiffness", "bend_weight", "twist_weight") if name != keep}
    return dataclasses.replace(model, **zero)


@pytest.fixture(scope="module")
def deformed():
    points, offsets = _curly_strands()
    model = build_model(np, points, offsets, DerMaterial(radius=0.05, young_modulus=1e3, shear_modulus=4e2,
                                                          density=1.0, bend_ratio=2.5))
    rng = np.random.default_rng(7)
    base = rest_state(np, model)
    positions = model.rest_positions + 0.03 * rng.standard_normal(model.rest_positions.shape)
    theta = 0.4 * rng.standard_normal(model.n_edges)
    config = transported_configuration(np, model, base, positions, theta)
    # make the deformed configuration the transport base (time-parallel frames updated to it)
    base.positions, base.theta = positions, theta
    base.tangents = (positions[model.edge_vertex + 1] - positions[model.edge_vertex])
    base.tangents /= np.linalg.norm(base.tangents, axis=1, keepdims=True)
    base.reference_u, base.reference_twist = config.reference_u, config.reference_twist
    return model, base, model.pack(positions, theta)


def _energy_at(model, base, q):
    config = transported_configuration(np, model, base, model.gather_positions(q), model.gather_theta(q))
    return elastic_energy(np, model, config)


@pytest.mark.parametrize("energy", ["stretch_stiffness", "bend_weight", "twist_weight"])
def test_gradient_matches_finite_differences(deformed, energy):
    model, base, q0 = deformed
    model = _isolated(model, energy)
    config = transported_configuration(np, model, base, model.gather_positions(q0), model.gather_theta(q0))
    grad, _ = elastic_gradient_hessian(np, model, config, with_hessian=False)
    eps = 1e-6
    fd = np.array([(_energy_at(model, base, q0 + eps * e) - _energy_at(model, base, q0 - eps * e)) / (2 * eps)
                   for e in np.eye(model.n_dofs)])
    assert np.linalg.norm(grad) > 1e-3
    assert np.linalg.norm(fd - grad) / np.linalg.norm(grad) < 1e-5


@pytest.mark.parametrize("energy", ["stretch_stiffness", "bend_weight", "twist_weight"])
def test_hessian_matches_finite_differences(deformed, energy):
    model, base, q0 = deformed
    model = _isolated(model, energy)
    config = transported_configuration(np, model, base, model.gather_positions(q0), model.gather_theta(q0))
    _, band = elastic_gradient_hessian(np, model, config, with_hessian=True)
    hess = band_to_dense(np, band)
    n = model.n_dofs
    eps = 1e-4
    eye = np.eye(n)
    fd = np.zeros((n, n))
    for i in range(n):  # test-only loop: second differences of the energy, entry by entry
        for j in range(i, n):
            di, dj = eps * eye[i], eps * eye[j]
            value = (_energy_at(model, base, q0 + di + dj) - _energy_at(model, base, q0 + di - dj)
                     - _energy_at(model, base, q0 - di + dj) + _energy_at(model, base, q0 - di - dj)) / (4 * eps * eps)
            fd[i, j] = fd[j, i] = value
    assert np.linalg.norm(fd - hess) / np.linalg.norm(hess) < 1e-5


def test_closed_form_gradient_equals_the_jet_gradient(deformed):
    model, base, q0 = deformed
    config = transported_configuration(np, model, base, model.gather_positions(q0), model.gather_theta(q0))
    closed_form, _ = elastic_gradient_hessian(np, model, config, with_hessian=False)
    from_jets, _ = elastic_gradient_hessian(np, model, config, with_hessian=True)
    assert np.allclose(closed_form, from_jets, rtol=1e-10, atol=1e-12 * np.abs(from_jets).max())


@pytest.mark.parametrize("gauss_newton", [False, True])
def test_elastic_parts_are_the_named_energies(deformed, gauss_newton):
    """elastic_gradient_hessian(parts=...): the stretch part is the whole of a model with only stretching,
    the bend–twist part the whole of one without it (exact and Gauss–Newton matrices); an unknown part is
    an error."""
    model, base, q0 = deformed
    config = transported_configuration(np, model, base, model.gather_positions(q0), model.gather_theta(q0))
    no_stretch = dataclasses.replace(model, stretch_stiffness=np.zeros_like(model.stretch_stiffness))
    for part, alone in (("stretch", _isolated(model, "stretch_stiffness")), ("bend_twist", no_stretch)):
        piece = elastic_gradient_hessian(np, model, config, gauss_newton=gauss_newton, parts=(part,))
        expected = elastic_gradient_hessian(np, alone, config, gauss_newton=gauss_newton)
        for got, want in zip(piece, expected):
            assert np.abs(want).max() > 0.0
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    with pytest.raises(ValueError, match="unknown elastic energy part"):
        elastic_gradient_hessian(np, model, config, parts=("shear",))


@pytest.mark.parametrize("subset", [False, True])
def test_line_search_energy_and_gradient_kernels_equal_the_xp_terms(deformed, subset):
    """strand_energy_and_gradient (Warp kernels, a thread per strand: the line search's objective) gives the
    per-strand energies of strand_elastic_energy and the gradient of the jets (elastic_gradient_hessian with the
    exact Hessian), for all strands and for a subset (others zero); and its own energy's finite differences."""
    from solver_server.solvers.der.energy import strand_elastic_energy, strand_energy_and_gradient
    from solver_server.solvers.der.model import element_subset

    model, base, q0 = deformed
    config = transported_configuration(np, model, base, model.gather_positions(q0), model.gather_theta(q0))
    chosen = np.array([False, True]) if subset else np.ones(model.n_strands, bool)
    part = element_subset(np, model, chosen) if subset else None
    energy, grad = strand_energy_and_gradient(np, model, config, part)
    expected_grad, _ = elastic_gradient_hessian(np, model, config, with_hessian=True, subset=part)
    expected_energy = np.where(chosen, strand_elastic_energy(np, model, config), 0.0)
    assert np.abs(expected_grad).max() > 1e-3 and np.all(expected_energy[chosen] > 0.0)
    np.testing.assert_allclose(energy, expected_energy, rtol=1e-12)
    np.testing.assert_allclose(grad, expected_grad, rtol=0, atol=1e-11 * np.abs(expected_grad).max())

    def total(q):
        moved = transported_configuration(np, model, base, model.gather_positions(q), model.gather_theta(q))
        return float(strand_energy_and_gradient(np, model, moved, part)[0].sum())

    eps = 1e-6
    fd = np.array([(total(q0 + eps * e) - total(q0 - eps * e)) / (2 * eps) for e in np.eye(model.n_dofs)])
    assert np.linalg.norm(fd - grad) / np.linalg.norm(grad) < 1e-5


def _gauss_newton_blocks(model, config, bends):
    """Bend + twist gradient (B, 11) and Gauss–Newton Hessian Σ w ∇s ∇sᵀ (B, 11, 11) of the elements ``bends``
    (None: all) from the closed-form strain gradients, as arrays (the form the kernel replaced)."""
    from solver_server.solvers.der.energy import _bend_inputs, _local_to_element
    from solver_server.solvers.der.strains import bend_twist_gradients

    def pick(array):
        return array if bends is None else array[bends]

    e0, e1, frame0, frame1, rest_product = _bend_inputs(np, model, config, bends)
    weights, rest = pick(model.bend_weight).reshape(-1, 4), pick(model.rest_bend).reshape(-1, 4)
    twist_weight, rest_twist = pick(model.twist_weight), pick(model.rest_twist)
    tau = frame1[2] - frame0[2] + pick(config.reference_twist)
    a = _local_to_element(np, e0.dtype)
    omega, omega_grad, twist_grad = bend_twist_gradients(np, e0, e1, rest_product, frame0, frame1)
    grad8 = (np.einsum("nr,nrk->nk", 2.0 * weights * (omega - rest), omega_grad)
             + (twist_weight * (tau - rest_twist))[:, None] * twist_grad)
    strain_grad = np.concatenate((omega_grad, twist_grad[:, None, :]), axis=1) @ a          # (B, 5, 11)
    strain_weight = np.concatenate((2.0 * weights, twist_weight[:, None]), axis=1)
    return grad8 @ a, np.swapaxes(strain_grad * strain_weight[:, :, None], 1, 2) @ strain_grad


@pytest.mark.parametrize("strands", [None, [False, True]], ids=["all", "subset"])
def test_gauss_newton_band_of_the_kernel_equals_its_array_form(deformed, strands):
    """The quasi-Newton matrix's bend/twist part, written into the band by bend_twist_kernels (one thread per
    strand), equals Σ w ∇s ∇sᵀ assembled from the closed-form strain gradients (strains.bend_twist_gradients)
    with arrays, and the gradient beside it equals theirs, to rounding; it is symmetric positive semi-definite."""
    from solver_server.solvers.der.energy import _scatter_gradient, scatter_band
    from solver_server.solvers.der.model import BAND_WIDTH, element_subset

    model, base, q0 = deformed
    config = transported_configuration(np, model, base, model.gather_positions(q0), model.gather_theta(q0))
    subset = None if strands is None else element_subset(np, model, np.array(strands))
    grad, band = elastic_gradient_hessian(np, model, config, gauss_newton=True, subset=subset,
                                          parts=("bend_twist",))
    bends = None if subset is None else subset.bends
    start = model.bend_dof if bends is None else model.bend_dof[bends]
    blocks_grad, blocks_hess = _gauss_newton_blocks(model, config, bends)
    expected_grad = np.zeros(model.n_dofs)
    expected_band = np.zeros((BAND_WIDTH, model.n_dofs))
    _scatter_gradient(np, model.n_dofs, start, blocks_grad, expected_grad)
    scatter_band(np, model.n_dofs, start, blocks_hess, expected_band)
    assert np.abs(expected_band).max() > 1e-3
    np.testing.assert_allclose(band, expected_band, rtol=0.0, atol=1e-12 * np.abs(expected_band).max())
    np.testing.assert_allclose(grad, expected_grad, rtol=0.0, atol=1e-12 * np.abs(expected_grad).max())
    if subset is not None:   # the other strand's DOFs untouched
        assert np.all(band[:, :model.vertex_dof[model.strand_offsets[1]]] == 0.0)
    assert np.linalg.eigvalsh(band_to_dense(np, band)).min() > -1e-9 * np.abs(band).max()

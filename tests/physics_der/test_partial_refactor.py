"""Refactoring only the strands that still move: element-subset assembly and BandedCholesky.refactored."""

import numpy as np
import pytest

from solver_server.solvers.der.banded import BandedCholesky, strand_blocks_of_model
from solver_server.solvers.der.energy import elastic_gradient_hessian
from solver_server.solvers.der.model import DerMaterial, build_model, element_subset
from solver_server.solvers.der.state import rest_state, transported_configuration

from .helpers import dof_strand, straight

MATERIAL = DerMaterial(radius=5e-5, young_modulus=3e9, shear_modulus=1e9, density=1300.0, damping=0.5)


def _bent_strands(seed=1):
    """Six strands of uneven length, randomly bent and twisted: (model, configuration)."""
    lengths = [9, 14, 6, 11, 9, 7]
    points = np.vstack([straight(n, 0.01 * n, origin=(0.0, 0.02 * k, 0.0)) for k, n in enumerate(lengths)])
    model = build_model(np, points, np.concatenate(([0], np.cumsum(lengths))), MATERIAL)
    generator = np.random.default_rng(seed)
    positions = points + generator.normal(scale=2e-3, size=points.shape)
    config = transported_configuration(np, model, rest_state(np, model), positions,
                                       generator.normal(scale=0.2, size=model.n_edges))
    return model, config


@pytest.mark.parametrize("gauss_newton", [True, False])
def test_subset_assembly_gives_the_selected_strands_blocks_exactly(gauss_newton):
    model, config = _bent_strands()
    selected = np.array([False, True, False, True, True, False])
    _, full = elastic_gradient_hessian(np, model, config, gauss_newton=gauss_newton)
    _, part = elastic_gradient_hessian(np, model, config, gauss_newton=gauss_newton,
                                       subset=element_subset(np, model, selected))
    columns = selected[dof_strand(model)]
    np.testing.assert_array_equal(part[:, columns], full[:, columns])
    assert not part[:, ~columns].any()


def test_refactored_blocks_match_a_full_factorization_and_others_are_kept():
    model, config = _bent_strands()
    blocks = strand_blocks_of_model(np, lambda array: array, model)
    h = 1.0 / 120.0

    def system(configuration):
        _, band = elastic_gradient_hessian(np, model, configuration, gauss_newton=True)
        band *= h * h
        band[0] += model.mass
        return band

    old = BandedCholesky(np, system(config), blocks)
    _, moved = _bent_strands(seed=7)                       # every strand has moved since
    selected = np.array([True, False, False, True, False, True])
    partial = old.refactored(system(moved), selected)
    fresh = BandedCholesky(np, system(moved), blocks)
    columns = selected[dof_strand(model)]
    np.testing.assert_allclose(partial.lower_factor[:, columns], fresh.lower_factor[:, columns], rtol=1e-12)
    np.testing.assert_array_equal(partial.lower_factor[:, ~columns], old.lower_factor[:, ~columns])
    assert not np.array_equal(old.lower_factor[:, columns], partial.lower_factor[:, columns])
    # the old factor is not changed (the contact handler may still hold it)
    np.testing.assert_array_equal(old.lower_factor, BandedCholesky(np, system(config), blocks).lower_factor)
    rhs = np.random.default_rng(3).normal(size=model.n_dofs)
    np.testing.assert_allclose(partial.solve(rhs)[columns], fresh.solve(rhs)[columns], rtol=1e-10)


def test_integrator_refactors_only_moving_strands_and_reaches_the_full_newton_solution():
    """Five strands hang at rest, one swings: later refreshes of the quasi-Newton matrix refactor the swinging
    strand only, and the motion is that of full Newton (every iteration a full factorization)."""
    from solver_server.solvers.der.settings import NewtonSettings

    from .helpers import GRAVITY, make, run

    hanging = [straight(11, 0.1, direction=(0.0, 0.0, -1.0), origin=(0.02 * k, 0.0, 0.0)) for k in range(5)]
    swinging = straight(11, 0.1, direction=(1.0, 0.0, 0.0), origin=(0.0, 0.05, 0.0))
    points = np.vstack(hanging + [swinging])
    offsets = np.arange(7) * 11
    results = {}
    for quasi_newton in (True, False):
        settings = NewtonSettings(tolerance=1e-10, quasi_newton=quasi_newton, quasi_newton_matrix="gauss_newton",
                                  refresh_interval=1)
        _, solver, state = make(points, offsets, MATERIAL, settings)
        results[quasi_newton] = run(solver, state, 6, 1.0 / 120.0, gravity=GRAVITY)
    (quasi_state, quasi_stats), (newton_state, _) = results[True], results[False]
    assert sum(stats["partial_factorizations"] for stats in quasi_stats) > 0
    np.testing.assert_allclose(quasi_state.positions, newton_state.positions, atol=1e-9)
    assert quasi_state.positions[-1, 2] < -0.005                 # the free strand has swung down

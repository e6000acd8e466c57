"""The reference frames' time-parallel transport on a Warp kernel (kernels.frame.transport_frames, through
state.transported_configuration) equals the xp formulas of frames.py (parallel transport, orthonormalize,
reference twist unwrapped to the nearest turn), for all strands and for a subset (the rest copied from fill),
including a twist unwrapped across ±π."""

import numpy as np
import pytest

from solver_server.solvers.der.frames import (normalize_rows, reference_twist_value, shortest_turn,
                                              time_parallel_reference)
from solver_server.solvers.der.model import DerMaterial, build_model, element_subset
from solver_server.solvers.der.state import rest_state, transported_configuration


def _model():
    s = np.linspace(0.0, 1.0, 7)
    helix = np.stack((0.2 * np.cos(5 * s), 0.2 * np.sin(5 * s), -0.6 * s), axis=1)
    line = np.stack((np.linspace(0, 0.5, 4), np.zeros(4), np.zeros(4)), axis=1) + [1.0, 0.0, 0.0]
    wavy = np.stack((np.linspace(0, 0.6, 5), 0.1 * np.sin(np.linspace(0, 3, 5)), np.zeros(5)), axis=1) + [0, 1.0, 0]
    points = np.concatenate((helix, line, wavy))
    return build_model(np, points, np.array([0, 7, 11, 16]), DerMaterial(radius=0.01, young_modulus=1e6,
                                                                          shear_modulus=4e5, density=1000.0))


def _expected(model, base, positions):
    edges = positions[model.edge_vertex + 1] - positions[model.edge_vertex]
    tangents = normalize_rows(np, edges)
    u = time_parallel_reference(np, base.tangents, base.reference_u, tangents)
    previous, following = model.bend_edges[:, 0], model.bend_edges[:, 1]
    raw = reference_twist_value(np, tangents[previous], tangents[following], u[previous], u[following])
    return u, base.reference_twist + shortest_turn(np, raw - base.reference_twist)


@pytest.mark.parametrize("subset", [False, True])
def test_kernel_transport_equals_the_xp_formulas(subset):
    model = _model()
    base = rest_state(np, model)
    base.reference_twist = base.reference_twist + 2.0 * np.pi * (np.arange(base.reference_twist.shape[0]) % 3)
    positions = model.rest_positions + 0.05 * np.random.default_rng(3).standard_normal(model.rest_positions.shape)
    theta = np.zeros(model.n_edges)
    expected_u, expected_twist = _expected(model, base, positions)
    if subset:
        chosen = np.array([True, False, True])
        part = element_subset(np, model, chosen)
        fill = transported_configuration(np, model, base, model.rest_positions, theta)
        config = transported_configuration(np, model, base, positions, theta, part, fill)
        keep_edges = np.isin(np.arange(model.n_edges), part.edges)
        keep_bends = np.isin(np.arange(model.bend_vertex.shape[0]), part.bends)
        expected_u = np.where(keep_edges[:, None], expected_u, fill.reference_u)
        expected_twist = np.where(keep_bends, expected_twist, fill.reference_twist)
    else:
        config = transported_configuration(np, model, base, positions, theta)
    assert np.abs(expected_twist - base.reference_twist).max() > 1e-3
    assert np.abs(base.reference_twist).max() > np.pi                   # unwrapped turns are kept
    np.testing.assert_allclose(config.reference_u, expected_u, rtol=0, atol=1e-14)
    np.testing.assert_allclose(config.reference_twist, expected_twist, rtol=0, atol=1e-12)

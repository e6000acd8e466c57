"""Numerical building blocks of the DER solver against brute force."""

import numpy as np
import pytest
import scipy.linalg

from solver_server.collision.primitives import PRIMITIVES
from solver_server.solvers.der.banded import band_of_inverse
from solver_server.solvers.der.contact import fischer_burmeister_residual, project_to_cone
from solver_server.solvers.der.settings import ContactSettings
from solver_server.solvers.der.geometry import coplanarity_times, overlap_far_end, segment_closest_points
from solver_server.solvers.der.settings import NewtonSettings
from solver_server.solvers.der.model import DerMaterial

from .helpers import make, run, straight


def test_band_of_inverse_matches_the_dense_inverse():
    rng = np.random.default_rng(1)
    blocks, p = [7, 15, 12], 10
    n = sum(blocks)
    dense = np.zeros((n, n))
    start = 0
    for size in blocks:
        x = rng.standard_normal((size, size))
        block = x @ x.T + size * np.eye(size)
        rows, cols = np.indices((size, size))
        block[np.abs(rows - cols) > p] = 0.0
        dense[start:start + size, start:start + size] = block + 20 * np.eye(size)
        start += size
    band = np.stack([np.concatenate((np.diag(dense, -d), np.zeros(d))) for d in range(p + 1)])
    inverse_band = band_of_inverse(np, scipy.linalg.cholesky_banded(band, lower=True), np.cumsum(blocks))
    inverse = np.linalg.inv(dense)
    expected = np.stack([np.concatenate((np.diag(inverse, -d), np.zeros(d))) for d in range(p + 1)])
    assert np.abs(inverse_band - expected).max() < 1e-12 * np.abs(expected).max()


def test_coplanarity_times_are_roots_and_none_is_missed():
    rng = np.random.default_rng(0)
    x = [rng.standard_normal((300, 3)) for _ in range(4)]
    v = [rng.standard_normal((300, 3)) for _ in range(4)]
    roots = coplanarity_times(np, *x, *v)

    def triple(t):
        """Triple product for every row at times t (rows, samples)."""
        a = [xk[:, None, :] + t[..., None] * vk[:, None, :] for xk, vk in zip(x, v)]
        return np.einsum("nsc,nsc->ns", np.cross(a[1] - a[0], a[2] - a[0]), a[3] - a[0])

    found = ~np.isnan(roots)
    assert np.all(np.abs(triple(np.where(found, roots, 0.0))[found]) < 1e-8)
    values = triple(np.broadcast_to(np.linspace(0.0, 1.0, 2001), (300, 2001)))
    sign_changes = np.sum(np.sign(values[:, 1:]) != np.sign(values[:, :-1]), axis=1)
    distinct = [len(np.unique(np.round(row[~np.isnan(row)], 6))) for row in roots]
    assert np.all(np.array(distinct) >= sign_changes)


def test_segment_closest_points_against_sampling():
    rng = np.random.default_rng(2)
    p1, q1, p2, q2 = (rng.standard_normal((100, 3)) for _ in range(4))
    s, t, distance = segment_closest_points(np, p1, q1, p2, q2)
    grid = np.linspace(0.0, 1.0, 401)
    for i in range(100):
        a = p1[i] + grid[:, None] * (q1[i] - p1[i])
        b = p2[i] + grid[:, None] * (q2[i] - p2[i])
        sampled = np.linalg.norm(a[:, None] - b[None], axis=2).min()
        assert sampled - 1e-2 <= distance[i] <= sampled + 1e-12
        direct = np.linalg.norm(p1[i] + s[i] * (q1[i] - p1[i]) - p2[i] - t[i] * (q2[i] - p2[i]))
        assert direct == pytest.approx(distance[i])


def test_far_end_of_the_stretch_where_parallel_segments_touch():
    """Segment 2 shifted along segment 1 (both orientations) and one inside the other: the far end of their
    common stretch from the closest point that segment_closest_points picks, and its projection on 2."""
    p1, q1 = np.zeros((4, 3)), np.tile([1.0, 0.0, 0.0], (4, 1))
    offset = np.array([0.0, 2e-4, 0.0])
    p2 = np.array([[0.3, 0, 0], [1.3, 0, 0], [0.2, 0, 0], [-0.5, 0, 0]]) + offset
    q2 = np.array([[1.3, 0, 0], [0.3, 0, 0], [0.6, 0, 0], [0.5, 0, 0]]) + offset
    s, _, _ = segment_closest_points(np, p1, q1, p2, q2)
    np.testing.assert_allclose(s, [0.3, 0.3, 0.2, 0.0], atol=1e-12)       # the near end of each stretch
    s_far, t_far = overlap_far_end(np, p1, q1, p2, q2, s)
    np.testing.assert_allclose(s_far, [1.0, 1.0, 0.6, 0.5], atol=1e-12)
    np.testing.assert_allclose(t_far, [0.7, 0.3, 1.0, 1.0], atol=1e-12)
    point = p1 + s_far[:, None] * (q1 - p1)
    np.testing.assert_allclose(p2 + t_far[:, None] * (q2 - p2), point + offset, atol=1e-12)


def test_cone_projection_and_fischer_burmeister_of_exact_coulomb_pairs():
    normal = np.tile([0.0, 0.0, 1.0], (4, 1))
    mu = np.full(4, 0.5)
    impulse = np.array([[0.0, 0.0, -1.0], [2.0, 0.0, 1.0], [0.1, 0.0, 1.0], [0.0, 0.0, 0.0]])
    projected = project_to_cone(np, impulse, normal, mu)
    assert np.allclose(projected, [[0, 0, 0], [0.5, 0, 1.0], [0.1, 0, 1.0], [0, 0, 0]])
    # (impulse, velocity) pairs obeying Coulomb's law: separating, sticking, sliding
    impulses = np.array([[0.0, 0.0, 0.0], [0.2, 0.0, 1.0], [-0.5, 0.0, 1.0]])
    velocities = np.array([[0.3, 0.0, 0.4], [0.0, 0.0, 0.0], [2.0, 0.0, 0.0]])
    residual = fischer_burmeister_residual(np, impulses, velocities, normal[:3], mu[:3])
    assert np.all(residual < 1e-12)
    violating = fischer_burmeister_residual(np, np.array([[0.0, 0.0, 1.0]]), np.array([[0.0, 0.0, 0.5]]),
                                            normal[:1], mu[:1])
    assert violating[0] > 0.1


@pytest.mark.parametrize("response", ["rigid_rod", "delassus"])
def test_strand_rests_on_a_plane_with_either_contact_response(response):
    radius = 1e-4
    ground = PRIMITIVES["plane"]({"normal": [0.0, 0.0, 1.0], "offset": 0.0}, np.eye(4))
    material = DerMaterial(radius=radius, young_modulus=1e8, shear_modulus=4e7, density=1300.0, damping=5.0)
    model, solver, state = make(straight(8, 0.04, origin=(0.0, 0.0, 1.5 * radius)), [0, 8], material,
                                NewtonSettings(max_iterations=50, tolerance=1e-6),
                                ContactSettings(self_collision=False, response=response), colliders=[ground],
                                fixed_vertices=[], fixed_edges=[])
    state, stats = run(solver, state, steps=15, dt=4e-3)
    assert stats[-1]["collider_contacts"] == 8
    assert stats[-1]["fischer_burmeister"] < 1e-3
    assert np.all(state.positions[:, 2] >= 0.9 * radius)
    assert np.abs(state.velocities).max() < 1e-3

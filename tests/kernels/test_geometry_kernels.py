"""Shared Warp device functions against independent references: closest points (the vectorized xp
reference of collision.mesh), vertex–triangle and edge–edge CCD times against analytic crossings."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from solver_server.collision.mesh import closest_points_on_triangles
from solver_server.kernels import geometry, warp_view
from solver_server.solvers.der.geometry import segment_closest_points


@wp.kernel
def _segment_parameters(p1: wp.array(dtype=wp.vec3d), q1: wp.array(dtype=wp.vec3d), p2: wp.array(dtype=wp.vec3d),
                        q2: wp.array(dtype=wp.vec3d), out: wp.array(dtype=wp.vec2d)):
    i = wp.tid()
    out[i] = geometry.segment_closest_parameters(p1[i], q1[i], p2[i], q2[i])


@wp.kernel
def _edge_ccd(a0: wp.array(dtype=wp.vec3d), b0: wp.array(dtype=wp.vec3d), c0: wp.array(dtype=wp.vec3d),
              d0: wp.array(dtype=wp.vec3d), a1: wp.array(dtype=wp.vec3d), b1: wp.array(dtype=wp.vec3d),
              c1: wp.array(dtype=wp.vec3d), d1: wp.array(dtype=wp.vec3d), times: wp.array(dtype=wp.float64)):
    i = wp.tid()
    times[i] = geometry.edge_edge_ccd(a0[i], b0[i], c0[i], d0[i], a1[i], b1[i], c1[i], d1[i])


@wp.kernel
def _stays_off_plane(edge_edge: int, p0: wp.array(dtype=wp.vec3d), q0: wp.array(dtype=wp.vec3d),
                     r0: wp.array(dtype=wp.vec3d), s0: wp.array(dtype=wp.vec3d), p1: wp.array(dtype=wp.vec3d),
                     q1: wp.array(dtype=wp.vec3d), r1: wp.array(dtype=wp.vec3d), s1: wp.array(dtype=wp.vec3d),
                     off: wp.array(dtype=wp.int32)):
    i = wp.tid()
    off[i] = wp.where(geometry.stays_off_plane(edge_edge != 0, p0[i], q0[i], r0[i], s0[i], p1[i], q1[i], r1[i],
                                               s1[i]), 1, 0)


def _views(*arrays):
    return [warp_view(np.ascontiguousarray(a, np.float64), wp.vec3d) for a in arrays]


def test_closest_barycentric_matches_the_vectorized_reference():
    rng = np.random.default_rng(3)
    points, a, b, c = (rng.normal(size=(5000, 3)) for _ in range(4))
    c[:50] = a[:50] + 2.0 * (b[:50] - a[:50])                  # degenerate (collinear) triangles too
    out = np.zeros((5000, 3))
    wp.launch(geometry.closest_points_kernel, dim=5000, inputs=[*_views(points, a, b, c), warp_view(out, wp.vec3d)],
              device="cpu")
    reference_point, _ = closest_points_on_triangles(points, a, b, c)
    kernel_point = out[:, :1] * a + out[:, 1:2] * b + out[:, 2:] * c
    np.testing.assert_allclose(kernel_point, reference_point, atol=1e-9)


def test_segment_closest_parameters_give_the_reference_distance():
    rng = np.random.default_rng(4)
    p1, q1, p2, q2 = (rng.normal(size=(3000, 3)) for _ in range(4))
    result = wp.zeros(3000, dtype=wp.vec2d, device="cpu")
    wp.launch(_segment_parameters, dim=3000, inputs=[*_views(p1, q1, p2, q2), result], device="cpu")
    st = result.numpy()
    distance = np.linalg.norm(p1 + st[:, :1] * (q1 - p1) - p2 - st[:, 1:] * (q2 - p2), axis=1)
    _, _, reference = segment_closest_points(np, p1, q1, p2, q2)
    np.testing.assert_allclose(distance, reference, atol=1e-9)


@pytest.mark.parametrize("crossing_time", [0.05, 0.37, 0.5, 0.93])
def test_vertex_triangle_ccd_finds_the_crossing_of_a_moving_triangle(crossing_time):
    """Triangle z = 0 → z = 0.1 (rising), vertex from z0 falling at 1 m per step: they meet at the given time."""
    start = np.array([[-1.0, -1.0, 0.0], [1.0, -1.0, 0.0], [0.0, 1.0, 0.0]])
    end = start + [0.0, 0.0, 0.1]
    z0 = 1.1 * crossing_time                         # z_vertex(t) = z0 − t, z_triangle(t) = 0.1 t
    x0, x1 = np.array([[0.1, 0.0, z0]]), np.array([[0.1, 0.0, z0 - 1.0]])
    times = np.zeros(1)
    wp.launch(geometry.vertex_triangle_ccd_kernel, dim=1,
              inputs=[*_views(x0, x1, start, end), warp_view(times, wp.float64)], device="cpu")
    assert times[0] == pytest.approx(crossing_time, abs=1e-9)


def test_vertex_triangle_ccd_ignores_paths_beside_the_triangle_and_grazing_touches():
    start = np.array([[-1.0, -1.0, 0.0], [1.0, -1.0, 0.0], [0.0, 1.0, 0.0]])
    paths = np.array([[[3.0, 0.0, 1.0], [3.0, 0.0, -1.0]],      # beside it
                      [[0.0, 0.0, 1.0], [0.0, 0.0, 0.5]]])     # stops short of it
    times = np.zeros(2)
    wp.launch(geometry.vertex_triangle_ccd_kernel, dim=2,
              inputs=[*_views(paths[:, 0], paths[:, 1], np.tile(start, (2, 1)), np.tile(start, (2, 1))),
                      warp_view(times, wp.float64)], device="cpu")
    np.testing.assert_array_equal(times, [-1.0, -1.0])


def test_edge_edge_ccd_finds_when_one_edge_passes_through_the_other():
    """Edge along x at z = 0.2 − t·0.4 falls through a fixed edge along y at z = 0: they meet at t = 0.5;
    moved 3 m aside along x, its line passes the other's beyond its end: no crossing."""
    a0, b0 = np.array([[-1.0, 0.0, 0.2]]), np.array([[1.0, 0.0, 0.2]])
    a1, b1 = a0 - [0.0, 0.0, 0.4], b0 - [0.0, 0.0, 0.4]
    c, d = np.array([[0.0, -1.0, 0.0]]), np.array([[0.0, 1.0, 0.0]])
    times = np.zeros(2)
    shift = np.array([[3.0, 0.0, 0.0]])
    wp.launch(_edge_ccd, dim=2, inputs=[*_views(np.concatenate([a0, a0 + shift]), np.concatenate([b0, b0 + shift]),
                                                np.concatenate([c, c]), np.concatenate([d, d]),
                                                np.concatenate([a1, a1 + shift]), np.concatenate([b1, b1 + shift]),
                                                np.concatenate([c, c]), np.concatenate([d, d])),
                                        warp_view(times, wp.float64)], device="cpu")
    assert times[0] == pytest.approx(0.5, abs=1e-9)
    assert times[1] == -1.0


def test_segment_crosses_triangle_matches_the_numpy_reference():
    from tests.physics.contact_metrics import _segment_hits_triangle

    rng = np.random.default_rng(11)
    p, q, a, b, c = (rng.normal(size=(4000, 3)) for _ in range(5))
    crosses = np.zeros(4000, np.int32)
    corners = np.ascontiguousarray(np.stack([a, b, c], axis=1).reshape(-1, 3))
    wp.launch(geometry.segment_crosses_triangle_kernel, dim=4000,
              inputs=[*_views(p, q, corners), warp_view(crosses, wp.int32)], device="cpu")
    expected = _segment_hits_triangle(p, q, a, b, c, eps=0.0)
    assert 200 < expected.sum() < 3800
    np.testing.assert_array_equal(crosses.astype(bool), expected)


def test_a_segment_that_starts_on_the_triangle_does_not_pass_through_it():
    # a hair root on its scalp: the root lies on the plane within rounding, on either side of it; both ways the
    # segment touches the triangle, neither passes through it (a crossing decided by the last bit differs by device)
    a, b, c = np.array([0.0, 0.0, 1.0]), np.array([0.2, 0.0, 1.0]), np.array([0.0, 0.2, 1.0])
    roots = np.array([[0.05, 0.05, 1.0 + 1e-16], [0.05, 0.05, 1.0 - 1e-16], [0.05, 0.05, 1.0 + 2e-12],
                      [0.05, 0.05, 1.0 + 2e-12]])
    ends = np.array([[0.06, 0.05, 0.99], [0.06, 0.05, 1.01], [0.06, 0.05, 0.99], [0.06, 0.05, 1.01]])
    crosses = np.zeros(4, np.int32)
    corners = np.ascontiguousarray(np.tile(np.stack([a, b, c]), (4, 1)))
    wp.launch(geometry.segment_crosses_triangle_kernel, dim=4,
              inputs=[*_views(roots, ends, corners), warp_view(crosses, wp.int32)], device="cpu")
    # 2e-12 m above the plane is off it: that segment does pass through
    assert crosses.tolist() == [0, 0, 1, 0]


@pytest.mark.parametrize("edge_edge", [0, 1])
def test_the_bernstein_filter_skips_only_cubics_without_a_root_in_the_step(edge_edge):
    # four points moving linearly: small random motions around random positions (many resting-like cases with no
    # root, many with one); the filter's "no root" must hold for the exact cubic (its values on a fine grid)
    rng = np.random.default_rng(17)
    count = 4000
    start = [rng.normal(size=(count, 3)) for _ in range(4)]
    scale = rng.choice([0.01, 0.3, 1.5], size=(count, 1))
    end = [points + scale * rng.normal(size=(count, 3)) for points in start]
    off = np.zeros(count, np.int32)
    wp.launch(_stays_off_plane, dim=count, inputs=[edge_edge, *_views(*start, *end), warp_view(off, wp.int32)],
              device="cpu")
    times = np.linspace(0.0, 1.0, 2001)[:, None, None]
    moving = [a + times * (b - a) for a, b in zip(start, end)]          # (T, count, 3) each
    p, q, r, s = moving
    if edge_edge:
        values = np.einsum("tni,tni->tn", r - p, np.cross(q - p, s - r))
    else:
        values = np.einsum("tni,tni->tn", p - q, np.cross(r - q, s - q))
    has_root = (values.min(axis=0) <= 0.0) & (values.max(axis=0) >= 0.0)
    assert not np.any(has_root & (off == 1)), "the filter skipped a cubic that vanishes in the step"
    assert 0.2 * count < off.sum() < count - has_root.sum() + 1    # it does skip most root-free cubics

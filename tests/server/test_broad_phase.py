"""The xp hash-grid broad phase returns exactly scipy cKDTree's candidate sets (collision/broad_phase.py).

Run on numpy and on the strict CuPy-like backend (solver_server/emulated_device.py), which proves the
grid never leaves the device: every intermediate must stay a device array.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.spatial import cKDTree

from solver_server import backend as backend_module
from solver_server.collision import broad_phase
from solver_server.emulated_device import DeviceArray, emulated_cuda_backend

STRICT = emulated_cuda_backend()
NAMESPACES = {"numpy": (np, lambda a: a, lambda a: a), "strict": (STRICT.xp, STRICT.from_host, STRICT.to_host)}

# 1 nm resolution: below ~1e-154 m squared distances underflow to 0 and cKDTree then calls points 1e-234 m
# apart "within radius 0" while no grid can (hypothesis found it); positions are never that fine.
coordinates = st.integers(-2 * 10**9, 2 * 10**9).map(lambda nanometres: nanometres * 1e-9)


def point_sets(max_points=60):
    return st.integers(0, max_points).flatmap(lambda n: arrays(np.float64, (n, 3), elements=coordinates))


def clustered(draw_points):
    """Some points snapped to a coarse lattice: duplicates and exact distances are common."""
    return np.round(draw_points * 4.0) / 4.0


def _pairs_set(pairs):
    return set(map(tuple, np.asarray(pairs).reshape(-1, 2).tolist()))


PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("namespace", sorted(NAMESPACES))
@PROPERTY
@given(points=point_sets(), radius=st.floats(0.0, 1.5), snap=st.booleans())
def test_neighbour_pairs_equal_query_pairs(namespace, points, radius, snap):
    xp, upload, download = NAMESPACES[namespace]
    points = clustered(points) if snap else points
    expected = cKDTree(points).query_pairs(radius) if len(points) else set()
    got = download(broad_phase.grid_neighbour_pairs(xp, upload(points), radius))
    assert got.dtype == np.int64 and got.shape[1:] == (2,)
    assert _pairs_set(got) == expected
    assert len(got) == len(expected)          # no pair twice


@pytest.mark.parametrize("namespace", sorted(NAMESPACES))
@PROPERTY
@given(queries=point_sets(30), points=point_sets(), radius=st.floats(0.0, 1.5), snap=st.booleans())
def test_points_near_equal_query_ball_point(namespace, queries, points, radius, snap):
    xp, upload, download = NAMESPACES[namespace]
    if snap:
        queries, points = clustered(queries), clustered(points)
    expected = set()
    if len(points) and len(queries):
        for query, found in enumerate(cKDTree(points).query_ball_point(queries, radius)):
            expected |= {(query, point) for point in found}
    query_index, point_index = (download(a) for a in broad_phase.grid_points_near(xp, upload(queries), upload(points),
                                                                                radius))
    assert set(zip(query_index.tolist(), point_index.tolist())) == expected
    assert len(query_index) == len(expected)
    assert np.all(np.diff(query_index) >= 0)  # ordered by query


@pytest.mark.parametrize("namespace", sorted(NAMESPACES))
@PROPERTY
@given(queries=point_sets(30), points=point_sets(), bound=st.floats(1e-3, 1.5), k=st.integers(1, 20))
def test_nearest_within_equals_bounded_k_nearest_query(namespace, queries, points, bound, k):
    """k nearest points closer than the bound (random coordinates: no distance ties at the k-th neighbour)."""
    xp, upload, download = NAMESPACES[namespace]
    points = np.unique(points, axis=0)            # duplicates would tie; cKDTree breaks ties its own way
    expected = set()
    if len(points) and len(queries):
        kk = min(k, len(points))
        distance, index = cKDTree(points).query(queries, k=kk, distance_upper_bound=bound)
        distance, index = distance.reshape(len(queries), kk), index.reshape(len(queries), kk)
        expected = {(q, int(index[q, j])) for q, j in zip(*np.nonzero(np.isfinite(distance)))}
        sorted_distances = np.sort(np.linalg.norm(queries[:, None] - points[None], axis=2), axis=1)
        if kk < len(points):  # skip draws where the k-th and (k+1)-th neighbours tie (set not unique)
            ties = np.isclose(sorted_distances[:, kk - 1], sorted_distances[:, kk], rtol=0, atol=1e-12)
            if np.any(ties & (sorted_distances[:, kk - 1] < bound)):
                return
    query_index, point_index = (download(a) for a in broad_phase.grid_nearest_within(
        xp, upload(queries), upload(points), bound, k))
    assert set(zip(query_index.tolist(), point_index.tolist())) == expected
    gaps = np.linalg.norm(queries[query_index] - points[point_index], axis=1)
    same_query = query_index[1:] == query_index[:-1]
    assert np.all(np.diff(query_index) >= 0) and np.all(np.diff(gaps)[same_query] >= 0)  # by query, nearest first


@pytest.mark.parametrize("switch", ["auto", "grid", "kdtree"])
def test_backend_switch_gives_the_same_sets_on_a_sheet_of_20k_points(monkeypatch, switch):
    """Large case (a crumpled sheet of cloth-like spacing) through the backend entry points."""
    monkeypatch.setattr(backend_module, "BROAD_PHASE", switch)
    rng = np.random.default_rng(7)
    flat = rng.random((20000, 2)) * 2.0
    points = np.column_stack([flat, 1.0 + 0.1 * np.sin(3.0 * flat[:, 0]) + 0.002 * rng.standard_normal(20000)])
    radius = 0.02
    cpu = backend_module.get_backend("cpu")
    expected = cKDTree(points).query_pairs(radius)
    assert len(expected) > 50000
    assert _pairs_set(cpu.neighbour_pairs(points, radius)) == expected
    query, nearest = cpu.nearest_within(points[:3000], points, radius, 16)
    distance, index = cKDTree(points).query(points[:3000], k=16, distance_upper_bound=radius)
    assert set(zip(query.tolist(), nearest.tolist())) == {(q, int(index[q, j]))
                                                          for q, j in zip(*np.nonzero(np.isfinite(distance)))}


def test_grid_on_the_strict_device_computes_with_device_arrays_only():
    """The device path makes device arrays and never downloads (the strict backend raises on np.asarray)."""
    points = np.random.default_rng(3).random((500, 3))
    created = DeviceArray.created
    pairs = STRICT.neighbour_pairs(STRICT.from_host(points), 0.08)
    assert isinstance(pairs, DeviceArray) and DeviceArray.created - created > 20
    assert _pairs_set(STRICT.to_host(pairs)) == cKDTree(points).query_pairs(0.08)


def test_tiny_radius_over_a_huge_extent_caps_the_cell_count():
    """1 km extent, 1 µm radius: 10^9 cells per axis would overflow int64 keys; cells are widened."""
    points = np.array([[0.0, 0.0, 0.0], [5e-7, 0.0, 0.0], [1000.0, 1000.0, 1000.0], [1000.0, 1000.0, 1000.0 + 2e-6]])
    assert _pairs_set(broad_phase.grid_neighbour_pairs(np, points, 1e-6)) == {(0, 1)}


def test_unknown_switch_value_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(backend_module, "BROAD_PHASE", "octree")
    with pytest.raises(backend_module.BackendError, match="TANGLE_BROAD_PHASE='octree'"):
        backend_module.neighbour_pairs(np, np.zeros((2, 3)), 1.0)

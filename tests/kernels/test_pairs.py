"""kernels.pairs: overlapping spheres along chains from the Warp hash grid equal a k-d tree's pairs less the
chain neighbours, in the k-d tree's sorted order, on one and several CPU threads and on the strict backend."""

import numpy as np
import pytest

from solver_server.collision.broad_phase import kdtree_neighbour_pairs
from solver_server.kernels.pairs import ChainSpherePairs
from solver_server.emulated_device import emulated_cuda_backend


def _chains(chains=15, items=80, seed=2):
    """Random-walk chains (strands) of spheres with uneven radii: centres (n, 3), radii (n,), chain, order."""
    rng = np.random.default_rng(seed)
    centres = np.cumsum(rng.normal(scale=0.0008, size=(chains, items, 3)) + [0.0, 0.0, -0.0005], axis=1)
    centres += rng.uniform(-0.004, 0.004, size=(chains, 1, 3))
    radii = rng.uniform(0.0005, 0.003, size=(chains, items))
    chain = np.repeat(np.arange(chains), items)
    order = np.tile(np.arange(items), chains) * 3          # any increasing order along a chain
    return centres.reshape(-1, 3), radii.ravel(), chain, order


def _expected(centres, radii, chain, order, along):
    pairs = kdtree_neighbour_pairs(centres, 2.0 * radii.max())
    i, j = pairs[:, 0], pairs[:, 1]
    overlap = np.linalg.norm(centres[i] - centres[j], axis=1) <= radii[i] + radii[j]
    neighbours = (chain[i] == chain[j]) & (np.abs(order[i] - order[j]) <= along)
    return pairs[overlap & ~neighbours]


@pytest.mark.parametrize("threads", ["1", "2", "5"])
def test_grid_pairs_are_the_sorted_kdtree_pairs_without_chain_neighbours(threads, monkeypatch):
    monkeypatch.setenv("TANGLE_KERNEL_THREADS", threads)
    centres, radii, chain, order = _chains()
    along = 9
    expected = _expected(centres, radii, chain, order, along)
    found = ChainSpherePairs(chain, order, np).pairs(centres, radii, float(radii.max()), along)
    assert len(expected) > 500
    assert found.dtype == np.int64
    np.testing.assert_array_equal(found, expected)
    # the chain rule removed many pairs (the point of skipping them inside the query)
    assert len(kdtree_neighbour_pairs(centres, 2.0 * radii.max())) > 2 * len(expected)


def test_the_emulated_cuda_device_gives_the_same_pairs():
    backend = emulated_cuda_backend()
    centres, radii, chain, order = _chains(chains=6, items=50, seed=5)
    expected = ChainSpherePairs(chain, order, np).pairs(centres, radii, float(radii.max()), 4)
    finder = ChainSpherePairs(backend.from_host(chain), backend.from_host(order), backend.xp)
    found = finder.pairs(backend.from_host(centres), backend.from_host(radii), float(radii.max()), 4)
    np.testing.assert_array_equal(backend.to_host(found), expected)


def test_no_items_and_no_pairs():
    finder = ChainSpherePairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np)
    assert finder.pairs(np.zeros((0, 3)), np.zeros(0), 0.0, 1).shape == (0, 2)
    far = ChainSpherePairs(np.arange(3), np.zeros(3, np.int64), np)
    assert far.pairs(np.eye(3), np.full(3, 0.1), 0.1, 0).shape == (0, 2)

"""core.transforms: world <-> local with a matrix carrying rotation, translation and non-uniform scale."""

import numpy as np

from blender_addon.core.transforms import to_local, to_world


def test_round_trip_and_known_point():
    angle = 0.7
    matrix = np.eye(4)
    matrix[:3, :3] = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]]) \
        @ np.diag([2.0, 0.5, 3.0])
    matrix[:3, 3] = [1.0, -2.0, 0.5]
    np.testing.assert_allclose(to_world([[1.0, 0.0, 0.0]], matrix), [[1 + 2 * np.cos(angle), -2 + 2 * np.sin(angle), 0.5]])
    points = np.random.default_rng(0).normal(size=(20, 3))
    np.testing.assert_allclose(to_local(to_world(points, matrix), matrix), points, atol=1e-12)

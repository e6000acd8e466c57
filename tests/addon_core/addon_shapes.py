"""Small test geometry shared by the add-on core tests (plain numpy)."""

import numpy as np


def cube(size=1.0, center=(0.0, 0.0, 1.0)):
    """Closed, outward-oriented cube surface: vertices (8, 3), triangles (12, 3)."""
    corners = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)]) * size
    quads = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]]
    triangles = np.array([[q[0], q[1], q[2]] for q in quads] + [[q[0], q[2], q[3]] for q in quads])
    return corners + np.asarray(center), triangles


def strands(count=3, points=5, length=0.2):
    """``count`` vertical strands of ``points`` points: points (count*points, 3), offsets (count+1,)."""
    z = np.linspace(0.0, -length, points)
    all_points = np.concatenate([np.stack([np.full(points, 0.1 * s), np.zeros(points), z], 1) for s in range(count)])
    return all_points, np.arange(count + 1) * points

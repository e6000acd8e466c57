"""Small test geometry shared by the add-on core tests (plain numpy)."""

import numpy as np


def grid(n=3, size=1.0, height=1.0):
    """n x n vertex grid of side ``size`` [m] centred above the origin at ``height`` [m], vertex i*n + j at
    row i, column j: vertices (n², 3), triangles (2(n-1)², 3)."""
    xs = np.linspace(-size / 2, size / 2, n)
    x, y = np.meshgrid(xs, xs, indexing="xy")
    vertices = np.stack([x.ravel(), y.ravel(), np.full(n * n, height)], axis=1)
    corner = (np.arange(n - 1)[None, :] + n * np.arange(n - 1)[:, None]).ravel()
    triangles = np.concatenate([np.stack([corner, corner + 1, corner + n + 1], 1),
                                np.stack([corner, corner + n + 1, corner + n], 1)])
    return vertices, triangles


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

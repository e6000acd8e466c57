"""Small real scenes for server tests."""

from __future__ import annotations

import numpy as np


def grid_cloth(n=5, frame_end=5, object_id="Cloth", size=1.0):
    """An n x n cloth grid at z = 1 m pinned at two corners (vertices 0 and n-1)."""
    xs = np.linspace(0.0, size, n)
    x, y = np.meshgrid(xs, xs, indexing="xy")
    vertices = np.stack([x.ravel(), y.ravel(), np.full(n * n, 1.0)], axis=1)
    index = np.arange(n * n).reshape(n, n)
    a, b, c, d = index[:-1, :-1].ravel(), index[:-1, 1:].ravel(), index[1:, :-1].ravel(), index[1:, 1:].ravel()
    triangles = np.concatenate([np.stack([a, b, d], 1), np.stack([a, d, c], 1)]).astype("<i4")
    return {
        "gravity": [0.0, 0.0, -9.81],
        "time": {"fps": 24, "frame_start": 1, "frame_end": frame_end, "substeps": 2},
        "objects": [
            {
                "id": object_id,
                "kind": "cloth",
                "vertices": vertices,
                "triangles": triangles,
                "pins": {"indices": np.array([0, n - 1], "<i4"), "weights": np.ones(2)},
                "params": {},
            }
        ],
    }

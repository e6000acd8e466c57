"""Mesh shells wound outward: the convention the add-on's scene checks and the solver share for "inside a mesh".

An artist's mesh collider is a soup of shells (a head, its eyes, ears through it), some wound inward. A point is
inside the mesh where the generalized winding number of the triangles, each shell wound outward, is above one half:
flipped shells count as closed ones, and overlapping shells of opposite windings add up instead of cancelling.
The add-on (before the bake, numpy only) and the server (every pose) must find the same points inside, so both
wind the shells here. numpy only.
"""

from __future__ import annotations

import numpy as np


def shell_labels(triangles: np.ndarray, vertex_count: int) -> np.ndarray:
    """(vertex_count,) int64: the connected shell of every vertex (vertices joined by the triangles' edges),
    numbered 0 .. shells − 1 in order of each shell's lowest vertex. Vectorized union–find: every edge hooks the
    larger of its two roots under the smaller, then paths are halved until each vertex points at its root;
    repeated until no edge joins two roots (a few rounds)."""
    triangles = np.asarray(triangles, np.int64).reshape(-1, 3)
    first = triangles.ravel()
    second = np.roll(triangles, -1, axis=1).ravel()
    parent = np.arange(vertex_count)
    while True:
        root_first, root_second = parent[first], parent[second]
        joined = root_first != root_second
        if not joined.any():
            break
        np.minimum.at(parent, np.maximum(root_first, root_second)[joined], np.minimum(root_first, root_second)[joined])
        while True:
            grandparent = parent[parent]
            if np.array_equal(grandparent, parent):
                break
            parent = grandparent
    return np.unique(parent, return_inverse=True)[1].reshape(-1)


def outward_shells(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """``triangles`` (F, 3) of a mesh with vertices (N, 3) [m], every shell (triangles connected through shared
    vertices) wound so that its signed volume about its own centre is positive: the generalized winding number
    is then about +1 inside each closed shell whatever the artist's normals, and one query with the threshold
    0.5 finds points inside any shell, flipped ones too (a shell wound inward would read −1). Where shells of
    opposite windings overlap (an ear through a head) the two count together instead of cancelling.
    Returns (F, 3) int32."""
    triangles = np.asarray(triangles, np.int64).reshape(-1, 3)
    label = shell_labels(triangles, len(vertices))
    shells = int(label.max()) + 1 if len(label) else 0
    shell = label[triangles[:, 0]]
    corners = np.asarray(vertices, float)[triangles]                                        # (F, 3, 3)
    centroids = corners.mean(axis=1)
    centre = np.stack([np.bincount(shell, centroids[:, axis], minlength=shells) for axis in range(3)], axis=1) \
        / np.maximum(np.bincount(shell, minlength=shells), 1)[:, None]                      # (shells, 3): the mean
    relative = corners - centre[shell][:, None, :]
    volume = np.einsum("fi,fi->f", relative[:, 0], np.cross(relative[:, 1], relative[:, 2])) / 6.0
    inward = np.bincount(shell, volume, minlength=shells) < 0.0
    return np.ascontiguousarray(np.where(inward[shell][:, None], triangles[:, ::-1], triangles), dtype=np.int32)

"""The shell convention the add-on and the solver share (``protocol.mesh_shells``): shells found as the connected
components of the triangles' edges, and every shell wound outward whatever the artist's normals."""

from __future__ import annotations

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph

from protocol.mesh_shells import outward_shells, shell_labels
from tests.physics.scenes import uv_sphere


def test_shells_are_the_connected_components_of_the_triangle_edges():
    rng = np.random.default_rng(2)
    vertex_count = 400
    # a random soup of triangles over a random relabelling of vertices: long chains and many small islands
    order = rng.permutation(vertex_count)
    chain = np.stack([order[:-2], order[1:-1], order[2:]], axis=1)[rng.random(vertex_count - 2) < 0.7]
    labels = shell_labels(chain, vertex_count)
    rows = chain.ravel()
    cols = np.roll(chain, -1, axis=1).ravel()
    adjacency = scipy.sparse.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(vertex_count, vertex_count))
    count, expected = scipy.sparse.csgraph.connected_components(adjacency, directed=False)
    assert labels.max() + 1 == count
    # the same partition (labels may be numbered differently)
    pairs = np.unique(np.stack([labels, expected], axis=1), axis=0)
    assert len(pairs) == count
    # numbered in order of each shell's lowest vertex
    lowest = np.array([np.flatnonzero(labels == shell).min() for shell in range(count)])
    assert np.all(np.diff(lowest) > 0)


def test_each_shell_is_turned_outward_on_its_own():
    head_vertices, head_triangles = uv_sphere(12, 24, 1.0)
    eye_vertices, eye_triangles = uv_sphere(6, 12, 0.2, (0.9, 0.0, 0.2))
    vertices = np.concatenate([head_vertices, eye_vertices])
    eye = eye_triangles + len(head_vertices)
    wound = np.concatenate([head_triangles, eye])
    for head, eye_shell in ((head_triangles, eye[:, ::-1]), (head_triangles[:, ::-1], eye),
                            (head_triangles[:, ::-1], eye[:, ::-1])):
        result = outward_shells(vertices, np.concatenate([head, eye_shell]))
        assert result.dtype == np.int32
        np.testing.assert_array_equal(result, wound)

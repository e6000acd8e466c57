"""Edge–edge contact with a mesh collider's edges (collision.mesh ``add_edge_corrections``): an edge that
crosses a mesh edge during the substep is put back on its side, while an edge that already passes
through the mesh when the substep starts (an earlier substep let a thin part between its points) is
left free, so it is not held through the mesh for the rest of the shot; the free ones are counted."""

from __future__ import annotations

import numpy as np

from solver_server.collision.mesh import EDGE_CONTACT_COUNTS, MeshGeometry
from solver_server.kernels import warp_view

import warp as wp

# a thin vertical fin in the plane x = 0: two triangles, 1 m wide (y), 1 m tall (z)
FIN_VERTICES = np.array([[0.0, -0.5, 0.0], [0.0, 0.5, 0.0], [0.0, 0.5, 1.0], [0.0, -0.5, 1.0]])
FIN_TRIANGLES = np.array([[0, 1, 2], [0, 2, 3]])


def _edge_pass(start, proposed, reach=0.01):
    fin = MeshGeometry("Fin", FIN_VERTICES, FIN_TRIANGLES)
    start, proposed = (np.ascontiguousarray(x, np.float64) for x in (start, proposed))
    edges = np.ascontiguousarray([[0, 1]], np.int32)
    correction = np.zeros((2, 3))
    count = np.zeros(2, np.int32)
    contacts = np.zeros(EDGE_CONTACT_COUNTS, np.int32)
    crossed_point = np.zeros(2, np.int32)
    fin.add_edge_corrections(np, start, proposed, warp_view(edges, wp.int32), np.full(2, reach), np.ones(2),
                             correction, count, contacts, crossed_point)
    assert crossed_point.tolist() == ([1, 1] if contacts[1] else [0, 0])
    return correction, contacts


def test_an_edge_sweeping_over_the_fins_top_rim_is_put_back_above_it():
    start = [[-0.2, 0.0, 1.05], [0.2, 0.0, 1.05]]          # above the rim, across it
    proposed = [[-0.2, 0.0, 0.95], [0.2, 0.0, 0.95]]       # pushed down over the rim: through the fin
    correction, contacts = _edge_pass(start, proposed)
    assert contacts[1] == 1 and contacts[2] == 0
    end = np.asarray(proposed) + correction
    assert np.all(end[:, 2] >= 1.0 + 0.01 - 1e-9), end


def test_an_edge_already_through_the_fin_is_left_free_and_counted():
    start = [[-0.2, 0.0, 0.95], [0.2, 0.0, 0.95]]          # through the fin, below its rim
    proposed = [[-0.2, 0.0, 1.05], [0.2, 0.0, 1.05]]       # pulled up off it
    correction, contacts = _edge_pass(start, proposed)
    assert contacts[2] == 1 and contacts[0] == 0
    np.testing.assert_array_equal(correction, 0.0)


def test_only_an_edge_deep_in_the_rims_contact_offset_counts_as_deep():
    """An edge resting across the fin's top rim inside its reach (a sag between two vertices the vertex contact
    holds) is in contact and corrected to the reach; it counts as deep (contacts[3]) only within
    DEEP_EDGE_FRACTION of the reach of the rim, where the PD edge rounds lift it even when nothing crossed."""
    from solver_server.collision.mesh_kernels import DEEP_EDGE_FRACTION

    reach = 0.01
    for gap, deep in ((0.5 * reach, 0), (0.5 * (1.0 - DEEP_EDGE_FRACTION.value) * reach, 1)):
        resting = [[-0.2, 0.0, 1.0 + gap], [0.2, 0.0, 1.0 + gap]]
        correction, contacts = _edge_pass(resting, resting, reach)
        assert contacts[0] == 1 and contacts[1] == 0 and contacts[3] == deep, (gap, contacts)
        end = np.asarray(resting) + correction
        np.testing.assert_allclose(end[:, 2], 1.0 + reach, atol=1e-9)

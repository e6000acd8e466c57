"""The independent contact metrics (tests/physics/contact_metrics.py) on cases with known answers."""

from __future__ import annotations

import numpy as np

from .contact_metrics import distance_to_surface


def test_distance_to_a_square_over_its_face_edges_and_corners_and_beyond_the_reach():
    """A unit square of two triangles in z = 0: a point above the face is its height away, one beside an edge its
    distance to the edge, one off a corner its distance to the corner; beyond the reach the distance is inf."""
    vertices = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    triangles = np.array([[0, 1, 2], [0, 2, 3]])
    points = np.array([[0.3, 0.6, 0.02],      # over the face, below the diagonal's other triangle
                       [0.5, 0.5, -0.01],     # on the diagonal, under the face
                       [1.03, 0.4, 0.04],     # beside the edge x = 1
                       [-0.03, -0.04, 0.0],   # off the corner (0, 0)
                       [0.5, 0.5, 0.2]])      # above the reach
    expected = [0.02, 0.01, 0.05, 0.05, np.inf]
    np.testing.assert_allclose(distance_to_surface(points, vertices, triangles, reach=0.1), expected, atol=1e-12)

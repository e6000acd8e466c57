"""Hair against the hard places of a mesh: a point driven into a sharp concave crease ends outside both faces
(``collision.mesh.CREASE_PASSES``), and a point inside overlapping closed shells (an ear through a head), whatever
their windings, is recovered to outside every shell, not through the nearest surface into the other one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from protocol.mesh_shells import outward_shells
from solver_server.collision.mesh import CREASE_PASSES, MeshGeometry

from .contact_metrics import winding_numbers
from .scenes import uv_sphere


def _valley(wall_degrees: float):
    """Two walls z = |y| tan(wall) along x (a V groove, solid below): (vertices, triangles)."""
    rise = math.tan(math.radians(wall_degrees))
    vertices = np.array([[-1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [-1.0, 1.0, rise], [1.0, 1.0, rise], [-1.0, -1.0, rise],
                         [1.0, -1.0, rise]])
    return vertices, np.array([[0, 1, 3], [0, 3, 2], [0, 4, 5], [0, 5, 1]], np.int32)


def test_a_point_driven_deep_into_a_narrow_crease_ends_outside_both_faces():
    wall = 60.0
    vertices, triangles = _valley(wall)
    geometry = MeshGeometry("Valley", vertices, triangles)
    geometry.set_vertices(vertices)
    reach = 1e-3
    start, end = np.array([[0.0, 0.01, 0.6]]), np.array([[0.0, 0.02, -0.2]])     # 20 cm under the groove
    resolved, _, _, _, crossed = geometry.resolve(np, start, end, np.array([reach]), passes=CREASE_PASSES)
    y, z = resolved[0, 1], resolved[0, 2]
    rise, cosine = math.tan(math.radians(wall)), math.cos(math.radians(wall))
    heights = ((z - y * rise) * cosine, (z + y * rise) * cosine)           # distances above the two walls [m]
    assert crossed[0] == 1
    assert min(heights) > 0.5 * reach, heights


def _signed_volume(vertices, triangles):
    corners = vertices[triangles]
    return float(np.einsum("fi,fi->", corners[:, 0], np.cross(corners[:, 1], corners[:, 2])) / 6.0)


def test_every_shell_is_wound_outward_for_the_winding_number():
    head_vertices, head_triangles = uv_sphere(16, 32, 1.0)
    ear_vertices, ear_triangles = uv_sphere(8, 16, 0.5, (3.0, 0.0, 0.0))
    vertices = np.concatenate([head_vertices, ear_vertices])
    ear = ear_triangles[:, ::-1] + len(head_vertices)                    # the artist's ear is wound inward
    wound = outward_shells(vertices, np.concatenate([head_triangles, ear]))
    np.testing.assert_array_equal(wound[:len(head_triangles)], head_triangles)
    np.testing.assert_array_equal(wound[len(head_triangles):], ear_triangles + len(head_vertices))
    assert _signed_volume(vertices, wound[len(head_triangles):]) > 0.0
    flipped = outward_shells(vertices, np.concatenate([head_triangles[:, ::-1], ear]))
    np.testing.assert_array_equal(flipped, wound)


@pytest.mark.parametrize("ear_winding", ["outward", "inward"])
def test_points_inside_overlapping_shells_come_out_of_every_shell(ear_winding):
    """With the ear wound inward the two shells' winding numbers cancel where they overlap (1 − 1): the point in
    both must still read as inside."""
    head_vertices, head_triangles = uv_sphere(16, 32, 1.0)
    ear_vertices, ear_triangles = uv_sphere(16, 32, 0.5, (1.0, 0.0, 0.0))
    if ear_winding == "inward":
        ear_triangles = ear_triangles[:, ::-1]
    vertices = np.concatenate([head_vertices, ear_vertices])
    triangles = np.concatenate([head_triangles, ear_triangles + len(head_vertices)]).astype(np.int32)
    geometry = MeshGeometry("Head", vertices, triangles)
    geometry.set_vertices(vertices)
    points = np.array([[0.95, 0.0, 0.0],      # in both shells, the head's surface nearest (it runs inside the ear)
                       [1.05, 0.0, 0.0],      # in the ear only, the head's surface nearest
                       [0.0, 0.0, 0.5],       # in the head only, its own surface nearest
                       [0.0, 0.0, 1.2]])      # outside
    moved, recovered = geometry.recover_inside(np, points, np.full(4, 0.01))
    assert recovered.tolist() == [True, True, True, False]
    assert np.all(np.abs(winding_numbers(moved, vertices, outward_shells(vertices, triangles))) < 0.5)
    np.testing.assert_array_equal(moved[3], points[3])
    # each leaves by a short way: at most the distance to the farther side of the ear (0.5 m) plus the reach
    assert np.all(np.linalg.norm(moved - points, axis=1)[:3] < 0.52)

"""Hair rooted inside a collider, found before the bake: depths inside primitives and meshes
(either orientation, overlapping shells of opposite windings), the point-triangle distance against the server's
closest points, and the warnings."""

from __future__ import annotations

import numpy as np
import pytest

from blender_addon.core import rooted_inside
from blender_addon.core.rooted_inside import (depth_inside, distances_to_triangles, rooted_inside_warnings,
                                              started_inside_warnings, winding_numbers)
from solver_server.collision.mesh import closest_points_on_triangles
from tests.physics.scenes import uv_sphere

RADIUS = 0.1   # m, the sphere colliders' radius


def _sphere_mesh(flipped=False):
    vertices, triangles = uv_sphere(16, 32, radius=RADIUS)
    return {"id": "Head", "kind": "collider", "vertices": vertices,
            "triangles": triangles[:, ::-1] if flipped else triangles, "matrix_world": np.eye(4).tolist()}


def _hair(roots, directions, radius=5e-5, thickness=0.0):
    """One strand of 4 points per root (1 cm segments along its direction)."""
    points = np.concatenate([root + np.outer(np.arange(4) * 0.01, direction)
                             for root, direction in zip(roots, directions)])
    return {"id": "Hair", "kind": "hair", "points": points, "strand_offsets": np.arange(0, len(points) + 1, 4),
            "params": {"radius": radius, "thickness": thickness}}


@pytest.mark.parametrize("flipped", [False, True])
def test_winding_number_is_one_inside_either_orientation_and_zero_outside(flipped):
    mesh = _sphere_mesh(flipped)
    inside = np.array([[0.0, 0.0, 0.0], [0.05, 0.02, -0.03]])
    outside = np.array([[0.2, 0.0, 0.0], [0.0, 0.0, -0.15]])
    numbers = winding_numbers(mesh["vertices"], mesh["triangles"], np.concatenate([inside, outside]))
    np.testing.assert_allclose(np.abs(numbers), [1, 1, 0, 0], atol=1e-9)
    assert np.all(np.sign(numbers[:2]) == (-1 if flipped else 1))


def test_distances_to_triangles_agree_with_the_servers_closest_points():
    rng = np.random.default_rng(3)
    vertices = rng.normal(size=(30, 3))
    triangles = rng.integers(0, 30, size=(40, 3))
    triangles = triangles[(triangles[:, 0] != triangles[:, 1]) & (triangles[:, 1] != triangles[:, 2])
                          & (triangles[:, 0] != triangles[:, 2])]
    points = rng.normal(size=(200, 3)) * 1.5
    ours = distances_to_triangles(vertices, triangles, points)
    # brute force over every (point, triangle) pair with the server's Voronoi-region closest point
    pairs_point = np.repeat(np.arange(len(points)), len(triangles))
    pairs_triangle = np.tile(np.arange(len(triangles)), len(points))
    a, b, c = (vertices[triangles[pairs_triangle, k]] for k in range(3))
    closest, _ = closest_points_on_triangles(points[pairs_point], a, b, c)
    server = np.linalg.norm(points[pairs_point] - closest, axis=1).reshape(len(points), -1).min(axis=1)
    np.testing.assert_allclose(ours, server, rtol=1e-9, atol=1e-12)


def test_depth_inside_primitives_in_their_placed_and_scaled_frames():
    scale = np.diag([2.0, 3.0, 4.0, 1.0])
    scale[:3, 3] = [1.0, 0.0, 0.0]
    points = np.array([[1.0, 0.0, 0.0], [1.0, 0.0, 0.3], [1.0, 0.0, 0.5], [5.0, 0.0, 0.0]])
    sphere = {"shape": {"type": "sphere", "center": [0, 0, 0], "radius": 0.1}, "matrix_world": scale.tolist()}
    # local depth 0.1 at the centre, times the smallest axis scale 2: 0.2 m (a lower bound of the world depth)
    np.testing.assert_allclose(depth_inside(sphere, points), [0.2, 0.05, 0.0, 0.0])
    box = {"shape": {"type": "box", "center": [0, 0, 0], "size": [0.2, 0.2, 0.2]}, "matrix_world": scale.tolist()}
    np.testing.assert_allclose(depth_inside(box, points), [0.2, 0.05, 0.0, 0.0])
    plane = {"shape": {"type": "plane", "point": [0, 0, 0], "normal": [0, 0, 1]}, "matrix_world": np.eye(4).tolist()}
    np.testing.assert_allclose(depth_inside(plane, [[0, 0, -0.3], [0, 0, 0.3]]), [0.3, 0.0])
    torus = {"shape": {"type": "torus", "center": [0, 0, 0], "major_radius": 1.0, "minor_radius": 0.25},
             "matrix_world": np.eye(4).tolist()}
    np.testing.assert_allclose(depth_inside(torus, [[1.0, 0, 0], [0, -1.1, 0.0], [0, 0, 0]]), [0.25, 0.15, 0.0])


@pytest.mark.parametrize("flipped", [False, True])
def test_strands_rooted_inside_a_mesh_are_a_warning_naming_the_collider(flipped):
    up = np.array([0.0, 0.0, 1.0])
    roots = [[0.0, 0.0, 0.05], [0.02, 0.0, 0.06], [0.0, 0.0, 0.3]]     # two sunk 4-5 cm deep, one in the air
    warnings = rooted_inside_warnings(_hair(np.array(roots), [up] * 3), [_sphere_mesh(flipped)])
    assert len(warnings) == 1
    warning = warnings[0]
    assert not warning.blocking and warning.object == "Hair"
    assert warning.message.startswith("2 of 3 strands are rooted inside collider 'Head'")


def test_roots_on_the_surface_are_not_warned_about():
    directions, _ = uv_sphere(6, 12, radius=1.0)
    roots = directions * RADIUS * 0.999            # on the (faceted) surface, within the mesh's chord error
    warnings = rooted_inside_warnings(_hair(roots, directions, radius=2e-3), [_sphere_mesh()])
    assert warnings == []


def test_many_strands_are_subsampled_and_counted_as_about(monkeypatch):
    monkeypatch.setattr(rooted_inside, "MAX_PAIRS", 20_000)
    mesh = _sphere_mesh()
    rng = np.random.default_rng(0)
    roots = rng.uniform(-0.03, 0.03, size=(200, 3))            # every strand rooted deep inside
    warnings = rooted_inside_warnings(_hair(roots, [np.array([0, 0, 1.0])] * 200), [mesh])
    assert warnings[0].message.startswith("about 200 of 200 strands")


def test_a_primitive_collider_and_the_hair_contact_distance():
    sphere = {"id": "Ball", "shape": {"type": "sphere", "center": [0, 0, 0], "radius": RADIUS},
              "matrix_world": np.eye(4).tolist()}
    up = np.array([0.0, 0.0, 1.0])
    roots = np.array([[0.0, 0.0, RADIUS - 0.002]])        # 2 mm deep; the second point 8 mm out
    assert rooted_inside_warnings(_hair(roots, [up], radius=1e-3), [sphere])[0].object == "Hair"
    # a contact distance beyond the depth: the root's own contact sphere reaches out, as on the scalp
    assert rooted_inside_warnings(_hair(roots, [up], radius=1e-3, thickness=2e-3), [sphere]) == []


@pytest.mark.parametrize("flipped", [False, True])
def test_strands_combed_through_a_collider_are_a_warning_of_their_own(flipped):
    """Three strands rooted on the top of the head: one combed straight down through it, one up into the air,
    one rooted inside (that one is the rooted-inside warning's, not counted again)."""
    down, up = np.array([0.0, 0.0, -1.0]), np.array([0.0, 0.0, 1.0])
    roots = np.array([[0.0, 0.0, RADIUS + 0.01], [0.03, 0.0, RADIUS + 0.01], [0.0, 0.0, 0.0]])
    hair = _hair(roots, [down, up, up])
    warnings = started_inside_warnings(hair, [_sphere_mesh(flipped)])
    assert len(warnings) == 1
    warning = warnings[0]
    assert not warning.blocking and warning.object == "Hair"
    assert warning.message.startswith("1 of 3 strands start partly inside collider 'Head'"), warning.message
    plane = {"id": "Ground", "shape": {"type": "plane", "point": [0, 0, RADIUS - 0.005], "normal": [0, 0, 1]},
             "matrix_world": np.eye(4).tolist()}      # the strand combed down reaches 1.5 and 2.5 cm below it
    assert started_inside_warnings(_hair(roots[:2], [up, up]), [plane]) == []
    assert started_inside_warnings(_hair(roots[:2], [down, up]), [plane])[0].message.startswith(
        "1 of 2 strands start partly inside collider 'Ground'")


def test_roots_inside_overlapping_shells_of_opposite_windings_are_found():
    """An ear wound inward that runs through a head wound outward: a root inside both reads inside (the two
    shells add up, as on the server), where the winding numbers of the artist's windings cancel (1 − 1 = 0)."""
    head_vertices, head_triangles = uv_sphere(16, 32, radius=RADIUS)
    ear_vertices, ear_triangles = uv_sphere(8, 16, radius=0.05, center=(0.09, 0.0, 0.0))
    vertices = np.concatenate([head_vertices, ear_vertices])
    triangles = np.concatenate([head_triangles, ear_triangles[:, ::-1] + len(head_vertices)])
    root = np.array([[0.08, 0.0, 0.0]])                                  # 2 cm inside the head, inside the ear
    assert abs(winding_numbers(vertices, triangles, root)[0]) < 0.5      # the artist's windings cancel
    collider = {"id": "Head", "kind": "collider", "vertices": vertices, "triangles": triangles}
    assert depth_inside(collider, root)[0] > 0.005
    warnings = rooted_inside_warnings(_hair(root, [np.array([1.0, 0.0, 0.0])]), [collider])
    assert len(warnings) == 1 and "1 of 1 strands are rooted inside collider 'Head'" in warnings[0].message

"""Colliders: analytic primitives (plane, sphere, box, torus) and triangle meshes (k-d tree broad phase)."""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import get_backend
from solver_server.collision.mesh import MeshGeometry, closest_points_on_triangles
from solver_server.collision.primitives import PRIMITIVES
from solver_server.sim.builder import _parse_shape
from solver_server.simulation import Simulation

from .scenes import cloth_object, grid, run, scene, uv_sphere

BACKEND = get_backend("cpu")



def _rotation(axis, angle):
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def _matrix(rotation=np.eye(3), translation=(0, 0, 0), scale=(1, 1, 1)):
    matrix = np.eye(4)
    matrix[:3, :3] = rotation @ np.diag(scale)
    matrix[:3, 3] = translation
    return matrix


def _primitive(shape, matrix):
    parsed = _parse_shape(shape, "C")
    return PRIMITIVES[parsed["type"]](parsed, matrix)


def test_box_signed_distance_matches_brute_force():
    rotation = _rotation([1, 2, 3], 0.7)
    matrix = _matrix(rotation, (0.3, -0.2, 0.5), scale=(1.0, 2.0, 0.5))
    box = _primitive({"type": "box", "size": [0.4, 0.3, 0.6]}, matrix)
    points = np.random.default_rng(42).uniform(-1, 1.5, (2000, 3))
    distance, normal = box.signed_distance(np, points)
    local = (points - matrix[:3, 3]) @ rotation
    half = np.array([0.2, 0.3, 0.15])  # size × axis scale / 2
    q = np.abs(local) - half
    expected = np.linalg.norm(np.maximum(q, 0), axis=1) + np.minimum(q.max(axis=1), 0)
    np.testing.assert_allclose(distance, expected, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(normal, axis=1), 1.0)
    # moving a point by −distance along the normal lands on the surface
    surface = points - distance[:, None] * normal
    d_surface, _ = box.signed_distance(np, surface)
    np.testing.assert_allclose(d_surface, 0.0, atol=1e-9)


def test_torus_signed_distance_matches_formula():
    rotation = _rotation([0, 1, 1], 0.4)
    matrix = _matrix(rotation, (1.0, 0.0, 0.2))
    torus = _primitive({"type": "torus", "major_radius": 0.5, "minor_radius": 0.1}, matrix)
    points = np.random.default_rng(42).uniform(-1, 2, (2000, 3))
    distance, normal = torus.signed_distance(np, points)
    local = (points - matrix[:3, 3]) @ rotation
    expected = np.hypot(np.hypot(local[:, 0], local[:, 1]) - 0.5, local[:, 2]) - 0.1
    np.testing.assert_allclose(distance, expected, atol=1e-12)
    surface = points - distance[:, None] * normal
    np.testing.assert_allclose(torus.signed_distance(np, surface)[0], 0.0, atol=1e-9)


def test_sphere_and_plane_under_matrix_world():
    matrix = _matrix(_rotation([1, 0, 0], np.pi / 2), (0, 0, 1), scale=(2, 2, 2))
    sphere = _primitive({"type": "sphere", "center": [0, 0, 0.5], "radius": 0.25}, matrix)
    np.testing.assert_allclose(sphere.center, [0, -1.0, 1.0], atol=1e-12)
    assert sphere.radius == pytest.approx(0.5)
    plane = _primitive({"type": "plane", "normal": [0, 0, 1], "point": [0, 0, 0.5]}, matrix)
    np.testing.assert_allclose(plane.normal, [0, -1, 0], atol=1e-12)
    distance, _ = plane.signed_distance(np, np.array([[0.0, -3.0, 0.0]]))
    assert distance[0] == pytest.approx(2.0)


def test_mesh_signed_distance_matches_brute_force():
    vertices, triangles = uv_sphere(rings=12, segments=24, radius=0.5)
    mesh = MeshGeometry("Ball", vertices, triangles)
    points = np.random.default_rng(42).uniform(-0.7, 0.7, (3000, 3))
    distance, normal = mesh.signed_distance(np, points)
    corners = vertices[triangles]
    reach = mesh.margin
    # brute force over every triangle
    best = np.full(len(points), np.inf)
    for k in range(len(triangles)):
        closest, _ = closest_points_on_triangles(points, *(np.broadcast_to(corners[k, j], points.shape) for j in range(3)))
        best = np.minimum(best, np.linalg.norm(points - closest, axis=1))
    near = best <= reach
    assert near.sum() > 500
    # two-sided surface: the distance is never negative, inside or out, and its direction
    # points from the surface to the point
    np.testing.assert_allclose(distance[near], best[near], atol=1e-12)
    assert np.all(np.isinf(distance[~near]))
    surface = points[near] - distance[near, None] * normal[near]
    np.testing.assert_allclose(np.linalg.norm(normal[near], axis=1), 1.0, atol=1e-9)
    assert np.all(np.abs(np.linalg.norm(surface, axis=1) - 0.5) < 0.02)



def test_a_mesh_query_within_a_reach_gives_the_full_query_s_distances_below_it_and_inf_beyond():
    """A caller that needs only near points (DER's end-position contacts) passes a reach: below it the distances and
    directions are the full query's bit for bit, beyond it inf."""
    vertices, triangles = uv_sphere(rings=12, segments=24, radius=0.5)
    mesh = MeshGeometry("Ball", vertices, triangles)
    points = np.random.default_rng(7).uniform(-0.7, 0.7, (3000, 3))
    full, full_normal = mesh.signed_distance(np, points)
    reach = 0.05
    near, near_normal = mesh.signed_distance(np, points, reach)
    inside = full < reach
    assert inside.sum() > 100 and (~inside & np.isfinite(full)).sum() > 100
    assert np.array_equal(near[inside], full[inside]) and np.array_equal(near_normal[inside], full_normal[inside])
    assert np.all(np.isinf(near[~inside]) | (near[~inside] >= reach))


def test_mesh_contact_over_part_of_the_substep():
    """MeshGeometry.resolve's interval: a point swept against the surface over a part of the substep sees the
    surface move only over that part (a hair solver with shorter internal steps), while the reported motion is
    the whole substep's."""
    vertices = np.array([[-1.0, -1.0, 0.0], [1.0, -1.0, 0.0], [1.0, 1.0, 0.0], [-1.0, 1.0, 0.0]])
    mesh = MeshGeometry("Floor", vertices, np.array([[0, 1, 2], [0, 2, 3]]))
    mesh.set_vertices(vertices + [0.0, 0.0, 0.04])               # rises 4 cm over the substep
    point = np.array([[0.1, 0.2, 0.02]])                        # at rest, 2 cm above the floor's start
    reach = np.array([0.001])
    for interval, lifted in (((0.0, 1.0), True), ((0.0, 0.25), False), ((0.25, 0.75), True), ((0.75, 0.75), False)):
        resolved, push, normal, motion, crossed = mesh.resolve(np, point, point, reach, interval)
        if lifted:     # the floor passed the point inside the interval: the point is put back above it
            floor = 0.04 * interval[1]
            assert crossed[0] == 1
            np.testing.assert_allclose(resolved[0], [0.1, 0.2, floor + 0.001], atol=1e-12)
            np.testing.assert_allclose(normal[0], [0.0, 0.0, 1.0], atol=1e-12)
            np.testing.assert_allclose(motion[0], [0.0, 0.0, 0.04], atol=1e-12)
        else:          # the floor stays below (0.25: at 1 cm) or is above all along (0.75, at rest: 3 cm)
            assert crossed[0] == 0
    # (0.75, 0.75): the point is under the resting floor and came from there: it is kept below it
    resolved, push, normal, _, _ = mesh.resolve(np, point, point, np.array([0.02]), (0.75, 0.75))
    np.testing.assert_allclose(normal[0], [0.0, 0.0, -1.0], atol=1e-12)
    np.testing.assert_allclose(resolved[0], [0.1, 0.2, 0.01], atol=1e-12)
    with pytest.raises(ValueError, match="interval"):
        mesh.resolve(np, point, point, reach, (0.5, 0.25))

@pytest.mark.parametrize("kind", ["box", "torus"])
def test_cloth_never_enters_box_or_torus(kind):
    shape = {"type": "box", "size": [0.4, 0.4, 0.2]} if kind == "box" else \
        {"type": "torus", "major_radius": 0.25, "minor_radius": 0.08}
    collider = {"id": "Rock", "kind": "collider", "shape": shape, "matrix_world": _matrix(translation=(0.5, 0.5, 0.2))}
    vertices, triangles, _ = grid(17, 17, height=0.5)
    sim = Simulation(scene([cloth_object(vertices, triangles, params={"thickness": 0.005}), collider], frame_end=24),
                     BACKEND)
    primitive = sim.colliders.colliders[0].geometry
    frames = run(sim)
    for _, positions, _ in frames:
        distance, _ = primitive.signed_distance(np, positions["Cloth"].astype(float))
        assert distance.min() >= 0.005 - 1e-5
    assert frames[-1][2]["contacts"] > 0


def test_cloth_on_mesh_sphere_never_inside():
    ball_vertices, ball_triangles = uv_sphere(rings=8, segments=16, radius=0.3, center=(0.5, 0.5, 0.0))
    ball = {"id": "Body", "kind": "collider", "vertices": ball_vertices, "triangles": ball_triangles,
            "params": {"thickness": 0.002}}
    vertices, triangles, _ = grid(13, 13, height=0.4)
    sim = Simulation(scene([cloth_object(vertices, triangles, params={"thickness": 0.003}), ball], frame_end=16),
                     BACKEND)
    mesh = sim.colliders.colliders[0].geometry
    frames = run(sim)
    for _, positions, _ in frames:
        distance, _ = mesh.signed_distance(np, positions["Cloth"].astype(float))
        assert distance.min() >= 0.005 - 1e-5
    final = frames[-1][1]["Cloth"]
    assert final[:, 2].min() < 0.0  # draped around it


def test_deforming_mesh_collider_driven_by_vertices_lifts_cloth():
    """A mesh 'floor' whose centre bulges upward frame by frame (drive vertices) lifts a resting cloth."""
    floor_vertices, floor_triangles, _ = grid(11, 11, size=1.4, height=0.0)
    floor_vertices[:, :2] -= 0.2
    floor = {"id": "Ground", "kind": "collider", "animated": True, "vertices": floor_vertices,
             "triangles": floor_triangles, "params": {"friction": 0.5}}
    vertices, triangles, _ = grid(11, 11, height=0.01)
    sim = Simulation(scene([cloth_object(vertices, triangles, params={"thickness": 0.005}), floor], frame_end=16),
                     BACKEND)

    def bulge(frame):
        deformed = floor_vertices.copy()
        r2 = ((deformed[:, :2] - 0.5) ** 2).sum(axis=1)
        deformed[:, 2] = 0.3 * min(1.0, (frame - 1) / 12) * np.exp(-r2 / 0.05)
        return {"Ground": {"matrix_world": np.eye(4), "vertices": deformed}}

    frames = run(sim, bulge)
    final = frames[-1][1]["Cloth"]
    centre = np.argmin(((vertices[:, :2] - 0.5) ** 2).sum(axis=1))
    # lifted onto the 0.3 m bump (from 0.01 m); the hard stretch limit keeps the cloth from stretching over
    # the apex, so with friction 0.5 holding its rim it rides on the bump's upper flank (0.24 m, 0.27 m without)
    assert final[centre, 2] > 0.2 and final[:, 2].max() > 0.2
    mesh = sim.colliders.colliders[0].geometry
    distance, _ = mesh.signed_distance(np, final.astype(float))
    assert distance.min() >= 0.005 - 1e-4

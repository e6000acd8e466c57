"""Continuous collision detection of hair vertices against colliders (collider_ccd.py).

A free strand falling at 30 m/s moves 3 cm in one 1 ms step.  Against a 4 mm thin box (analytic and as a
moving triangle mesh) the end-of-step test alone sees the predicted end positions below the box, outside
it, and lets the strand through (checked with collider_ccd off); with CCD the strand stops on the top
face.  A plane moving up at 10 m/s catches the strand and carries it along.
"""

from types import SimpleNamespace

import numpy as np
import pytest

from solver_server.collision import Collider
from solver_server.solvers.der.collider_ccd import swept_distance_touches, swept_mesh_touches
from solver_server.solvers.der.colliders import adapt_collider
from solver_server.solvers.der.settings import ContactSettings
from solver_server.solvers.der.settings import NewtonSettings

from .helpers import HAIR, make, run, straight

DT = 1e-3


def _first_touches(touches):
    """(vertices, normals, start gaps, surface velocities) of the touched vertices of a VertexTouches."""
    vertex = np.flatnonzero(touches.hit)
    return (vertex, *touches.planes(vertex))


def _moving_mesh(previous, current, triangles=((0, 1, 2),)):
    """A MeshGeometry posed to move from ``previous`` to ``current`` vertices (V, 3) [m] over the step."""
    from solver_server.collision.mesh import MeshGeometry

    geometry = MeshGeometry("Mesh", np.asarray(previous, float), np.asarray(triangles))
    geometry.set_vertices(np.asarray(current, float))
    return geometry
SPEED = 30.0            # m/s, downwards
THICK = 4e-3            # m, box thickness
TOP = 0.0               # m, height of the box's top face
START = 0.01            # m, strand height above the top face


def _spec(shape=None, vertices=None, triangles=None, matrix=None):
    return SimpleNamespace(id="collider", params={"friction": 0.3, "thickness": 0.0},
                           matrix_world=np.eye(4) if matrix is None else matrix, shape=shape,
                           vertices=vertices, triangles=triangles)


def _translation(z):
    matrix = np.eye(4)
    matrix[2, 3] = z
    return matrix


def thin_box():
    return Collider(_spec(shape={"type": "box", "center": (0.0, 0.0, TOP - 0.5 * THICK), "size": (0.2, 0.2, THICK)}))


def box_mesh(centre, size):
    """Closed box (8 vertices, 12 outward-wound triangles)."""
    corners = np.array([[x, y, z] for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.5, 0.5)])
    vertices = np.asarray(centre) + corners * np.asarray(size)
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    triangles = np.array([tri for a, b, c, d in quads for tri in ((a, b, c), (a, c, d))])
    return vertices, triangles


def falling_strand(colliders, ccd):
    points = straight(6, 0.05, origin=(-0.025, 0.01, TOP + START))
    model, solver, state = make(points, np.array([0, 6]), HAIR, NewtonSettings(max_iterations=60, quasi_newton=False),
                                ContactSettings(self_collision=False, collider_ccd=ccd), colliders,
                                fixed_vertices=np.zeros(0, np.int64))
    state.velocities[:, 2] = -SPEED
    return model, solver, state


def test_mesh_is_wound_outwards():
    vertices, triangles = box_mesh((0.0, 0.0, 0.0), (1.0, 1.0, 1.0))
    corners = vertices[triangles]
    normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    assert np.all(np.einsum("ij,ij->i", normals, corners.mean(axis=1)) > 0.0)


@pytest.mark.parametrize("ccd", [True, False])
def test_fast_strand_and_thin_box(ccd):
    model, solver, state = falling_strand([thin_box()], ccd)
    state, history = run(solver, state, 3, DT)
    lowest = state.positions[:, 2].min()
    if ccd:
        assert history[0]["collider_contacts"] >= 4
        assert lowest >= TOP + 0.9 * HAIR.radius, "the strand passed into the thin box"
        assert np.abs(state.velocities[:, 2]).max() < 1.0, "the strand did not stop on the box"
    else:
        assert lowest < TOP - THICK, "without CCD the end-of-step test should let the strand through"


@pytest.mark.parametrize("ccd", [True, False])
def test_fast_strand_and_moving_thin_mesh(ccd):
    """A closed 4 mm slab as a triangle mesh rising at 5 m/s; its vertices are set every step. Without the
    first path's CCD the settled loop's test of the end paths (StepContacts.relinearize) and the failsafe after
    it still find the crossing: a mesh is never passed (an analytic thin box is, above: its end-of-step test
    sees the far side). The strand then rides the slab only with the first path's CCD: without it, the first
    path's end-of-step test also holds the vertices predicted beyond the slab on that far side, against the
    end path's contacts."""
    rise = 5.0
    vertices, triangles = box_mesh((0.0, 0.0, TOP - 0.5 * THICK), (0.2, 0.2, THICK))
    slab = Collider(_spec(vertices=vertices, triangles=triangles))
    model, solver, state = falling_strand([slab], ccd)
    for step in range(3):
        slab.set_pose(np.eye(4), vertices + np.array([0.0, 0.0, rise * DT * (step + 1)]))
        state, history = run(solver, state, 1, DT)
        top = TOP + rise * DT * (step + 1)
        assert state.positions[:, 2].min() >= top + 0.8 * HAIR.radius, f"step {step}: passed into the slab"
    if ccd:
        assert np.allclose(state.velocities[:, 2], rise, atol=0.5), "the strand should ride on the rising slab"


def test_moving_plane_catches_fast_strand():
    """Ground plane rising at 10 m/s (matrix_world moved every step) against the strand falling at 30 m/s."""
    rise = 10.0
    plane = Collider(_spec(shape={"type": "plane", "normal": (0.0, 0.0, 1.0), "offset": TOP}))
    model, solver, state = falling_strand([plane], True)
    for step in range(3):
        plane.set_pose(_translation(rise * DT * (step + 1)), None)
        state, history = run(solver, state, 1, DT)
        height = TOP + rise * DT * (step + 1)
        assert state.positions[:, 2].min() >= height + 0.9 * HAIR.radius, f"step {step}: below the plane"
    assert np.allclose(state.velocities[:, 2], rise, atol=0.5)


def test_conservative_advancement_finds_the_first_touch():
    """Path straight through a thin box: the hit is on the top face, at the analytic point."""
    view = adapt_collider(thin_box())
    x0 = np.array([[0.0, 0.0, 0.01], [0.05, 0.0, 0.02], [0.0, 0.0, 0.01]])
    x1 = np.array([[0.0, 0.0, -0.02], [0.07, 0.0, -0.03], [0.0, 0.0, 0.005]])   # last: stops short
    reach = np.full(3, 1e-4)
    vertex, normal, start_gap, _ = _first_touches(swept_distance_touches(np, view, x0, x1, np.ones(3, bool), reach, DT))
    assert list(vertex) == [0, 1]
    assert np.allclose(normal, [[0.0, 0.0, 1.0]] * 2)
    assert np.allclose(start_gap, [0.01, 0.02])


def test_mesh_ccd_finds_the_first_touch_of_a_moving_triangle():
    """A triangle rising from z = 0 to z = 0.02 meets a vertex falling from 0.01 to −0.01 at z = 0.01·(2/4)."""
    previous = np.array([[-1.0, -1.0, 0.0], [1.0, -1.0, 0.0], [0.0, 1.0, 0.0]])
    current = previous + [0.0, 0.0, 0.02]
    x0, x1 = np.array([[0.0, 0.0, 0.01]]), np.array([[0.0, 0.0, -0.01]])
    vertex, normal, start_gap, surface_velocity = _first_touches(
        swept_mesh_touches(np, _moving_mesh(previous, current), x0, x1, np.ones(1, bool), np.full(1, 1e-5), DT))
    assert list(vertex) == [0]
    assert np.allclose(normal, [[0.0, 0.0, 1.0]])
    assert np.isclose(start_gap[0], 0.01)
    assert np.allclose(surface_velocity, [[0.0, 0.0, 20.0]])
    # starting behind the triangle (its back side): the surface is two-sided, so the crossing from
    # behind is a hit too, with the normal facing the side the vertex started on
    vertex, normal, start_gap, _ = _first_touches(
        swept_mesh_touches(np, _moving_mesh(previous, current), -x1 * 0 - [[0.0, 0.0, 0.01]],
                        np.array([[0.0, 0.0, 0.03]]), np.ones(1, bool), np.full(1, 1e-5), DT))
    assert list(vertex) == [0]
    assert np.allclose(normal, [[0.0, 0.0, -1.0]])
    assert np.isclose(start_gap[0], 0.01)


def test_mesh_ccd_touch_beside_a_rim_takes_the_rim_to_vertex_normal():
    """A vertex passing 2 mm beside a triangle's edge, through the triangle's plane beyond the edge: it touches the
    rim, not the face. Its normal is the direction from the rim to the vertex (+x), not the plane's normal with
    the side it started on: over a ridge that side is the inner side of the far face, and it held hair inside
    Suzanne's brow (tests/physics/test_character_hair.py)."""
    triangle = np.array([[-1.0, -1.0, 0.0], [0.0, -1.0, 0.0], [0.0, 1.0, 0.0]])     # its edge x = 0 along y
    x0, x1 = np.array([[0.002, 0.0, 0.003]]), np.array([[0.002, 0.0, -0.003]])
    vertex, normal, start_gap, _ = _first_touches(
        swept_mesh_touches(np, _moving_mesh(triangle, triangle), x0, x1, np.ones(1, bool), np.full(1, 0.004), DT))
    assert list(vertex) == [0]
    assert np.allclose(normal, [[1.0, 0.0, 0.0]])
    assert np.isclose(start_gap[0], 0.002)
    # through the face itself, the crossing keeps the face normal on the side the vertex came from
    _, normal, _, _ = _first_touches(swept_mesh_touches(np, _moving_mesh(triangle, triangle), x0 - [0.01, 0.0, 0.0],
                                                     x1 - [0.01, 0.0, 0.0], np.ones(1, bool), np.full(1, 0.004), DT))
    assert np.allclose(normal, [[0.0, 0.0, 1.0]])

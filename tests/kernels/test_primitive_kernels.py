"""The primitive-collider projection kernel (collision/primitive_kernels.py) against the primitives' own
signed distances (collision/primitives.py) in the sequence ColliderSet.project applied them with numpy:
every kind, rotated and non-uniformly scaled, still and moving, per-point thickness and friction; and the
CPU and CUDA launch layouts bit for bit. The PD contact local step in its kernels (primitives, and the contact
planes of mesh colliders) against its array path."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from solver_server.collision import primitive_kernels
from solver_server.collision.colliders import ColliderSet
from solver_server.kernels import launch_items, warp_view
from solver_server.sim.builder import parse_scene

SHAPES = [{"type": "plane", "normal": [0.1, 0.0, 1.0], "point": [0.0, 0.0, -0.5]},
          {"type": "sphere", "center": [0.1, 0.0, 0.0], "radius": 0.4},
          {"type": "box", "center": [0.0, 0.2, 0.0], "size": [0.5, 0.3, 0.4]},
          {"type": "torus", "center": [0.0, 0.0, 0.1], "major_radius": 0.5, "minor_radius": 0.15}]


def _pose(shift=(0.0, 0.0, 0.0)):
    matrix = np.eye(4)
    matrix[:3, :3] = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]) @ np.diag([1.5, 1.0, 0.7])
    matrix[:3, 3] = np.array([0.2, -0.1, 0.3]) + np.asarray(shift)
    return matrix


def _colliders(shapes):
    cloth = {"id": "Cloth", "kind": "cloth", "vertices": np.eye(3), "triangles": np.array([[0, 1, 2]])}
    objects = [cloth] + [{"id": f"C{k}", "kind": "collider", "shape": shape, "matrix_world": _pose().tolist(),
                          "params": {"friction": 0.1 * k, "thickness": 0.01 * k}} for k, shape in enumerate(shapes)]
    spec = parse_scene({"objects": objects, "time": {"fps": 24, "frame_start": 1, "frame_end": 2, "substeps": 1}})
    return ColliderSet([obj for obj in spec.objects if obj.kind == "collider"])


def _numpy_projection(colliders, points, thickness, friction):
    """The sequence ColliderSet.project ran with numpy before the kernel: per collider in scene order."""
    n = len(points)
    depth, mu, mask = np.zeros(n), np.zeros(n), np.zeros(n, bool)
    normal, motion = np.zeros((n, 3)), np.zeros((n, 3))
    for collider in colliders.colliders:
        distance, surface_normal = collider.geometry.signed_distance(np, points)
        push = thickness + collider.thickness - distance
        inside = push > 0
        pushed = points + np.where(inside, push, 0.0)[:, None] * surface_normal
        surface_motion = collider.surface_motion(np, pushed)
        points = np.where(inside[:, None], pushed, points)
        depth = depth + np.where(inside, push, 0.0)
        normal = np.where(inside[:, None], surface_normal, normal)
        motion = np.where(inside[:, None], surface_motion, motion)
        mu = np.where(inside, 0.5 * (friction + collider.friction), mu)
        mask |= inside
    return points, depth, normal, motion, mu, mask


@pytest.mark.parametrize("moving", [False, True])
@pytest.mark.parametrize("shapes", [SHAPES[k:k + 1] for k in range(4)] + [SHAPES], ids=lambda s: "+".join(
    shape["type"] for shape in s) if isinstance(s, list) else str(s))
def test_projection_matches_the_primitives_signed_distances(shapes, moving):
    colliders = _colliders(shapes)
    if moving:
        colliders.set_poses({collider.id: (_pose((0.01, 0.02, -0.01)), None) for collider in colliders.colliders})
    rng = np.random.default_rng(1)
    points = rng.uniform(-1.0, 1.0, size=(5000, 3))
    points[:4] = _pose()[:3, 3]                     # degenerate directions: centres of sphere and torus frames
    thickness, friction = rng.uniform(0.0, 0.02, 5000), rng.uniform(0.0, 1.0, 5000)
    expected = _numpy_projection(colliders, points, thickness, friction)
    projected, contacts = colliders.project(np, points, thickness, friction)
    assert 20 < int(contacts.mask.sum()) < 5000
    np.testing.assert_array_equal(contacts.mask, expected[5])
    for got, want in zip((projected, contacts.depth, contacts.normal, contacts.surface_motion, contacts.friction),
                         expected[:5]):
        np.testing.assert_allclose(got, want, rtol=0.0, atol=1e-14)
    if not moving:
        assert not contacts.surface_motion.any()


def test_cpu_and_cuda_layouts_agree_bit_for_bit():
    colliders = _colliders(SHAPES)
    rows = np.stack([primitive_kernels.packed_parameters(collider) for collider in colliders.colliders])
    start = np.random.default_rng(2).uniform(-1.0, 1.0, size=(3000, 3))
    results = []
    for per_item in (False, True):
        arrays = [start.copy(), np.zeros(3000), np.zeros((3000, 3)), np.zeros((3000, 3)), np.zeros(3000),
                  np.zeros(3000, np.int32)]
        views = [warp_view(array, kind) for array, kind in zip(arrays, (wp.vec3d, wp.float64, wp.vec3d, wp.vec3d,
                                                                         wp.float64, wp.int32))]
        launch_items(primitive_kernels.project_on_primitives, 3000, "cpu",
                     [warp_view(rows, wp.float64), warp_view(np.full(3000, 0.01), wp.float64),
                      warp_view(np.full(3000, 0.3), wp.float64)], views, per_item=per_item)
        results.append(arrays)
    for first, second in zip(*results):
        np.testing.assert_array_equal(first, second)


def _posed_colliders():
    """Wire objects of every primitive kind at _pose(), with friction 0.2 k and thickness 0.01 k [m]."""
    return [{"id": f"C{k}", "kind": "collider", "shape": shape, "matrix_world": _pose().tolist(),
             "params": {"friction": 0.2 * k, "thickness": 0.01 * k}} for k, shape in enumerate(SHAPES)]


def _one_substep_simulation(objects):
    """A CPU Simulation of ``objects`` at 24 fps, one substep a frame."""
    from solver_server.backend import get_backend  # noqa: PLC0415
    from solver_server.simulation import Simulation  # noqa: PLC0415

    return Simulation({"objects": objects, "time": {"fps": 24, "frame_start": 1, "frame_end": 2, "substeps": 1}},
                      get_backend("cpu"))


def _embedded_blob_contact(centre, colliders, seed: int, spread: float):
    """A soft body made from a closed surface (lattice embedding) of 0.3 m around ``centre`` among the collider
    objects ``colliders``: (its ContactPoints, the Simulation, particle count n, q_start (n, 3) [m]: its rest
    jittered by ``spread`` [m], q: q_start jittered by 2 mm), random numbers from ``seed``."""
    from benchmarks.pd_softbody import bumpy_blob  # noqa: PLC0415

    vertices, triangles = bumpy_blob()        # a closed surface embedded in a tet lattice of its own
    vertices = 0.3 * (vertices - vertices.mean(axis=0)) + centre
    simulation = _one_substep_simulation([{"id": "Blob", "kind": "softbody", "vertices": vertices,
                                           "triangles": triangles,
                                           "params": {"friction": 0.4, "tet_resolution": 6}}, *colliders])
    contact = simulation.groups[0].solver.contact
    assert not contact.identity
    n = simulation.groups[0].model.particle_count
    rng = np.random.default_rng(seed)
    q_start = np.ascontiguousarray(simulation.groups[0].model.rest + rng.normal(scale=spread, size=(n, 3)))
    q = np.ascontiguousarray(q_start + rng.normal(scale=0.002, size=(n, 3)))
    return contact, simulation, n, q_start, q


def _tilted_floor():
    """A 10 m square mesh collider of two triangles tilted 12° about x (μ 0.2, 2 mm thick): (its object, its
    rotation (3, 3), the vertices (4, 3) [m] it moves to by the next substep, a few millimetres away)."""
    turn = np.radians(12.0)
    tilt = np.array([[1.0, 0.0, 0.0], [0.0, np.cos(turn), -np.sin(turn)], [0.0, np.sin(turn), np.cos(turn)]])
    floor = np.array([[-5.0, -5.0, 0.0], [5.0, -5.0, 0.0], [5.0, 5.0, 0.0], [-5.0, 5.0, 0.0]]) @ tilt.T
    return ({"id": "Floor", "kind": "collider", "vertices": floor, "triangles": np.array([[0, 1, 2], [0, 2, 3]]),
             "params": {"friction": 0.2, "thickness": 0.002}}, tilt, floor + [0.004, -0.003, 0.002])


def _forces_kernel_equals_array_path(contact, colliders, q, q_start, candidates, drift: float,
                                     tolerance: float = 1e-12):
    """Three ContactPoints.forces iterations (each fed the previous forces, the points moved by ``drift`` [m] per
    iteration) in the kernel and in the array path: asserts equal point and particle forces (``tolerance`` of the
    largest, which must not be 0) and returns the kernel's particle forces of every iteration."""
    results = {}
    for kernel in (True, False):
        contact.force_kernel = kernel
        point_force = np.zeros((len(candidates), 3))
        steps = []
        for iteration in range(3):
            moved = np.ascontiguousarray(q + drift * iteration)
            point_force, particle_force = contact.forces(colliders, moved, point_force, q_start, candidates)
            steps.append((point_force, particle_force))
        results[kernel] = steps
    for (kernel_point, kernel_particle), (array_point, array_particle) in zip(results[True], results[False]):
        scale = np.abs(array_point).max()
        assert scale > 0
        np.testing.assert_allclose(kernel_point, array_point, rtol=0.0, atol=tolerance * scale)
        np.testing.assert_allclose(kernel_particle, array_particle, rtol=0.0, atol=tolerance * scale)
    return [particle_force for _, particle_force in results[True]]


def test_pd_contact_forces_and_planes_kernels_equal_the_array_path():
    """ContactPoints.forces and contact_planes for cloth against primitives (one kernel each,
    ColliderSet.primitive_contact_forces / primitive_contact_planes) against their array path through
    ColliderSet.project: every kind, moving, sticking and sliding contacts, three force iterations each fed
    the previous forces; pinned particles take no force."""
    from tests.physics.scenes import grid  # noqa: PLC0415

    vertices, triangles, index = grid(40, 40, size=2.0)
    vertices = vertices - [1.0, 1.0, 0.0]
    objects = [{"id": "Cloth", "kind": "cloth", "vertices": vertices, "triangles": triangles,
                "pins": {"indices": [int(index[0, 0])], "weights": [1.0]}, "params": {"friction": 0.4}}]
    simulation = _one_substep_simulation(objects + _posed_colliders())
    solver = simulation.groups[0].solver
    colliders = simulation.colliders
    colliders.set_poses({collider.id: (_pose((0.01, 0.02, -0.01)), None) for collider in colliders.colliders})
    rng = np.random.default_rng(4)
    q_start = np.ascontiguousarray(vertices + rng.normal(scale=0.3, size=vertices.shape))
    q = np.ascontiguousarray(q_start + rng.normal(scale=0.02, size=vertices.shape))
    contact = solver.contact
    planes = {}
    for kernel in (True, False):
        contact.force_kernel = kernel
        planes[kernel] = contact.contact_planes(colliders, q, q_start, 0.5)
    acting = planes[False][2].any(axis=1)
    assert 50 < int(acting.sum()) < len(q)
    np.testing.assert_array_equal(planes[True][0], planes[False][0])
    np.testing.assert_allclose(planes[True][2], planes[False][2], rtol=0.0, atol=1e-14)
    np.testing.assert_allclose(planes[True][1][acting], planes[False][1][acting], rtol=0.0, atol=1e-14)
    candidates = contact.candidates(colliders, q, q_start)
    assert 50 < len(candidates) < len(q)
    for particle_force in _forces_kernel_equals_array_path(contact, colliders, q, q_start, candidates, 0.005):
        assert not particle_force[solver.hard_indices].any()


def test_pd_contact_forces_kernel_on_embedded_points_equals_the_array_path():
    """A soft body's contact points are embedded in its tets (C q): the forces kernel on those points, scattered
    by Cᵀ, gives the array path's point and particle forces over three iterations fed the previous forces."""
    contact, simulation, n, q_start, q = _embedded_blob_contact([0.9, -0.1, 0.3], _posed_colliders(), 5, 0.01)
    colliders = simulation.colliders                     # the blob lies partly inside them
    candidates = contact.candidates(colliders, q, q_start)
    assert 10 < len(candidates) < contact.count
    for particle_force in _forces_kernel_equals_array_path(contact, colliders, q, q_start, candidates, 0.003):
        assert particle_force.shape == (n, 3)


def test_pd_contact_forces_on_planes_of_a_flat_mesh_equal_the_exact_projection():
    """Against a mesh collider the force iterations push onto each candidate's contact plane of the substep
    (``kernels.contact.plane_contact_forces``). On a flat, tilted and moving mesh that plane is the surface itself,
    so the kernel gives the forces of the exact projection at every iteration (the array path: a continuous,
    two-sided query per iteration), for points on either side, sticking and sliding, over three iterations fed
    the previous forces; pinned particles take no force."""
    from tests.physics.scenes import grid  # noqa: PLC0415

    vertices, triangles, index = grid(30, 30, size=1.0, height=0.0)
    floor, tilt, moved = _tilted_floor()
    simulation = _one_substep_simulation([{"id": "Cloth", "kind": "cloth", "vertices": vertices,
                                           "triangles": triangles,
                                           "pins": {"indices": [int(index[0, 0])], "weights": [1.0]},
                                           "params": {"friction": 0.4}}, floor])
    solver = simulation.groups[0].solver
    colliders = simulation.colliders
    colliders.set_poses({"Floor": (np.eye(4), moved)})
    rng = np.random.default_rng(6)
    q_start = np.ascontiguousarray(vertices + rng.normal(scale=0.01, size=vertices.shape))
    q = np.ascontiguousarray(q_start + rng.normal(scale=0.004, size=vertices.shape))
    contact = solver.contact
    candidates = contact.candidates(colliders, q, q_start)
    assert 50 < len(candidates) < len(q)
    below = (q_start[candidates] @ tilt[:, 2]) < 0.0
    assert below.any() and not below.all()      # candidates started on both sides of the floor
    for particle_force in _forces_kernel_equals_array_path(contact, colliders, q, q_start, candidates, 0.002):
        assert not particle_force[solver.hard_indices].any()


def test_pd_contact_forces_of_embedded_points_on_planes_of_a_flat_mesh_equal_the_exact_projection():
    """A soft body's embedded surface points (C q) against a flat, tilted, moving mesh: the contact-plane kernel's
    point forces, and the particle forces Cᵀ f, equal the exact projection's over three iterations."""
    floor, _, moved = _tilted_floor()
    contact, simulation, n, q_start, q = _embedded_blob_contact([0.0, 0.0, 0.0], [floor], 9, 0.005)
    colliders = simulation.colliders                     # the blob lies partly under the floor
    colliders.set_poses({"Floor": (np.eye(4), moved)})
    candidates = contact.candidates(colliders, q, q_start)
    assert 10 < len(candidates) < contact.count
    # the planes are points in world coordinates (0.3 m from the origin): their few roundings, ~1e-14 m, times the
    # points' gains (up to 200 N/m) show at a few 1e-12 of the largest force (0.9 N)
    for particle_force in _forces_kernel_equals_array_path(contact, colliders, q, q_start, candidates, 0.002,
                                                           tolerance=1e-10):
        assert particle_force.shape == (n, 3)

"""The DER strand–strand narrow phase in Warp (der/kernels/ccd.py) against the array formulas it replaced
(geometry.coplanarity_times and segment_closest_points at τ = 0, 1 and the coplanarity times, with the same
prefilter): crossing, parallel, resting and far pairs; the edge pairs the detection lists (broad phase, kinematic
pairs skipped and narrow phase in one kernel pair) against every pair tested by brute force."""

import numpy as np
import pytest
import warp as wp

from solver_server.kernels import launch_split, warp_view
from solver_server.solvers.der import contact as contact_module
from solver_server.solvers.der.contact import ContactSolver
from solver_server.solvers.der.contact_detection import ContactDetector, KinematicVertices
from solver_server.solvers.der.geometry import coplanarity_times, segment_closest_points
from solver_server.solvers.der.kernels import ccd as ccd_kernels
from solver_server.solvers.der.model import build_model
from solver_server.solvers.der.settings import ContactSettings

from .helpers import HAIR


@wp.kernel
def _closest_of_pairs(x0: wp.array(dtype=wp.vec3d), x1: wp.array(dtype=wp.vec3d), first_a: wp.array(dtype=wp.int32),
                      first_b: wp.array(dtype=wp.int32), limit: wp.array(dtype=wp.float64),
                      closest: wp.array(dtype=wp.vec4d)):
    """``ccd_kernels.pair_closest_in_step`` of the edges from first_a[k], first_b[k], a thread per pair."""
    k = wp.tid()
    va = first_a[k]
    vb = first_b[k]
    p0 = x0[va]
    p1 = x0[va + 1]
    p2 = x0[vb]
    p3 = x0[vb + 1]
    closest[k] = ccd_kernels.pair_closest_in_step(p0, p1, p2, p3, x1[va] - p0, x1[va + 1] - p1, x1[vb] - p2,
                                                  x1[vb + 1] - p3, limit[k])


def _array_form(x0, x1, va, vb, limit):
    """(τ, s, t, distance) per pair as contact_detection._detect_edges computes them with arrays (inf: prefiltered)."""
    points0 = [x0[va], x0[va + 1], x0[vb], x0[vb + 1]]
    motion = [x1[va] - points0[0], x1[va + 1] - points0[1], x1[vb] - points0[2], x1[vb + 1] - points0[3]]
    _, _, start_distance = segment_closest_points(np, *points0)
    reach = np.max([np.linalg.norm(motion[i] - motion[j], axis=1) for i, j in ((0, 2), (0, 3), (1, 2), (1, 3))],
                   axis=0)
    result = np.zeros((len(va), 4))
    result[:, 3] = np.inf
    possible = start_distance - reach < limit
    points0 = [p[possible] for p in points0]
    motion = [m[possible] for m in motion]
    roots = coplanarity_times(np, *points0, *motion)
    count = int(possible.sum())
    times = np.concatenate((np.zeros((count, 1)), np.ones((count, 1)), roots), axis=1)
    times = np.where(np.isnan(times), 1.0, times)
    best = np.zeros((count, 4))
    best[:, 3] = np.inf
    for column in range(times.shape[1]):
        tau = times[:, column][:, None]
        s, t, distance = segment_closest_points(np, *[p0 + tau * m for p0, m in zip(points0, motion)])
        better = distance < best[:, 3]
        best[better] = np.stack((times[:, column], s, t, distance), axis=1)[better]
    result[possible] = best
    return result


def test_the_kernel_equals_the_array_form():
    rng = np.random.default_rng(21)
    pairs = 4000
    x0 = rng.uniform(-0.01, 0.01, size=(4 * pairs, 3))
    x1 = x0 + rng.normal(scale=0.004, size=x0.shape)
    # some parallel and some resting pairs: B a shifted copy of A, and pairs that do not move
    x0[2::8] = x0[0::8] + [0.0, 0.0, 1e-4]
    x0[3::8] = x0[1::8] + [0.0, 0.0, 1e-4]
    x1[4::16] = x0[4::16]
    va = np.arange(0, 4 * pairs, 4, dtype=np.int32)
    vb = va + 2
    limit = np.full(pairs, 2e-3)
    limit[::5] = 1e-9                                  # most of these drop out in the prefilter
    closest = np.empty((pairs, 4))
    wp.launch(_closest_of_pairs, pairs, device="cpu", inputs=[
        warp_view(x0, wp.vec3d), warp_view(x1, wp.vec3d), warp_view(va, wp.int32), warp_view(vb, wp.int32),
        warp_view(limit, wp.float64), warp_view(closest, wp.vec4d)])
    expected = _array_form(x0, x1, va, vb, limit)
    dropped = np.isinf(expected[:, 3])
    assert 100 < dropped.sum() < pairs - 1000
    np.testing.assert_array_equal(np.isinf(closest[:, 3]), dropped)
    hits = expected[:, 3] < limit
    assert hits.sum() > 100
    np.testing.assert_allclose(closest[~dropped, 3], expected[~dropped, 3], rtol=0.0, atol=1e-12)
    # where the best time is unique the parameters agree too (ties between candidate times may pick another)
    unique = ~dropped & (np.abs(closest[:, 0] - expected[:, 0]) < 1e-9)
    assert unique.sum() > 0.9 * (~dropped).sum()
    np.testing.assert_allclose(closest[unique, 1:3], expected[unique, 1:3], rtol=0.0, atol=1e-9)


@pytest.mark.parametrize("kept_hits", [8, 1])
@pytest.mark.parametrize("end_check", [False, True])
def test_listed_edge_pairs_are_every_pair_within_its_limit_in_order(monkeypatch, end_check, kept_hits):
    """A tangle of 60 short strands, some vertices kinematic: the pairs the detection lists are exactly the pairs
    with no shared vertex and a free vertex whose narrow phase (the array form) comes within the limit, in (ea, eb)
    order, with the array form's distances; whether the filling pass takes an edge's hits from those the counting
    pass kept or, beyond the kept width, searches again (a width of 1: most edges search again)."""
    monkeypatch.setattr(contact_module, "KEPT_HITS", kept_hits)
    rng = np.random.default_rng(4)
    strands, per_strand = 60, 6
    roots = rng.uniform(-0.01, 0.01, size=(strands, 1, 3))
    steps = rng.normal(scale=0.003, size=(strands, per_strand, 3))
    steps[:, 0] = 0.0
    x0 = (roots + np.cumsum(steps, axis=1)).reshape(-1, 3)
    offsets = np.arange(strands + 1) * per_strand
    model = build_model(np, x0, offsets, HAIR)
    x1 = x0 + rng.normal(scale=0.002, size=x0.shape)
    if end_check:
        x0 = x1
    settings = ContactSettings(thickness=2e-3, proximity=0.5)
    solver = ContactSolver(np, model, [], settings)
    fixed_vertices = np.concatenate([offsets[:-1], offsets[:-1] + 1, offsets[20:40]])   # roots; strands 20..39 whole
    fixed_vertices = np.unique(np.concatenate([fixed_vertices, *[np.arange(offsets[s], offsets[s + 1])
                                                                 for s in range(20, 30)]]))
    fixed_dofs = (model.vertex_dof[fixed_vertices][:, None] + np.arange(3)).ravel()
    detector = ContactDetector(solver, x0, KinematicVertices.of(np, model, fixed_dofs), 1.0 / 96)
    ea, eb, va, vb, contact_distance, closest = detector._edge_pair_hits(x0, x1, end_check=end_check)

    every_a, every_b = np.triu_indices(model.n_edges, 1)
    first_a, first_b = model.edge_vertex[every_a], model.edge_vertex[every_b]
    fixed = np.zeros(model.n_vertices, bool)
    fixed[fixed_vertices] = True
    kinematic = fixed[first_a] & fixed[first_a + 1] & fixed[first_b] & fixed[first_b + 1]
    kept = (np.abs(first_a - first_b) > 1) & ~kinematic
    every_a, every_b, first_a, first_b = every_a[kept], every_b[kept], first_a[kept], first_b[kept]
    distance = model.edge_radius[every_a] + model.edge_radius[every_b] + settings.thickness
    limit = (1.0 + settings.proximity) * distance
    if end_check:
        limit = distance - settings.end_penetration_tolerance * np.minimum(model.edge_radius[every_a],
                                                                          model.edge_radius[every_b])
    expected = _array_form(x0, x1, first_a, first_b, limit)
    hit = expected[:, 3] < limit
    assert 50 < hit.sum() < len(hit) // 2
    assert np.bincount(every_a[hit]).max() > kept_hits        # some edge has more hits than are kept
    np.testing.assert_array_equal(ea, every_a[hit])
    np.testing.assert_array_equal(eb, every_b[hit])
    np.testing.assert_array_equal(va, first_a[hit])
    np.testing.assert_array_equal(vb, first_b[hit])
    np.testing.assert_array_equal(contact_distance, distance[hit])
    np.testing.assert_allclose(closest[:, 3], expected[hit, 3], rtol=0.0, atol=1e-12)


def _first_touch_array_form(previous, current, triangles, tri, vertex, p0, p1, reach):
    """The earliest touching coplanarity time per pair (inf: none) and the start height, as collider_ccd computed
    them with arrays before the kernel (geometry.coplanarity_times and mesh.closest_points_on_triangles)."""
    from solver_server.collision.mesh import closest_points_on_triangles
    from solver_server.solvers.der.frames import cross3

    corners0, corners1 = previous[triangles], current[triangles]
    a0, b0, c0 = corners0[tri, 0], corners0[tri, 1], corners0[tri, 2]
    a1, b1, c1 = corners1[tri, 0], corners1[tri, 1], corners1[tri, 2]
    q0, q1, r = p0[vertex], p1[vertex], reach[vertex]
    height = ((q0 - a0) * cross3(np, b0 - a0, c0 - a0)).sum(axis=1)
    times = coplanarity_times(np, q0, a0, b0, c0, q1 - q0, a1 - a0, b1 - b0, c1 - c0)
    first = np.full(len(tri), np.inf)
    for column in range(3):
        tau = times[:, column]
        valid = (height != 0.0) & ~np.isnan(tau)
        t = np.where(valid, tau, 0.0)[:, None]
        q = q0 + t * (q1 - q0)
        closest, _ = closest_points_on_triangles(q, a0 + t * (a1 - a0), b0 + t * (b1 - b0), c0 + t * (c1 - c0))
        touching = valid & (np.linalg.norm(q - closest, axis=1) <= r)
        first = np.where(touching & (tau < first), tau, first)
    return first, height


def test_the_vertex_mesh_kernel_finds_the_array_forms_earliest_touch():
    """Vertex paths against a moving soup of triangles (collider_ccd.swept_mesh_touches, one kernel over the mesh's
    tree): each vertex's earliest touch equals the least over every triangle of the array form's earliest touching
    time (within rounding), crossing, grazing, resting and far paths alike, and its start height has that
    triangle's sign."""
    from solver_server.collision.mesh import MeshGeometry

    rng = np.random.default_rng(5)
    triangle_count, vertex_count = 300, 2000
    previous = rng.uniform(-0.05, 0.05, size=(3 * triangle_count, 3))
    current = previous + rng.normal(scale=0.003, size=previous.shape)
    triangles = np.arange(3 * triangle_count, dtype=np.int32).reshape(-1, 3)
    geometry = MeshGeometry("Soup", previous, triangles)
    geometry.set_vertices(current)
    pose = geometry.pose(np)
    x0 = rng.uniform(-0.05, 0.05, size=(vertex_count, 3))
    x1 = x0 + rng.normal(scale=0.02, size=x0.shape)
    x1[::7] = x0[::7]                                            # resting vertices
    reach = np.full(vertex_count, 2e-3)
    movable = np.ones(vertex_count, np.int32)
    movable[::11] = 0
    touch, touched = np.empty(vertex_count), np.empty(vertex_count, np.int32)
    height, nearest, gap = np.empty(vertex_count), np.empty((vertex_count, 3)), np.empty(vertex_count)
    launch_split(ccd_kernels.vertex_mesh_first_touch, vertex_count, "cpu", [],
                 [pose.triangles.bvh.id, pose.triangles.index_view, pose.previous_view, pose.current_view,
                  warp_view(x0, wp.vec3d), warp_view(x1, wp.vec3d), warp_view(movable, wp.int32),
                  warp_view(reach, wp.float64), warp_view(touch, wp.float64), warp_view(touched, wp.int32),
                  warp_view(height, wp.float64), warp_view(nearest, wp.vec3d), warp_view(gap, wp.float64)])
    tri = np.repeat(np.arange(triangle_count, dtype=np.int32), vertex_count)
    vertex = np.tile(np.arange(vertex_count, dtype=np.int32), triangle_count)
    first, first_height = _first_touch_array_form(previous, current, np.asarray(geometry.triangles), tri, vertex,
                                                  x0, x1, reach)
    first = np.where(movable[vertex] > 0, first, np.inf).reshape(triangle_count, vertex_count)
    expected = first.min(axis=0)
    hits = np.isfinite(expected)
    assert hits.sum() > 200 and (~hits).sum() > 500
    np.testing.assert_array_equal(touched >= 0, hits)
    np.testing.assert_allclose(touch[hits], expected[hits], rtol=0.0, atol=1e-12)
    chosen = first_height.reshape(triangle_count, vertex_count)[touched[hits], np.nonzero(hits)[0]]
    np.testing.assert_array_equal(np.sign(height[hits]), np.sign(chosen))
    assert np.all(gap[hits] <= reach[hits] * (1 + 1e-9))     # the nearest point at the touch is within reach

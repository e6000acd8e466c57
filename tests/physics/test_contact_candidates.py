"""Candidate lists in place of a tree query per pass (cloth self-contact, mesh colliders): the lists hold every
pair a fresh query would find, so results are the same bit for bit as with a query in every pass, also when
points end beyond the lists' margin (then a mesh query falls back to the tree, or the lists are built again)."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import warp as wp

from solver_server.backend import get_backend
from solver_server.collision import mesh as mesh_module
from solver_server.collision import self_collision as self_collision_module
from solver_server.collision.mesh import EDGE_CONTACT_COUNTS, MeshGeometry
from solver_server.collision import swept_elements
from solver_server.kernels import cuda_layout, warp_view
from solver_server.simulation import Simulation

from .character_scenes import cloth_on_suzanne, suzanne

BACKEND = get_backend("cpu")


def _drape(frames: int):
    """Cloth positions of the first ``frames`` frames of a 24 × 24 self-colliding cloth falling onto the turning
    Suzanne (contact from frame 7 on), and the simulation."""
    scene_dict, drive, *_ = cloth_on_suzanne(resolution=24, frames=12)
    simulation = Simulation(scene_dict, BACKEND)
    positions = [simulation.advance(drive(frame))[1]["Cloth"] for frame in range(2, frames + 2)]
    return np.array(positions), simulation


def test_self_contact_lists_give_the_frames_of_a_query_in_every_pass(monkeypatch):
    listed, simulation = _drape(10)
    surfaces = simulation.groups[0].solver.self_collision
    assert surfaces.candidate_builds > 0
    # a margin of zero builds the lists again whenever a point moved at all: a fresh query for every pass
    monkeypatch.setattr(self_collision_module, "CANDIDATE_MARGIN", 0.0)
    monkeypatch.setattr(self_collision_module, "CANDIDATE_MARGIN_FLOOR", 0.0)
    queried, simulation = _drape(10)
    assert simulation.groups[0].solver.self_collision.candidate_builds > surfaces.candidate_builds
    np.testing.assert_array_equal(listed, queried)


def _head_and_paths(seed: int = 0):
    """Suzanne moving 2 cm over the substep, and 400 points whose paths end near or through its surface."""
    vertices, triangles = suzanne()
    rng = np.random.default_rng(seed)
    surface = vertices[triangles[rng.integers(0, len(triangles), 400)]].mean(axis=1)
    outward = surface - vertices.mean(axis=0)
    outward /= np.linalg.norm(outward, axis=1, keepdims=True)
    start = surface + outward * rng.uniform(0.002, 0.03, (400, 1))
    end = surface - outward * rng.uniform(-0.01, 0.01, (400, 1))
    return vertices, triangles, start, end


def _resolved(geometry, start, end, reach):
    return [np.asarray(array) for array in geometry.resolve(np, start, end, reach)]


@pytest.fixture(params=["cpu layout", "cuda layout"])
def layout(request):
    """The record / build / use decision in one CPU thread (``paths_sequential``) and in CUDA's three kernels."""
    with cuda_layout() if request.param == "cuda layout" else contextlib.nullcontext():
        yield request.param


def test_mesh_contact_lists_match_a_fresh_query_also_beyond_the_margin(layout):
    vertices, triangles, start, end = _head_and_paths()
    reach = np.full(len(start), 0.004)

    def posed():
        geometry = MeshGeometry("Suzanne", vertices, triangles)
        geometry.set_vertices(vertices + np.array([0.02, 0.0, 0.0]))
        return geometry

    fresh = _resolved(posed(), start, end, reach)
    repeated = posed()
    first = _resolved(repeated, start, end, reach)                 # seen once: no lists yet
    assert repeated.pose(np).candidate_builds == 0
    listed = _resolved(repeated, start, end, reach)                 # seen again: lists built, then used
    assert repeated.pose(np).candidate_builds == 1
    margin = mesh_module.CANDIDATE_MARGIN * repeated.margin
    moved = end.copy()
    moved[::20] += 3.0 * margin                                     # 5 % beyond the margin: these query the tree
    beyond = _resolved(repeated, start, moved, reach)
    assert repeated.pose(np).candidate_builds == 1
    for got, want in zip(first, fresh):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(listed, fresh):
        np.testing.assert_array_equal(got, want)
    for got, want in zip(beyond, _resolved(posed(), start, moved, reach)):
        np.testing.assert_array_equal(got, want)
    assert fresh[4].sum() > 0 and fresh[1].max() > 0               # the paths cross and touch the head


def test_a_mesh_query_without_lists_matches_one_with_them_and_builds_none(layout):
    vertices, triangles, start, end = _head_and_paths(seed=1)
    reach = np.full(len(start), 0.004)
    geometry = MeshGeometry("Suzanne", vertices, triangles)
    geometry.set_vertices(vertices + np.array([0.02, 0.0, 0.0]))
    unlisted = [[np.asarray(array) for array in geometry.resolve(np, start, end, reach, lists=None)]
                for _ in range(3)]
    assert geometry.pose(np).candidate_builds == 0
    listed = [_resolved(geometry, start, end, reach) for _ in range(3)]
    assert geometry.pose(np).candidate_builds == 1
    for got, want in zip(unlisted + listed[1:], [listed[0]] * 5):
        for got_array, want_array in zip(got, want):
            np.testing.assert_array_equal(got_array, want_array)
    assert listed[0][4].sum() > 0


@pytest.mark.parametrize("shift", [0.0, 3.0])
def test_mesh_edge_contact_lists_match_a_fresh_query(shift, layout):
    vertices, triangles, start, end = _head_and_paths(seed=1)
    edges = np.ascontiguousarray(np.stack([np.arange(0, 399), np.arange(1, 400)], axis=1), np.int32)
    reach = np.full(len(start), 0.004)
    inverse_mass = np.ones(len(start))

    def corrections(geometry, ends):
        correction, count = np.zeros((len(start), 3)), np.zeros(len(start), np.int32)
        contacts, crossed = np.zeros(EDGE_CONTACT_COUNTS, np.int32), np.zeros(len(start), np.int32)
        geometry.add_edge_corrections(np, np.ascontiguousarray(start), np.ascontiguousarray(ends), edge_view,
                                      reach, inverse_mass, correction, count, contacts, crossed)
        return correction, count, contacts, crossed

    edge_view = warp_view(edges, wp.int32)
    geometry = MeshGeometry("Suzanne", vertices, triangles)
    geometry.set_vertices(vertices + np.array([0.0, 0.02, 0.0]))
    corrections(geometry, end)
    margin = mesh_module.CANDIDATE_MARGIN * geometry.margin
    moved = end.copy()
    moved[::25] += shift * margin
    listed = corrections(geometry, end)
    listed_moved = corrections(geometry, moved)
    assert geometry.pose(np).candidate_builds == 1
    fresh = MeshGeometry("Suzanne", vertices, triangles)
    fresh.set_vertices(vertices + np.array([0.0, 0.02, 0.0]))
    for got, want in zip(listed, corrections(fresh, end)):
        np.testing.assert_array_equal(got, want)
    other = MeshGeometry("Suzanne", vertices, triangles)
    other.set_vertices(vertices + np.array([0.0, 0.02, 0.0]))
    for got, want in zip(listed_moved, corrections(other, moved)):
        np.testing.assert_array_equal(got, want)
    assert listed[2][0] > 0                                         # edges touch the head


def test_a_list_row_that_overflows_queries_the_tree(monkeypatch, layout):
    """Rows one candidate wide: almost every point's row overflows, the query falls back to the tree for those
    points (no row grows inside a substep) and the results stay those of a fresh query."""
    monkeypatch.setattr(swept_elements, "CANDIDATE_CAPACITY", 1)
    vertices, triangles, start, end = _head_and_paths(seed=2)
    reach = np.full(len(start), 0.004)

    def posed():
        geometry = MeshGeometry("Suzanne", vertices, triangles)
        geometry.set_vertices(vertices + np.array([0.02, 0.0, 0.0]))
        return geometry

    repeated = posed()
    _resolved(repeated, start, end, reach)
    listed = _resolved(repeated, start, end, reach)
    entry = next(iter(repeated.pose(np)._path_lists.values()))
    assert repeated.pose(np).candidate_builds == 1 and entry.lists.found.shape[1] == 1
    assert (entry.lists.counts > 1).sum() > len(start) // 2
    for got, want in zip(listed, _resolved(posed(), start, end, reach)):
        np.testing.assert_array_equal(got, want)



def test_self_contact_searches_split_over_cpu_threads_give_one_launchs_lists(monkeypatch):
    """The searches that fill the self-contact lists run over the CPU's cores in contiguous ranges: the lists, and
    with them the frames, are the ones a single launch gives."""
    monkeypatch.setattr(self_collision_module, "QUERY_MIN_ITEMS", 16)
    runs = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("TANGLE_KERNEL_THREADS", threads)
        frames, simulation = _drape(9)
        surfaces = simulation.groups[0].solver.self_collision
        runs.append((frames, surfaces.point_candidates.counts.copy(), surfaces.edge_candidates.counts.copy(),
                     surfaces.edge_candidates.found.copy()))
    assert runs[0][2].sum() > 0                                       # self-contact pairs were listed
    for other in runs[1:]:
        for got, want in zip(other, runs[0]):
            np.testing.assert_array_equal(got, want)


def test_mesh_searches_split_over_cpu_threads_give_one_launchs_lists(monkeypatch):
    """The same for a mesh collider's lists of point paths and point edges (and the edges found through it)."""
    monkeypatch.setattr(mesh_module, "QUERY_MIN_ITEMS", 16)
    vertices, triangles, start, end = _head_and_paths(seed=3)
    edges = warp_view(np.ascontiguousarray(np.stack([np.arange(0, 399), np.arange(1, 400)], axis=1), np.int32),
                      wp.int32)
    reach = np.full(len(start), 0.004)
    runs = []
    for threads in ("1", "2", "3"):
        monkeypatch.setenv("TANGLE_KERNEL_THREADS", threads)
        geometry = MeshGeometry("Suzanne", vertices, triangles)
        geometry.set_vertices(vertices + np.array([0.02, 0.0, 0.0]))
        for _ in range(2):                                             # seen once, then lists built
            resolved = _resolved(geometry, start, end, reach)
            correction, count = np.zeros((len(start), 3)), np.zeros(len(start), np.int32)
            contacts, crossed = np.zeros(EDGE_CONTACT_COUNTS, np.int32), np.zeros(len(start), np.int32)
            geometry.add_edge_corrections(np, start, end, edges, reach, np.ones(len(start)), correction, count,
                                          contacts, crossed)
        lists = [array.copy() for entry in geometry.pose(np)._path_lists.values()
                 for array in (entry.lists.found, entry.lists.counts, entry.through)]
        runs.append((*resolved, correction, count, contacts, *lists))
    assert geometry.pose(np).candidate_builds == 2 and runs[0][-2].sum() > 0
    for other in runs[1:]:
        assert len(other) == len(runs[0])
        for got, want in zip(other, runs[0]):
            np.testing.assert_array_equal(got, want)

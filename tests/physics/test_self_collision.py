"""Cloth self-collision: a cloth folding onto itself does not pass through itself."""

from __future__ import annotations

import numpy as np

from solver_server.backend import get_backend
from solver_server.collision.mesh import closest_points_on_triangles
from solver_server.simulation import Simulation

from .scenes import cloth_object, grid, run, scene

BACKEND = get_backend("cpu")
THICKNESS = 0.005


def _folding_cloth(self_collision: bool):
    """A 0.6 × 0.3 m cloth: its first half lies on the floor, the second half is raised 60° and
    leans over the first half, so gravity folds it down onto itself."""
    vertices, triangles, index = grid(25, 13, size=1.0, height=0.0)
    vertices[:, 0] *= 0.6
    vertices[:, 1] *= 0.3
    hinge = 0.3
    lifted = vertices[:, 0] > hinge
    angle = np.radians(120)  # past vertical: leans back over the lying half
    run_length = vertices[lifted, 0] - hinge
    vertices[lifted, 0] = hinge + run_length * np.cos(angle)
    vertices[lifted, 2] = run_length * np.sin(angle)
    vertices[:, 2] += THICKNESS
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane"}}
    cloth = cloth_object(vertices, triangles, params={"thickness": THICKNESS, "self_collision": self_collision,
                                                       "friction": 0.5, "stretch_stiffness": 500.0})
    return Simulation(scene([cloth, floor], frame_end=30, substeps=6), BACKEND), vertices, triangles, lifted


def _min_vertex_triangle_distance(positions, triangles):
    """Smallest distance from a vertex to a triangle that does not contain it and is not adjacent."""
    best = np.inf
    for start in range(0, len(triangles), 64):
        block = triangles[start:start + 64]
        for tri in block:
            a, b, c = positions[tri]
            others = np.setdiff1d(np.arange(len(positions)), tri)
            near = others[np.linalg.norm(positions[others] - (a + b + c) / 3, axis=1) < 0.1]
            if len(near) == 0:
                continue
            closest, bary = closest_points_on_triangles(positions[near], *(np.broadcast_to(x, (len(near), 3))
                                                                           for x in (a, b, c)))
            interior = (bary > 1e-6).all(axis=1)  # ignore contacts with edges/corners shared through the fold
            if np.any(interior):
                best = min(best, np.linalg.norm(positions[near][interior] - closest[interior], axis=1).min())
    return best


def test_folded_cloth_keeps_its_layers_apart():
    sim, vertices, triangles, lifted = _folding_cloth(self_collision=True)
    frames = run(sim)
    final = frames[-1][1]["Cloth"].astype(float)
    far = lifted & (vertices[:, 0] < 0.25) & (vertices[:, 2] > 0.1)  # tip region of the folding half
    assert final[far, 2].max() < 0.05                                   # it folded down
    # the folded half lies on top of the lying half: at least one layer thickness above the floor layer
    assert final[far, 2].min() > 2 * THICKNESS - 1e-3
    assert frames[-1][2]["contacts"] > 0
    assert _min_vertex_triangle_distance(final, triangles) > 0.5 * THICKNESS


def test_without_self_collision_the_layers_interpenetrate():
    sim, vertices, triangles, lifted = _folding_cloth(self_collision=False)
    final = run(sim)[-1][1]["Cloth"].astype(float)
    far = lifted & (vertices[:, 0] < 0.25) & (vertices[:, 2] > 0.1)
    assert final[far, 2].min() < 1.5 * THICKNESS  # sinks to the floor, through the lying half


def test_cloth_drapes_over_a_soft_body_instead_of_passing_through():
    """Different PD objects touch: a cloth dropped on a soft block resting on the floor stays on top of it."""
    from .scenes import box_tets

    block_vertices, tets, block_triangles, _ = box_tets((3, 3, 3), (0.3, 0.3, 0.3), origin=(0.35, 0.35, 0.0))
    block = {"id": "Jelly", "kind": "softbody", "vertices": block_vertices, "triangles": block_triangles,
             "tets": tets, "params": {"young_modulus": 2e5, "thickness": THICKNESS}}
    vertices, triangles, _ = grid(15, 15, size=1.0, height=0.4)
    cloth = cloth_object(vertices, triangles, params={"thickness": THICKNESS})
    floor = {"id": "Floor", "kind": "collider", "shape": {"type": "plane"}}
    frames = run(Simulation(scene([block, cloth, floor], frame_end=16), BACKEND))
    final_cloth = frames[-1][1]["Cloth"].astype(float)
    block_top = frames[-1][1]["Jelly"][:, 2].max()
    over_block = (np.abs(vertices[:, 0] - 0.5) < 0.1) & (np.abs(vertices[:, 1] - 0.5) < 0.1)
    assert block_top > 0.25                                        # the block still stands
    assert final_cloth[over_block, 2].min() > block_top + THICKNESS  # the cloth lies on it
    assert final_cloth[:, 2].min() < 0.1                            # and its edges hang down beside it


def _two_sheets(backend):
    """Two 9 × 9 sheets 1 cm apart, one above the other (self-contact between objects); returns the PD
    group's SurfaceContact, its particle count, and the start positions (n, 3) on the backend."""
    lower, triangles, _ = grid(9, 9, size=0.4, height=0.0)
    upper = lower + [0.0, 0.0, 0.01]
    sheets = [cloth_object(lower, triangles, object_id="Lower", params={"thickness": 0.002}),
              cloth_object(upper, triangles, object_id="Upper", params={"thickness": 0.002})]
    simulation = Simulation(scene(sheets, frame_end=2), backend)
    group = simulation.groups[0]
    return group.solver.self_collision, group.state.positions


def test_impact_zone_labels_are_the_connected_components():
    surfaces, _ = _two_sheets(BACKEND)
    pairs = np.array([[0, 1, 2, 3], [3, 10, 11, 12], [40, 41, 42, 43], [150, 151, 152, 153],
                      [153, 41, 160, 161]], np.int32)
    label = surfaces.zone_labels(np, pairs)
    assert set(label[[0, 1, 2, 3, 10, 11, 12]]) == {0}
    assert set(label[[40, 41, 42, 43, 150, 151, 152, 153, 160, 161]]) == {40}
    untouched = np.setdiff1d(np.arange(len(label)), pairs.ravel())
    np.testing.assert_array_equal(label[untouched], untouched)


def test_impact_zones_undo_a_sheet_passing_through_another_without_a_host_copy():
    """The upper sheet driven 5 cm down through the lower one in one substep, one Jacobi pass: the pass
    leaves crossed pairs and the impact zones resolve them, all on the strict backend inside the download
    guard (the zones used to be joined on the host)."""
    from solver_server.emulated_device import emulated_cuda_backend, substep_guard

    backend = emulated_cuda_backend()
    surfaces, start = _two_sheets(backend)
    surfaces.iterations = 1
    xp = backend.xp
    count = start.shape[0] // 2
    moved = xp.concatenate([start[:count], start[count:] - xp.asarray(np.array([0.0, 0.0, 0.05]))])
    calls = []
    join = surfaces.zone_labels
    surfaces.zone_labels = lambda xp_, pairs: calls.append(1) or join(xp_, pairs)
    with substep_guard("impact-zone test"):
        positions, _ = surfaces.resolve(xp, moved, start)
        left = surfaces.crossed_since(xp, positions, start)
    assert calls, "the Jacobi pass resolved everything: the impact zones were not exercised"
    assert left == 0 and surfaces.left == 0
    heights = backend.to_host(positions)[:, 2]
    assert np.all(heights[count:] > heights[:count].max() - 1e-9)    # the upper sheet stays above the lower


def _one_cloth_of_two_layers(backend):
    """The sheets of ``_two_sheets`` as the two layers of one cloth with self-collision (a fold resting on itself)."""
    lower, triangles, _ = grid(9, 9, size=0.4, height=0.0)
    layers = np.concatenate([lower, lower + [0.0, 0.0, 0.01]])
    both = np.concatenate([triangles, triangles + len(lower)])
    cloth = cloth_object(layers, both, object_id="Folded", params={"thickness": 0.002, "self_collision": True})
    group = Simulation(scene([cloth], frame_end=2), backend).groups[0]
    return group.solver.self_collision, group.state.positions


def _passes_to_separate(gap: float, layers=_two_sheets) -> tuple[int, float]:
    """The upper of ``layers`` (``_two_sheets``: two objects) lowered to ``gap`` [m] above the lower (from 1 cm at the
    substep start): the Jacobi passes a resolve of up to 6 runs and the smallest gap between the sheets afterwards
    [m]."""
    surfaces, start = layers(BACKEND)
    surfaces.iterations = 6
    count = start.shape[0] // 2
    moved = np.concatenate([start[:count], start[count:] - [0.0, 0.0, 0.01 - gap]])
    passes = []
    one_pass = surfaces._pass
    surfaces._pass = lambda *args, **kwargs: passes.append(1) or one_pass(*args, **kwargs)
    positions, _ = surfaces.resolve(np, moved, start)
    return len(passes), float((positions[count:, 2] - positions[:count, 2]).min())


def test_passes_stop_once_layers_rest_within_the_tolerance_of_their_separation():
    """Two sheets of 2 mm thickness (4 mm separation): a sheet resting 2 % inside the separation is corrected in
    one pass (another would shave less than SETTLED_ERROR of it); one pressed a fifth of the way in takes more
    passes (each Jacobi pass takes back about half of what is left) and ends within that tolerance of the
    separation; neither runs the 6 passes allowed."""
    from solver_server.collision.self_collision import SETTLED_ERROR

    separation = 0.004
    resting, gap = _passes_to_separate(0.98 * separation)
    assert resting == 1
    assert gap >= (1.0 - SETTLED_ERROR) * separation
    pressed, gap = _passes_to_separate(0.8 * separation)
    assert 2 <= pressed < 6
    assert gap >= (1.0 - SETTLED_ERROR) * separation


def test_the_folds_of_one_cloth_rest_within_a_wider_tolerance_than_a_body_on_a_cloth():
    """The same two layers as one cloth's fold: a layer resting a tenth of the way inside its separation is left
    after one pass, where between two objects (a body weighing on a cloth) passes go on until less than
    SETTLED_ERROR is left; one pressed two fifths of the way in still takes more passes and ends within
    SETTLED_ERROR_WITHIN of the separation."""
    from solver_server.collision.self_collision import SETTLED_ERROR, SETTLED_ERROR_WITHIN

    separation = 0.004
    assert SETTLED_ERROR < 0.1 < SETTLED_ERROR_WITHIN < 0.4
    within, gap = _passes_to_separate(0.9 * separation, _one_cloth_of_two_layers)
    assert within == 1
    assert gap >= (1.0 - SETTLED_ERROR_WITHIN) * separation
    between, _ = _passes_to_separate(0.9 * separation)
    assert between >= 2
    pressed, gap = _passes_to_separate(0.6 * separation, _one_cloth_of_two_layers)
    assert 2 <= pressed < 6
    assert gap >= (1.0 - SETTLED_ERROR_WITHIN) * separation

"""Seed 000 §4.2 contact scenes and the Coulomb-law invariants at convergence."""

import numpy as np
import pytest

from solver_server.collision.primitives import PRIMITIVES
from solver_server.solvers.der import contact_detection as detection_module
from solver_server.solvers.der import integrator as integrator_module
from solver_server.solvers.der.geometry import segment_closest_points
from solver_server.solvers.der.model import DerMaterial
from solver_server.solvers.der.settings import ContactSettings, NewtonSettings

from .helpers import make, straight

SETTINGS = NewtonSettings(max_iterations=50, tolerance=1e-5)


class Pipe:
    """Infinite cylinder collider: axis through `point` along unit `axis`, radius [m]."""

    def __init__(self, point, axis, radius, friction):
        self.point, self.axis, self.radius, self.friction = np.asarray(point), np.asarray(axis), radius, friction
        self.thickness = 0.0

    def signed_distance(self, xp, points):
        relative = points - self.point
        radial = relative - (relative @ self.axis)[:, None] * self.axis
        length = np.linalg.norm(radial, axis=1)
        return length - self.radius, radial / length[:, None]


def strand_distances(model, positions):
    """Distance between every pair of edges of different strands and the pair's contact distance."""
    edges = np.arange(model.n_edges)
    a, b = np.meshgrid(edges, edges, indexing="ij")
    different = model.edge_strand[a] != model.edge_strand[b]
    a, b = a[different], b[different]
    va, vb = model.edge_vertex[a], model.edge_vertex[b]
    _, _, distance = segment_closest_points(np, positions[va], positions[va + 1], positions[vb], positions[vb + 1])
    return distance, model.edge_radius[a] + model.edge_radius[b]


def check_invariants(solver, state, colliders=()):
    """Coulomb cone, pair momentum balance and penetration after a converged step."""
    contacts = solver.last_contacts
    model = solver.model
    smallest_radius = model.edge_radius.min()
    for collider in colliders:
        distance, _ = collider.signed_distance(np, state.positions)
        assert np.all(distance >= 0.9 * smallest_radius)
    if contacts is not None and contacts.set.count:
        impulse = contacts.applied
        normal_part = np.einsum("nc,nc->n", impulse, contacts.set.normal)
        tangential = np.linalg.norm(impulse - normal_part[:, None] * contacts.set.normal, axis=1)
        assert np.all(tangential <= contacts.set.mu * normal_part + 1e-9)
        assert np.all(normal_part >= -1e-15)
        edge = contacts.set.kind_edge
        if edge.any():
            per_slot = contacts.set.weights[edge][:, :, None] * impulse[edge][:, None, :]
            total = per_slot.sum(axis=(0, 1))                   # linear momentum given by pair contacts
            assert np.linalg.norm(total) <= 1e-12 * max(1e-300, np.abs(per_slot).sum())
    if model.n_strands > 1:
        distance, contact_distance = strand_distances(model, state.positions)
        assert np.all(distance >= contact_distance - 0.1 * smallest_radius)


def simulate(solver, state, steps, dt, colliders=()):
    """Run `steps` steps, checking the invariants after every step whose global/local loop converged
    (fewer iterations than N_max).  Returns the final state, per-step stats and the converged count."""
    stats = []
    converged = 0
    for _ in range(steps):
        out = state.copy()
        stats.append(solver.step(state, out, None, None, dt))
        state = out
        if stats[-1]["iterations"] < solver.integrator.settings.max_iterations:
            converged += 1
            check_invariants(solver, state, colliders)
    return state, stats, converged


LOCAL_SOLVERS = pytest.mark.parametrize("local_solver", ["jacobi", "gauss_seidel"])


@pytest.mark.parametrize("detection, local_solver", [(None, "jacobi"), (1e-4, "jacobi"), (1e-4, "gauss_seidel")],
                         ids=["seed_detection", "detection_after_free_motion", "gauss_seidel"])
@pytest.mark.parametrize("mu", [0.6, 0.0])
def test_strand_dropped_across_a_strand_fixed_at_both_ends(mu, detection, local_solver):
    """Seed Fig. 4-8, on a 20° tilted support strand: with μ = 0.6 (> tan 20°) the dropped strand stays
    where it landed; with μ = 0 it slides down along the support.  Contacts detected after the first
    iteration (seed) or once the free motion has converged (scene default) give the same physics, and so
    does the Gauss–Seidel contact solve (the scene default)."""
    angle = np.radians(20.0)
    axis = np.array([np.cos(angle), 0.0, np.sin(angle)])
    support = straight(11, 0.2, direction=axis, origin=-0.1 * axis)
    dropped = straight(21, 0.1, direction=(0.0, 1.0, 0.0), origin=(0.0, -0.05, 0.003))
    radius = np.concatenate((np.full(11, 1e-3), np.full(21, 1e-4)))
    material = DerMaterial(radius=radius, young_modulus=1e7, shear_modulus=4e6, density=1300.0, damping=1.0)
    settings = NewtonSettings(max_iterations=50, tolerance=1e-5, contact_detection_tolerance=detection)
    model, solver, state = make(np.concatenate((support, dropped)), [0, 11, 32], material, settings,
                                ContactSettings(friction=mu, local_solver=local_solver), fixed_vertices=[0, 1, 9, 10],
                                fixed_edges=[0, 9])
    state, stats, converged = simulate(solver, state, steps=50, dt=4e-3)
    assert max(s["contacts"] for s in stats) > 0
    assert converged >= 5
    downhill = -state.positions[11:, 0].mean()           # horizontal travel of the dropped strand
    drop = state.positions[11:, 2].mean()
    assert drop < -0.01                                   # it fell onto the support and drapes over it
    if mu > 0:
        assert abs(downhill) < 2e-3
    else:
        assert downhill > 0.02


@LOCAL_SOLVERS
def test_strand_on_a_tilted_pipe_slides_faster_for_smaller_friction(local_solver):
    """Seed Fig. 4-9: a strand dropped across a pipe tilted by 30°; lower μ slides further downhill."""
    angle = np.radians(30.0)
    axis = np.array([np.cos(angle), 0.0, np.sin(angle)])
    travel = {}
    for mu in (0.1, 0.4):
        pipe = Pipe([0.0, 0.0, 0.0], axis, radius=0.01, friction=mu)
        strand = straight(21, 0.1, direction=(0.0, 1.0, 0.0), origin=(0.0, -0.05, 0.0102))
        material = DerMaterial(radius=1e-4, young_modulus=1e7, shear_modulus=4e6, density=1300.0, damping=1.0)
        model, solver, state = make(strand, [0, 21], material, SETTINGS,
                                    ContactSettings(self_collision=False, local_solver=local_solver),
                                    colliders=[pipe], fixed_vertices=[], fixed_edges=[])
        state, stats, converged = simulate(solver, state, steps=30, dt=4e-3, colliders=[pipe])
        assert max(s["collider_contacts"] for s in stats) > 3          # it drapes over the pipe
        assert converged >= 5
        travel[mu] = -state.positions[:, 0].mean()
    assert travel[0.1] > 2.0 * travel[0.4] > 0.0


@LOCAL_SOLVERS
def test_bundle_dropped_on_the_ground_comes_to_rest_without_penetration(local_solver):
    """Seed Fig. 4-4: a two-layer bundle of strands falls on the ground and rests on it and on itself."""
    radius = 1e-4
    ground = PRIMITIVES["plane"]({"normal": [0.0, 0.0, 1.0], "offset": 0.0}, np.eye(4))
    direction = np.array([np.cos(np.radians(5.0)), 0.0, -np.sin(np.radians(5.0))])
    layout = [(-1.25, 0.0), (1.25, 0.0), (0.0, 2.3), (2.5, 2.3)]          # (y, z) in radii: upper layer in the grooves
    strands = [straight(11, 0.05, direction=direction, origin=(0.0, y * radius, 0.006 + z * radius)) for y, z in layout]
    material = DerMaterial(radius=radius, young_modulus=1e8, shear_modulus=4e7, density=1300.0, damping=5.0)
    model, solver, state = make(np.concatenate(strands), np.arange(5) * 11, material, SETTINGS,
                                ContactSettings(friction=0.3, local_solver=local_solver), colliders=[ground],
                                fixed_vertices=[], fixed_edges=[])
    state, stats, converged = simulate(solver, state, steps=30, dt=4e-3, colliders=[ground])
    assert converged >= 3
    assert max(s["collider_contacts"] for s in stats) >= 11            # a whole strand lies on the ground
    assert max(s["active_edge_contacts"] for s in stats) > 0             # strands press on strands
    assert np.abs(state.velocities).max() < 0.02                          # at rest (m/s)
    distance, contact_distance = strand_distances(model, state.positions)
    assert np.all(distance >= contact_distance - 0.1 * radius)
    assert state.positions[:, 2].min() >= 0.9 * radius


@pytest.mark.parametrize("local_solver", ["jacobi", "gauss_seidel"])
def test_a_strand_turning_onto_a_parallel_strand_stops_at_its_tip(monkeypatch, local_solver):
    """A free strand lying along a fixed one at the contact distance swings its tip into it within one step.
    The closest points of parallel edges pin only the edges' first ends; the far-end contacts
    (ContactDetector._far_end_contacts) stop the tip; without them (PARALLEL_SINE = 0) and without the end-of-step
    re-linearization (which can catch it too) it passes 0.5 radius into the other strand."""
    radius = 1e-4
    material = DerMaterial(radius=radius, young_modulus=1e8, shear_modulus=4e7, density=1300.0, damping=0.0)

    def deepest(parallel_sine, relinearizations=integrator_module.MAX_RELINEARIZATIONS):
        monkeypatch.setattr(detection_module, "PARALLEL_SINE", parallel_sine)
        monkeypatch.setattr(integrator_module, "MAX_RELINEARIZATIONS", relinearizations)
        fixed_strand = straight(3, 0.01)
        free_strand = straight(3, 0.01, origin=(0.0, 2.02 * radius, 0.0))
        model, solver, state = make(np.concatenate((fixed_strand, free_strand)), np.array([0, 3, 6]), material,
                                    NewtonSettings(max_iterations=50, tolerance=1e-5, quasi_newton_matrix="gauss_newton",
                                                   refresh_interval=4),
                                    ContactSettings(friction=0.0, local_solver=local_solver),
                                    fixed_vertices=[0, 1, 2], fixed_edges=[0, 1])
        dt = 1e-3
        spin = 3.0 * radius / (dt * 0.01)            # the tip would move 3 radii towards the other strand
        state.velocities[3:6, 1] = -spin * free_strand[:, 0]
        out = state.copy()
        stats = solver.step(state, out, None, None, dt, gravity=np.zeros(3))
        distance, contact_distance = strand_distances(model, out.positions)
        return float(np.max(contact_distance - distance)) / radius, stats

    without, _ = deepest(0.0, relinearizations=0)
    assert without > 0.5
    penetration, stats = deepest(0.1)
    assert stats["iterations"] < 50 and stats["contacts"] >= 3
    assert penetration <= 0.1

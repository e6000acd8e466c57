"""Seed 000 §4.2 contact scenes and the Coulomb-law invariants at convergence."""

import numpy as np
import pytest

from solver_server.collision.primitives import PRIMITIVES
from solver_server.solvers.der.contact import ContactSettings
from solver_server.solvers.der.geometry import segment_closest_points
from solver_server.solvers.der.integrator import NewtonSettings
from solver_server.solvers.der.model import DerMaterial

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


def check_invariants(solver, state):
    """Coulomb cone, pair momentum balance and penetration after a converged step."""
    contacts = solver.last_contacts
    model = solver.model
    if contacts is not None and contacts.vertices.shape[0]:
        impulse = contacts.applied
        normal_part = np.einsum("nc,nc->n", impulse, contacts.normal)
        tangential = np.linalg.norm(impulse - normal_part[:, None] * contacts.normal, axis=1)
        assert np.all(tangential <= contacts.mu * normal_part + 1e-9)
        assert np.all(normal_part >= -1e-15)
        edge = contacts.kind_edge
        if edge.any():
            per_slot = contacts.weights[edge][:, :, None] * impulse[edge][:, None, :]
            total = per_slot.sum(axis=(0, 1))                   # linear momentum given by pair contacts
            assert np.linalg.norm(total) <= 1e-12 * max(1e-300, np.abs(per_slot).sum())
    if model.n_strands > 1:
        distance, contact_distance = strand_distances(model, state.positions)
        smallest_radius = model.edge_radius.min()
        assert np.all(distance >= contact_distance - 0.1 * smallest_radius)


def simulate(solver, state, steps, dt, check=True):
    stats = []
    for _ in range(steps):
        out = state.copy()
        stats.append(solver.step(state, out, None, None, dt))
        state = out
        if check:
            check_invariants(solver, state)
    return state, stats


@pytest.mark.parametrize("mu", [0.6, 0.0])
def test_strand_dropped_across_a_strand_fixed_at_both_ends(mu):
    """Seed Fig. 4-8, on a 20° tilted support strand: with μ = 0.6 (> tan 20°) the dropped strand stays
    where it landed; with μ = 0 it slides down along the support."""
    angle = np.radians(20.0)
    axis = np.array([np.cos(angle), 0.0, np.sin(angle)])
    support = straight(11, 0.2, direction=axis, origin=-0.1 * axis)
    dropped = straight(21, 0.1, direction=(0.0, 1.0, 0.0), origin=(0.0, -0.05, 0.003))
    radius = np.concatenate((np.full(11, 1e-3), np.full(21, 1e-4)))
    material = DerMaterial(radius=radius, young_modulus=1e7, shear_modulus=4e6, density=1300.0, damping=1.0)
    model, solver, state = make(np.concatenate((support, dropped)), [0, 11, 32], material, SETTINGS,
                                ContactSettings(friction=mu), fixed_vertices=[0, 1, 9, 10], fixed_edges=[0, 9])
    state, stats = simulate(solver, state, steps=50, dt=4e-3)
    assert max(s["contacts"] for s in stats) > 0
    downhill = -state.positions[11:, 0].mean()           # horizontal travel of the dropped strand
    drop = state.positions[11:, 2].mean()
    assert drop < -0.01                                   # it fell onto the support and drapes over it
    if mu > 0:
        assert abs(downhill) < 2e-3
    else:
        assert downhill > 0.02

"""Shared set-up for the DER physics tests."""

import numpy as np

from solver_server.backend import get_backend
from solver_server.solvers.der.settings import ContactSettings
from solver_server.solvers.der.energy import Configuration, elastic_energy
from solver_server.solvers.der.settings import NewtonSettings
from solver_server.solvers.der.model import DerMaterial, build_model
from solver_server.solvers.der.solver import DerSolver
from solver_server.solvers.der.state import rest_state
from solver_server.solvers.der.wind import StrandWind, vertex_tangents
from solver_server.solvers.wind import WindSettings

BACKEND = get_backend("cpu")
GRAVITY = np.array([0.0, 0.0, -9.81])


def make(points, offsets, material, settings=None, contact=None, colliders=(), **fixed):
    model = build_model(np, points, offsets, material)
    contact = contact or ContactSettings(self_collision=False)
    solver = DerSolver(model, BACKEND, settings or NewtonSettings(), colliders=colliders, contact=contact, **fixed)
    return model, solver, rest_state(np, model)


def run(solver, state, steps, dt, gravity=GRAVITY, control=None, every=None):
    """Advance `steps` steps; returns the final state and the list of per-step stats."""
    history = []
    for index in range(steps):
        out = state.copy()
        history.append(solver.step(state, out, control, None, dt, gravity=gravity))
        state = out
        if every is not None:
            every(index, state)
    return state, history


def total_energy(model, state, gravity=GRAVITY):
    """Kinetic + gravitational + elastic energy [J]."""
    config = Configuration(state.positions, state.theta, state.reference_u, state.reference_twist)
    kinetic = 0.5 * np.sum(model.vertex_mass[:, None] * state.velocities ** 2) \
        + 0.5 * np.sum(model.edge_inertia * state.theta_velocity ** 2)
    potential = -np.sum(model.vertex_mass[:, None] * state.positions * gravity)
    return kinetic + potential + elastic_energy(np, model, config)


def straight(n, length, direction=(1.0, 0.0, 0.0), origin=(0.0, 0.0, 0.0)):
    return np.asarray(origin) + np.linspace(0.0, length, n)[:, None] * np.asarray(direction)


def clamped_rod_in_wind(material, count, length, direction=(0.0, 0.0, -1.0), strength=9.81):
    """A straight rod of ``count`` points along +x, clamped at its first edge, at static equilibrium in a
    uniform wind (``strength`` [m/s²] along ``direction``, no gravity), reached by huge implicit steps;
    (model, state)."""
    model, solver, state = make(straight(count, length), [0, count], material,
                                NewtonSettings(max_iterations=300, tolerance=1e-12))
    wind = StrandWind.of_objects(np, [WindSettings(direction=tuple(direction), strength=strength)], [count])
    for _ in range(6):
        out = state.copy()
        solver.step(state, out, None, None, 10.0, gravity=np.zeros(3),
                    acceleration=wind.acceleration(
                        vertex_tangents(np, state.tangents, model.edge_vertex, model.n_vertices), 0.0))
        state = out
    return model, state


HAIR = DerMaterial(radius=1e-4, young_modulus=3e9, shear_modulus=1e9, density=1300.0)


def dof_strand(model):
    """(n_dofs,) int64: the strand of every DOF of a DER model (its vertices' 3 and its edges' 1)."""
    owner = np.zeros(model.n_dofs, dtype=np.int64)
    owner[model.position_dofs] = model.vertex_strand[:, None]
    owner[model.edge_dof] = model.edge_strand
    return owner

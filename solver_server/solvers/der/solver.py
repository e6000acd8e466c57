"""DER hair solver (Newton-style interface): step(state_in, state_out, control, contacts, dt) -> stats.

Kinematic DOFs: by default the first two vertices and the first twist angle of every strand are clamped
(the root vertex and root + direction · |ē^0|), so hair does not swivel at the scalp.  The caller moves
them every substep through `DerControl` (root positions and directions, or explicit vertex targets).  A
fixed twist angle keeps its value unless `DerControl.edge_directors` says where the edge's material
director must point: then it turns with the surface the strand grows from (a head turning about the hair's
own axis turns the curls at its crown too).
"""

from __future__ import annotations

import numpy as np

from .contact import ContactSolver
from .frames import normalize_rows, row_lengths, shortest_turn, time_parallel_reference
from .jet import cross3
from .integrator import ImplicitEulerSolver, SoftPins
from .model import DerModel
from .settings import ContactSettings, NewtonSettings
from .state import DerControl, DerState


def clamped_root_vertices(xp, model: DerModel):
    """Indices (2S,) of the first two vertices of every strand, ordered [roots..., second vertices...]."""
    first = model.strand_offsets[:-1]
    return xp.concatenate((first, first + 1))


class DerSolver:
    def __init__(self, model: DerModel, backend, settings: NewtonSettings | None = None,
                 fixed_vertices=None, fixed_edges=None, colliders=(), contact: ContactSettings | None = None,
                 soft_pins=None):
        """soft_pins: optional (vertex indices (P,), stiffness (P,) [N/m]) of zero-length springs."""
        xp = backend.xp
        self.xp = xp
        self.model = model
        self.clamped_roots = fixed_vertices is None
        if fixed_vertices is None:
            fixed_vertices = clamped_root_vertices(xp, model)
            first_edges = model.strand_offsets[:-1] - xp.arange(model.n_strands)
            fixed_edges = first_edges if fixed_edges is None else fixed_edges
        self.fixed_vertices = xp.asarray(fixed_vertices, dtype=xp.int64)
        self.fixed_edges = xp.asarray([] if fixed_edges is None else fixed_edges, dtype=xp.int64)
        self.fixed_dofs = xp.concatenate((model.position_dofs[self.fixed_vertices].ravel(),
                                          model.edge_dof[self.fixed_edges]))
        self.soft_pins = None
        if soft_pins is not None:
            indices, stiffness = soft_pins
            indices = xp.asarray(indices, dtype=xp.int64)
            stiffness = xp.broadcast_to(xp.asarray(stiffness, dtype=xp.float64), indices.shape)
            if bool(xp.any(stiffness <= 0.0)):
                raise ValueError("soft pin stiffness must be positive")
            self.soft_pins = (indices, stiffness)
        # each fixed edge's two vertices as rows of the fixed-vertex targets (-1: that vertex is not fixed)
        slot_of_vertex = xp.full(model.n_vertices, -1, dtype=xp.int64)
        slot_of_vertex[self.fixed_vertices] = xp.arange(self.fixed_vertices.shape[0])
        fixed_edge_vertex = model.edge_vertex[self.fixed_edges]
        self.fixed_edge_slots = xp.stack((slot_of_vertex[fixed_edge_vertex], slot_of_vertex[fixed_edge_vertex + 1]),
                                         axis=1).reshape(-1, 2)
        self._to_host = backend.to_host
        self._host_fixed_edge_slots = np.asarray(backend.to_host(self.fixed_edge_slots))
        self._host_fixed_edges = np.asarray(backend.to_host(self.fixed_edges))
        loose = xp.nonzero(xp.any(self.fixed_edge_slots < 0, axis=1))[0]
        # the first fixed edge with a free vertex (edge_directors cannot set its twist), or None
        self.loose_fixed_edge = int(self.fixed_edges[loose[0]]) if loose.shape[0] else None
        self.integrator = ImplicitEulerSolver(xp, backend.to_host, backend.from_host, model,
                                              settings or NewtonSettings())
        self.contact = ContactSolver(xp, model, list(colliders), contact or ContactSettings())
        self.last_contacts = None   # contact set of the last step (inspection, tests)

    def vertex_targets(self, control: DerControl | None, state: DerState):
        """(F, 3) target positions of the fixed vertices at the end of the step."""
        xp, model = self.xp, self.model
        if control is None:
            return state.positions[self.fixed_vertices]
        if control.vertex_targets is not None:
            return xp.asarray(control.vertex_targets, dtype=state.positions.dtype)
        if control.root_positions is None:
            return state.positions[self.fixed_vertices]
        if not self.clamped_roots:
            raise ValueError("root_positions control needs clamped roots (fixed_vertices left at its default)")
        roots = xp.asarray(control.root_positions, dtype=state.positions.dtype)
        directions = xp.asarray(control.root_directions, dtype=state.positions.dtype)
        directions = directions / xp.linalg.norm(directions, axis=1, keepdims=True)
        first_edge_length = model.rest_edge_length[model.strand_offsets[:-1] - xp.arange(model.n_strands)]
        return xp.concatenate((roots, roots + directions * first_edge_length[:, None]))

    def fixed_twist_velocity(self, control: DerControl | None, state: DerState, targets, dt: float):
        """(K,) [rad/s] rates of the fixed twist angles over the step: zero, or with control.edge_directors the
        rate that ends the step with each fixed edge's material director m1 = cos θ u + sin θ v along the
        director's part perpendicular to the edge (u, v: the reference frame time-parallel transported onto
        the edge's end-of-step tangent, as the integrator transports it; the turn taken is the shorter one).
        targets (F, 3) [m]: end-of-step positions of the fixed vertices."""
        xp = self.xp
        count = self.fixed_edges.shape[0]
        directors = None if control is None else control.edge_directors
        if directors is None:
            return xp.zeros(count)
        directors = xp.asarray(directors, dtype=state.positions.dtype)
        if directors.shape != (count, 3):
            raise ValueError(f"edge_directors must be ({count}, 3), one per fixed edge; got {tuple(directors.shape)}")
        if self.loose_fixed_edge is not None:
            raise ValueError(f"edge_directors needs both vertices of every fixed edge fixed; edge "
                             f"{self.loose_fixed_edge} has a free vertex")
        tangents = normalize_rows(xp, targets[self.fixed_edge_slots[:, 1]] - targets[self.fixed_edge_slots[:, 0]])
        u = time_parallel_reference(xp, state.tangents[self.fixed_edges], state.reference_u[self.fixed_edges],
                                    tangents)
        v = cross3(xp, tangents, u)
        along_u, along_v = xp.sum(directors * u, axis=1), xp.sum(directors * v, axis=1)
        if not control.edge_directors_checked:
            degenerate = _degenerate_directors(xp, directors, tangents)
            if bool(xp.any(degenerate)):
                self._name_degenerate_director(self._to_host(degenerate))
        return shortest_turn(xp, xp.arctan2(along_v, along_u) - state.theta[self.fixed_edges]) / dt

    def check_edge_directors(self, directors: np.ndarray, targets: np.ndarray) -> None:
        """On the host, before they go to the device: ValueError where a fixed edge's director ``directors`` (K, 3)
        has no part perpendicular to the edge's end-of-step tangent (from the fixed vertices' targets ``targets``
        (F, 3) [m]): the test ``fixed_twist_velocity`` makes, so that a step given
        ``DerControl.edge_directors_checked`` need not read it back from the device."""
        if directors.shape[0] == 0 or self.loose_fixed_edge is not None:
            return
        slots = self._host_fixed_edge_slots
        tangents = normalize_rows(np, targets[slots[:, 1]] - targets[slots[:, 0]])
        degenerate = _degenerate_directors(np, directors, tangents)
        if degenerate.any():
            self._name_degenerate_director(degenerate)

    def _name_degenerate_director(self, degenerate: np.ndarray) -> None:
        """ValueError naming the first fixed edge marked in the host bool mask ``degenerate`` (K,)."""
        edge = int(self._host_fixed_edges[int(np.argmax(degenerate))])
        raise ValueError(f"edge_directors of fixed edge {edge} is zero, non-finite or along the edge: it names "
                         "no twist angle")

    def step(self, state_in: DerState, state_out: DerState, control: DerControl | None, contacts, dt: float,
             gravity=(0.0, 0.0, -9.81), acceleration=None, drag=None) -> dict:
        """Advance state_in by dt [s] into state_out (arrays replaced); returns per-step statistics.
        acceleration: optional (N, 3) [m/s²] per-vertex external acceleration beside gravity (wind); drag:
        optional (n_dofs,) [1/s] velocity decay rate beside the damping (air drag)."""
        xp = self.xp
        targets = self.vertex_targets(control, state_in)
        fixed_velocity = xp.concatenate((((targets - state_in.positions[self.fixed_vertices]) / dt).ravel(),
                                         self.fixed_twist_velocity(control, state_in, targets, dt)))
        handler = self.contact.begin_step(state_in, dt, self.fixed_dofs) if self.contact.active else None
        self.last_contacts = handler
        springs = None
        if self.soft_pins is not None:
            indices, stiffness = self.soft_pins
            targets = self.model.rest_positions[indices] if control is None or control.soft_targets is None \
                else xp.asarray(control.soft_targets, dtype=state_in.positions.dtype)
            springs = SoftPins(indices, self.model.position_dofs[indices], stiffness, targets)
        new_state, stats = self.integrator.step(state_in, dt, gravity, self.fixed_dofs, fixed_velocity, handler,
                                                springs, acceleration, drag)
        if handler is not None:
            stats.extra.update(handler.statistics())
            self.contact.remember(handler)
        for name in DerState.__dataclass_fields__:
            setattr(state_out, name, getattr(new_state, name))
        return stats.as_dict()


def _degenerate_directors(xp, directors, tangents):
    """(K,) bool: the directors (K, 3) with no part perpendicular to their edges' unit tangents (K, 3) (zero,
    non-finite or along the edge): they name no twist angle."""
    across = directors - xp.sum(directors * tangents, axis=1, keepdims=True) * tangents
    return ~(row_lengths(xp, across) > 1e-6 * row_lengths(xp, directors))

"""Per-step state of the DER solver and the time-parallel update of the reference frames."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .energy import Configuration
from .frames import normalize_rows, reference_twist_value, shortest_turn, time_parallel_reference
from .model import DerModel, ElementSubset


@dataclass
class DerState:
    """positions (N, 3) [m], velocities (N, 3) [m/s], theta (E,) [rad], theta_velocity (E,) [rad/s];
    reference frame: tangents (E, 3), reference_u (E, 3), reference_twist (B,) [rad] (unwrapped)."""
    positions: Any
    velocities: Any
    theta: Any
    theta_velocity: Any
    tangents: Any
    reference_u: Any
    reference_twist: Any

    def copy(self) -> "DerState":
        return DerState(*(getattr(self, name).copy() for name in self.__dataclass_fields__))


def rest_state(xp, model: DerModel) -> DerState:
    x = model.rest_positions.copy()
    edges = x[model.edge_vertex + 1] - x[model.edge_vertex]
    return DerState(positions=x, velocities=xp.zeros_like(x), theta=xp.zeros(model.n_edges),
                    theta_velocity=xp.zeros(model.n_edges), tangents=normalize_rows(xp, edges),
                    reference_u=model.rest_u.copy(), reference_twist=model.rest_twist.copy())


def transported_configuration(xp, model: DerModel, base: DerState, positions, theta, subset: ElementSubset | None = None,
                              fill: Configuration | None = None) -> Configuration:
    """Configuration at (positions, theta) with reference frames transported in time from `base`.

    subset (with fill): transport only the frames of those elements; the other entries of reference_u and
    reference_twist are copied from the configuration `fill`."""
    edge_vertex = model.edge_vertex if subset is None else model.edge_vertex[subset.edges]
    edges = positions[edge_vertex + 1] - positions[edge_vertex]
    tangents = normalize_rows(xp, edges)
    base_tangents, base_u = base.tangents, base.reference_u
    if subset is not None:
        base_tangents, base_u = base_tangents[subset.edges], base_u[subset.edges]
    moved_u = time_parallel_reference(xp, base_tangents, base_u, tangents)
    if subset is None:
        u, all_tangents = moved_u, tangents
        bend_edges, base_twist = model.bend_edges, base.reference_twist
    else:
        u, all_tangents = fill.reference_u.copy(), xp.zeros_like(fill.reference_u)
        u[subset.edges] = moved_u
        all_tangents[subset.edges] = tangents
        bend_edges, base_twist = model.bend_edges[subset.bends], base.reference_twist[subset.bends]
    prev_edge, next_edge = bend_edges[:, 0], bend_edges[:, 1]
    raw = reference_twist_value(xp, all_tangents[prev_edge], all_tangents[next_edge], u[prev_edge], u[next_edge])
    twist = base_twist + shortest_turn(xp, raw - base_twist)
    if subset is not None:
        full = fill.reference_twist.copy()
        full[subset.bends] = twist
        twist = full
    return Configuration(positions=positions, theta=theta, reference_u=u, reference_twist=twist)


__all__ = ["DerState", "rest_state", "transported_configuration"]

"""Per-step state of the DER solver and the time-parallel update of the reference frames."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .energy import Configuration
from .frames import normalize_rows, orthonormalize, parallel_transport, reference_twist_value
from .model import DerModel


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


def transported_configuration(xp, model: DerModel, base: DerState, positions, theta) -> Configuration:
    """Configuration at (positions, theta) with reference frames transported in time from `base`."""
    edges = positions[model.edge_vertex + 1] - positions[model.edge_vertex]
    tangents = normalize_rows(xp, edges)
    u = orthonormalize(xp, tangents, parallel_transport(xp, base.tangents, tangents, base.reference_u))
    prev_edge, next_edge = model.bend_edges[:, 0], model.bend_edges[:, 1]
    raw = reference_twist_value(xp, tangents[prev_edge], tangents[next_edge], u[prev_edge], u[next_edge])
    change = raw - base.reference_twist
    change = change - 2.0 * xp.pi * xp.round(change / (2.0 * xp.pi))
    return Configuration(positions=positions, theta=theta, reference_u=u,
                         reference_twist=base.reference_twist + change)


__all__ = ["DerState", "rest_state", "transported_configuration"]

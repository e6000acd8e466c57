"""Per-step state of the DER solver and the time-parallel update of the reference frames."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import warp as wp

from ...kernels import launch_split, warp_device_of, warp_view
from .kernels import frame as frame_kernels
from .energy import Configuration
from .frames import normalize_rows
from .model import DerModel, ElementSubset, index_view, strands_view


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
    """Configuration at (positions, theta) with reference frames transported in time from `base`
    (kernels.frame.transport_frames: one Warp launch, a thread per strand).

    subset (with fill): transport only the frames of those elements; the other entries of reference_u and
    reference_twist are copied from the configuration `fill`."""
    if subset is None:
        u, twist = xp.empty((model.n_edges, 3)), xp.empty(model.bend_vertex.shape[0])
    else:
        u, twist = xp.array(fill.reference_u, dtype=xp.float64, order="C"), xp.array(fill.reference_twist,
                                                                                    dtype=xp.float64, order="C")

    def vectors(array):
        return warp_view(xp.ascontiguousarray(array, dtype=xp.float64), wp.vec3d)

    strands = strands_view(model, subset)
    launch_split(frame_kernels.transport_frames, strands.shape[0], warp_device_of(positions), [], [
        strands, index_view(model, "strand_offsets"), vectors(positions),
        vectors(base.tangents), vectors(base.reference_u),
        warp_view(xp.ascontiguousarray(base.reference_twist, dtype=xp.float64), wp.float64),
        warp_view(u, wp.vec3d), warp_view(twist, wp.float64)])
    return Configuration(positions=positions, theta=theta, reference_u=u, reference_twist=twist)


__all__ = ["DerState", "rest_state", "transported_configuration"]


@dataclass
class DerControl:
    """Kinematic targets at the END of the step.

    vertex_targets: (F, 3) [m] positions of the solver's fixed vertices, in their order; or, for clamped
    roots, root_positions (S, 3) [m] and root_directions (S, 3) (unit first-edge directions).
    """
    vertex_targets: Any = None
    root_positions: Any = None
    root_directions: Any = None
    soft_targets: Any = None   # (P, 3) [m] targets of the soft-pinned vertices (None: their rest positions)
    # (K, 3) directions the material director m1 of each fixed edge points along at the end of the step (the
    # part perpendicular to the edge counts); None: the fixed twist angles keep their values.  Needs both
    # vertices of every fixed edge fixed (clamped roots are)
    edge_directors: Any = None
    # the caller checked the edge_directors on the host (DerSolver.check_edge_directors): the step does not read the
    # same test back from the device
    edge_directors_checked: bool = False

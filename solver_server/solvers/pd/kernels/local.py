"""Warp kernels of the PD local step (seed eq. 2-7) fused with its right-hand-side assembly (eq. 2-8).

``edge_projections`` computes ω_e p_e per cloth edge, p_e the edge vector clamped to [σmin·r, σmax·r]
(``constraints.edge_strain``); ``gather_rhs`` adds to each particle's right-hand side the sum over its
edges of ±ω_e p_e. The particle gathers over its own edges (``incidence``): no atomics, the same order of
sums on every device. (Projecting each edge from both of its ends in one kernel cost twice the square
roots and divisions: 2.4 ms against 1.2 ms per iteration for 58 800 edges on one CPU core.)
"""

from __future__ import annotations

import numpy as np
import warp as wp

from ....kernels import launch_items, warp_device_of, warp_view
from ..incidence import incidence


@wp.kernel
def edge_projections(edges: wp.array(dtype=wp.int32, ndim=2), min_length: wp.array(dtype=wp.float64),
                     max_length: wp.array(dtype=wp.float64), weight: wp.array(dtype=wp.float64),
                     q: wp.array(dtype=wp.vec3d), first: int, chunk: int, weighted: wp.array(dtype=wp.vec3d)):
    """weighted[e] = ω_e p_e: edge e's vector clamped to [min_length, max_length] (the local step), times its
    weight, for edges [first + t·chunk, first + (t + 1)·chunk)."""
    first = first + wp.tid() * chunk
    last = wp.min(first + chunk, edges.shape[0])
    for edge in range(first, last):
        vector = q[edges[edge, 0]] - q[edges[edge, 1]]
        length = wp.length(vector)
        target = wp.min(wp.max(length, min_length[edge]), max_length[edge])
        weighted[edge] = (weight[edge] * target / wp.max(length, wp.float64(1e-12))) * vector


@wp.kernel
def gather_rhs(incident_start: wp.array(dtype=wp.int32), incident_edge: wp.array(dtype=wp.int32),
               incident_sign: wp.array(dtype=wp.float64), weighted: wp.array(dtype=wp.vec3d), first: int, chunk: int,
               rhs: wp.array(dtype=wp.vec3d)):
    """rhs[p] += Σ_e s ω_e p_e over particle p's edges (s = +1 at the edge's first end, −1 at its second: the
    rows of Aᵀ W with A_e = e_i − e_j), for particles [first + t·chunk, first + (t + 1)·chunk)."""
    first = first + wp.tid() * chunk
    last = wp.min(first + chunk, incident_start.shape[0] - 1)
    for particle in range(first, last):
        total = rhs[particle]
        for k in range(incident_start[particle], incident_start[particle + 1]):
            total = total - incident_sign[k] * weighted[incident_edge[k]]
        rhs[particle] = total


class EdgeStrainLocal:
    """The edge-strain batch's local step and right-hand-side assembly in one launch.

    edges (E, 2); min_length, max_length (E,) [m]; weights (E,) ω_e [N/m]; particle_count n; backend: the
    job's array backend (the arrays live on its device).
    """

    def __init__(self, backend, edges: np.ndarray, min_length: np.ndarray, max_length: np.ndarray,
                 weights: np.ndarray, particle_count: int):
        xp = backend.xp
        start, incident_edge, incident_sign = incidence(edges, particle_count)
        self._arrays = [xp.asarray(np.ascontiguousarray(edges, dtype=np.int32)),
                        xp.asarray(np.ascontiguousarray(min_length, dtype=np.float64)),
                        xp.asarray(np.ascontiguousarray(max_length, dtype=np.float64)),
                        xp.asarray(np.ascontiguousarray(weights, dtype=np.float64)),
                        xp.asarray(start), xp.asarray(incident_edge), xp.asarray(incident_sign)]
        types = [wp.int32, wp.float64, wp.float64, wp.float64, wp.int32, wp.int32, wp.float64]
        self._views = [warp_view(array, dtype) for array, dtype in zip(self._arrays, types)]
        self.weighted = xp.zeros((len(edges), 3), dtype=xp.float64)
        self._weighted_view = warp_view(self.weighted, wp.vec3d)
        self.device = warp_device_of(self._arrays[0])
        self.count = particle_count
        self.per_item = None            # None: the device's layout (tests force the other one)

    def add_rhs(self, q, rhs) -> None:
        """rhs (n, 3) += Aᵀ W p(q) for positions q (n, 3) [m]; both C-contiguous float64 on the device."""
        edge_views, incidence_views = self._views[:4], self._views[4:]
        launch_items(edge_projections, len(self.weighted), self.device, [*edge_views, warp_view(q, wp.vec3d)],
                     [self._weighted_view], per_item=self.per_item, split=True)
        launch_items(gather_rhs, self.count, self.device, [*incidence_views, self._weighted_view],
                     [warp_view(rhs, wp.vec3d)], per_item=self.per_item, split=True)

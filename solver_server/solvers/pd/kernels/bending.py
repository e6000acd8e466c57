"""Warp kernels of the PD local step for cloth bending (``constraints.bending``: mean-curvature constraints on the
mean-value Laplacian, seed §3.4, eq. 3-14) fused with its right-hand-side assembly.

The projection of vertex i's constraint is H_i N_i: its signed rest mean curvature (``signed_magnitude``, a
constant) along the current ring normal N_i (area-weighted: the normalized sum of its triangles' cross products).
``bending_targets`` computes ω_i H_i N_i per constraint, each vertex gathering its own triangles
(``incidence.corner_incidence``); ``gather_laplacian_rhs`` adds Lᵀ (ω H N) to the right-hand side through the
transposed Laplacian's rows (a particle sums over the constraints whose stencil holds it). No atomics, one order
of sums on every device. A cloth whose rest shape is flat has H = 0 everywhere: its projections and right-hand
side are zero and nothing is launched.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
import warp as wp

from ....kernels import launch_items, warp_device_of, warp_view
from ..incidence import corner_incidence

wp.set_module_options({"enable_backward": False})


@wp.kernel
def bending_targets(triangles: wp.array(dtype=wp.int32, ndim=2), vertex_start: wp.array(dtype=wp.int32),
                    vertex_corner: wp.array(dtype=wp.int32), vertex: wp.array(dtype=wp.int32),
                    weighted_magnitude: wp.array(dtype=wp.float64), q: wp.array(dtype=wp.vec3d), first: int,
                    chunk: int, targets: wp.array(dtype=wp.vec3d)):
    """targets[i] = ω_i H_i N_i for constraints [first + t·chunk, first + (t + 1)·chunk): N_i the unit sum of the
    cross products (b − a) × (c − a) of vertex[i]'s triangles."""
    start = first + wp.tid() * chunk
    for i in range(start, wp.min(start + chunk, vertex.shape[0])):
        v = vertex[i]
        normal = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
        for k in range(vertex_start[v], vertex_start[v + 1]):
            t = vertex_corner[k] // 3
            a = q[triangles[t, 0]]
            normal = normal + wp.cross(q[triangles[t, 1]] - a, q[triangles[t, 2]] - a)
        targets[i] = (weighted_magnitude[i] / wp.max(wp.length(normal), wp.float64(1e-30))) * normal


@wp.kernel
def gather_laplacian_rhs(column_start: wp.array(dtype=wp.int32), column_row: wp.array(dtype=wp.int32),
                         column_value: wp.array(dtype=wp.float64), targets: wp.array(dtype=wp.vec3d), first: int,
                         chunk: int, rhs: wp.array(dtype=wp.vec3d)):
    """rhs[p] += Σ_i L[i, p] targets[i] over the constraints i whose stencil holds particle p (column p of L,
    stored as the rows of Lᵀ), for particles [first + t·chunk, first + (t + 1)·chunk)."""
    start = first + wp.tid() * chunk
    for particle in range(start, wp.min(start + chunk, column_start.shape[0] - 1)):
        total = rhs[particle]
        for k in range(column_start[particle], column_start[particle + 1]):
            total = total + column_value[k] * targets[column_row[k]]
        rhs[particle] = total


class BendingLocal:
    """The bending batch's local step and right-hand-side assembly in two launches (none for a flat rest shape).

    triangles (F, 3); interior (K,) the constrained vertices; laplacian (K, n) sparse L [1/m]; weights (K,) ω;
    signed_magnitude (K,) H [1/m·m]: the rest curvature vectors' signed lengths; particle_count n; backend: the
    job's array backend (the arrays live on its device).
    """

    def __init__(self, backend, triangles: np.ndarray, interior: np.ndarray, laplacian, weights: np.ndarray,
                 signed_magnitude: np.ndarray, curved: bool, particle_count: int):
        xp = backend.xp
        self.curved = bool(curved)
        self.count = particle_count
        self.per_item = None            # None: the device's layout (tests force the other one)
        if not self.curved:
            return
        start, corner = corner_incidence(triangles, particle_count)
        columns = scipy.sparse.csr_matrix(laplacian).T.tocsr()
        columns.sort_indices()
        as_int = lambda values: xp.asarray(np.ascontiguousarray(values, dtype=np.int32))  # noqa: E731
        as_float = lambda values: xp.asarray(np.ascontiguousarray(values, dtype=np.float64))  # noqa: E731
        self._arrays = [as_int(triangles), as_int(start), as_int(corner), as_int(interior),
                        as_float(weights * signed_magnitude)]
        self._views = [warp_view(array, dtype) for array, dtype in
                       zip(self._arrays, [wp.int32, wp.int32, wp.int32, wp.int32, wp.float64])]
        self._columns = [as_int(columns.indptr), as_int(columns.indices), as_float(columns.data)]
        self._column_views = [warp_view(array, dtype) for array, dtype in
                              zip(self._columns, [wp.int32, wp.int32, wp.float64])]
        self.targets = xp.zeros((len(interior), 3), dtype=xp.float64)
        self._targets_view = warp_view(self.targets, wp.vec3d)
        self.device = warp_device_of(self._arrays[0])

    def add_rhs(self, q, rhs) -> None:
        """rhs (n, 3) += Lᵀ W p(q) for positions q (n, 3) [m]; both C-contiguous float64 on the device."""
        if not self.curved:
            return
        launch_items(bending_targets, len(self.targets), self.device, [*self._views, warp_view(q, wp.vec3d)],
                     [self._targets_view], per_item=self.per_item, split=True)
        launch_items(gather_laplacian_rhs, self.count, self.device, [*self._column_views, self._targets_view],
                     [warp_view(rhs, wp.vec3d)], per_item=self.per_item, split=True)

"""Hard upper strain limit on cloth edges, applied at the end of every PD substep.

The PD edge constraint is an energy term: with a handful of local/global iterations an edge under a
concentrated load (a point pin carrying half a cloth, a fast impact on a collider) overshoots σmax by
tens of per cent. This pass shortens every edge longer than ``(σmax + slack) · r`` back to that length
(Provot 1995, in the position-based form of Müller et al. 2007) by Gauss–Seidel sweeps over colour
classes of edges (``limit_kernels``: one launch per call on the CPU, one per class on CUDA). Exactly pinned
particles have zero inverse mass and never move.

Each round of sweeps starts with one solve through the PD system matrix (see ``PDSolver``), which
carries the shortening of a whole stretched region (a cloth cap on a sphere, the edge between two
pins) at once; the sweeps then clean up what the linear solve leaves. Particles resting on a collider
can be given contact planes: the sweeps keep them on the collider's side, so an edge over a rim is
shortened by sliding along the surface rather than by pulling its points into it.

The pass only moves positions; the solver then sets v = (q − q_t)/h from the corrected positions, so
velocities stay consistent with the motion (removing stretch takes energy out, it never adds any).
Compression (σmin) stays a soft PD band: a hard lower limit would fight the buckling that cloth needs.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from ...kernels import launch, warp_device_of, warp_view
from . import limit_kernels as kernels

FAULT_RATIO = 100.0   # an edge this many times its hard limit is a numerical fault, left to the fault check


class EdgeStrainLimit:
    """Edge-length projection for a batch of edges by coloured Gauss–Seidel sweeps.

    backend: array backend (xp); edges: (E, 2) particle pairs; max_length: (E,) hard upper length [m];
    inverse_mass: (n,) [1/kg], 0 for exactly pinned particles; rounds × sweeps_per_round: most sweeps per
    call; relaxation: over-relaxation factor in (0, 2).
    """

    def __init__(self, backend, edges: np.ndarray, max_length: np.ndarray, inverse_mass: np.ndarray,
                 rounds: int = 2, sweeps_per_round: int = 8, relaxation: float = 1.0):
        xp = backend.xp
        self.xp = xp
        edges = np.ascontiguousarray(edges, dtype=np.int32)
        order, class_start = kernels.colour_edges(edges, len(inverse_mass))
        self.class_start = class_start.tolist()          # host copy: launch bounds of the CUDA path
        self.edges = xp.asarray(edges)
        self.order = xp.asarray(order)
        self.max_length = xp.asarray(np.ascontiguousarray(max_length, dtype=np.float64))
        self.inverse_mass = xp.asarray(np.ascontiguousarray(inverse_mass, dtype=np.float64))
        self.overshoot = xp.zeros((len(edges), 3), dtype=xp.float64)
        self.result = xp.zeros(2, dtype=xp.int32)
        self.no_planes = (xp.zeros(0, dtype=xp.int32), xp.zeros((0, 3), dtype=xp.float64),
                          xp.zeros((0, 3), dtype=xp.float64))
        self.device = warp_device_of(self.edges)
        self.parallel = self.device != "cpu"   # one launch per colour class (CUDA), else one launch per call
        self._views = (warp_view(self.edges, wp.int32), warp_view(self.order, wp.int32),
                       warp_view(self.max_length, wp.float64), warp_view(self.inverse_mass, wp.float64))
        self.result_view = warp_view(self.result, wp.int32)
        self.overshoot_view = warp_view(self.overshoot, wp.vec3d)
        self.rounds = int(rounds)
        self.sweeps_per_round = int(sweeps_per_round)
        self.relaxation = float(relaxation)

    @property
    def classes(self) -> int:
        """Number of colour classes (CUDA launches per sweep)."""
        return len(self.class_start) - 1

    def _check(self, q_view):
        """(edges beyond their limit, edges beyond FAULT_RATIO × it); fills self.overshoot (E, 3) [m]."""
        edges, _, max_length, _ = self._views
        self.result[:] = 0
        launch(kernels.edge_overshoot, len(self.max_length), device=self.device,
               inputs=[edges, max_length, FAULT_RATIO, q_view, self.overshoot_view, self.result_view])
        return int(self.result[0]), int(self.result[1])

    def _sweeps(self, q_view, planes, inverse_mass=None) -> None:
        """``sweeps_per_round`` Gauss–Seidel sweeps (the CPU stops early once a sweep corrected nothing)."""
        edges, order, max_length, own_inverse_mass = self._views
        inverse_mass = own_inverse_mass if inverse_mass is None else warp_view(inverse_mass, wp.float64)
        particle, point, normal = planes
        plane_views = [warp_view(particle, wp.int32), warp_view(point, wp.vec3d), warp_view(normal, wp.vec3d)]
        relaxation = wp.float64(self.relaxation)
        if not self.parallel:
            launch(kernels.limit_sweeps_sequential, 1, device=self.device,
                   inputs=[edges, order, max_length, inverse_mass, relaxation, self.sweeps_per_round,
                           *plane_views, q_view, self.result_view])
            return
        for _ in range(self.sweeps_per_round):
            for first, stop in zip(self.class_start[:-1], self.class_start[1:]):
                launch(kernels.limit_colour, stop - first, device=self.device,
                       inputs=[edges, order, first, max_length, inverse_mass, relaxation, q_view, self.result_view])
            launch(kernels.planes_parallel, len(particle), device=self.device, inputs=[*plane_views, q_view])

    def sweep(self, xp, positions, planes=None, frozen=None):
        """``sweeps_per_round`` sweeps, no global solve and no check: positions (n, 3) [m] -> corrected copy;
        frozen: optional (n,) bool, particles the sweeps must not move."""
        q = xp.ascontiguousarray(positions, dtype=xp.float64).copy()
        inverse_mass = None
        if frozen is not None:
            inverse_mass = xp.ascontiguousarray(xp.where(frozen, 0.0, self.inverse_mass), dtype=xp.float64)
        self._sweeps(warp_view(q, wp.vec3d), self.no_planes if planes is None else planes, inverse_mass)
        return q

    def apply(self, xp, positions, global_step=None, planes=None):
        """positions (n, 3) [m] -> (corrected positions (n, 3), rounds run, edges still too long).

        global_step: optional (q, overshoot (E, 3)) -> q run at the start of every round with the edge
        vectors' overshoot beyond their limit (0 for edges within it); the solver passes a solve with its
        PD factorization, which moves a whole stretched region at once. planes: optional (particle (P,)
        int32, point (P, 3), unit normal (P, 3)) contact planes the sweeps keep those particles above.
        """
        q = xp.ascontiguousarray(positions, dtype=xp.float64).copy()
        planes = self.no_planes if planes is None else planes
        for round_index in range(self.rounds):
            q_view = warp_view(q, wp.vec3d)
            too_long, faulty = self._check(q_view)
            if too_long == 0:
                return q, round_index, 0
            # an edge FAULT_RATIO × its limit is a numerical fault (a point thrown kilometres away), not
            # stretch: the state is left alone so the simulation's fault check reports it instead of the pass
            # quietly pulling the point back
            if round_index == 0 and faulty:
                return q, 0, too_long
            if global_step is not None:
                q = xp.ascontiguousarray(global_step(q, self.overshoot), dtype=xp.float64)
                q_view = warp_view(q, wp.vec3d)
            self._sweeps(q_view, planes)
        too_long, _ = self._check(warp_view(q, wp.vec3d))
        return q, self.rounds, too_long

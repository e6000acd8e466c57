"""Hard upper strain limit on cloth edges, applied at the end of every PD substep.

The PD edge constraint is an energy term: with a handful of local/global iterations an edge under a
concentrated load (a point pin carrying half a cloth, a fast impact on a collider) overshoots σmax by
tens of per cent. This pass shortens every edge longer than the hard limit ``max(σmax, 1 + slack) · r`` back to
that length (Provot 1995, in the position-based form of Müller et al. 2007) with mass-weighted Jacobi passes in Warp
kernels (``kernels.limit``): all too-long edges are corrected at once, a particle's correction is the sum
of its edges' corrections divided by their number (constraint averaging keeps the iteration stable; an
over-relaxation factor is available, default 1: 1.5 gave larger settled jumps on the Suzanne scenes,
0.098 m against 0.072 m per frame, for 6.9 % against 7.1 % worst stretch on the sphere scene). Exactly pinned particles have zero inverse mass and never move. Jacobi carries
a correction about one edge per pass: it removes local overshoot (the edges around a point pin, spikes in
a contact region) in a few passes, not the stretch of a whole region.

Each round of passes starts with one solve through the PD system matrix (see ``PDSolver``), which
carries the shortening of a whole stretched region (a cloth cap on a sphere, the edge between two
pins) at once; the passes then clean up what the linear solve leaves. Particles resting on a collider
can be given contact planes: the passes keep them on the collider's side, so an edge over a rim is
shortened by sliding along the surface rather than by pulling its points into it. ``sweep`` is the
local clean-up between collider edge rounds: Gauss–Seidel sweeps over colour classes
(``kernels.limit_sweep``), no global solve.

The pass only moves positions; the solver then sets v = (q − q_t)/h from the corrected positions, so
velocities stay consistent with the motion (removing stretch takes energy out, it never adds any).
Compression (σmin) stays a soft PD band: a hard lower limit would fight the buckling that cloth needs.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from ...kernels import cuda_layout_on, launch, launch_items, warp_device_of, warp_view
from .kernels import limit as limit_kernels
from .kernels import limit_sweep as sweep_kernels
from .incidence import incidence

FAULT_RATIO = 100.0   # an edge this many times its hard limit is a numerical fault, left to the fault check
# an edge within this fraction of its energy-free length σmax·rest counts as taut: the limit's passes leave an edge at
# its limit a rounding below it, and a cloth point that is not held there is pushed past the limit by the next contact
TAUT_MARGIN = 0.005


class EdgeStrainLimit:
    """Edge-length projection for a batch of edges by Jacobi passes (``apply``) or Gauss–Seidel sweeps
    (``sweep``).

    backend: array backend (xp); edges: (E, 2) particle pairs; max_length: (E,) hard upper length [m];
    free_length: (E,) the length up to which an edge costs no energy, σmax·rest [m] (default max_length);
    inverse_mass: (n,) [1/kg], 0 for exactly pinned particles; rounds × passes_per_round: most passes per
    call; relaxation: over-relaxation factor in (0, 2).
    """

    def __init__(self, backend, edges: np.ndarray, max_length: np.ndarray, inverse_mass: np.ndarray,
                 rounds: int = 2, passes_per_round: int = 8, relaxation: float = 1.0, free_length=None):
        xp = backend.xp
        edges = np.ascontiguousarray(edges, dtype=np.int32)
        start, incident_edge, incident_sign = incidence(edges, len(inverse_mass))
        self.edges = xp.asarray(edges)
        self.max_length = xp.asarray(np.ascontiguousarray(max_length, dtype=np.float64))
        self.free_length = self.max_length if free_length is None else \
            xp.asarray(np.ascontiguousarray(free_length, dtype=np.float64))
        self.inverse_mass = xp.asarray(np.ascontiguousarray(inverse_mass, dtype=np.float64))
        self.incident = (xp.asarray(start), xp.asarray(incident_edge), xp.asarray(incident_sign))
        self.step = xp.zeros((len(edges), 3), dtype=xp.float64)
        self.active = xp.zeros(len(edges), dtype=xp.int32)
        self.overshoot = xp.zeros((len(edges), 3), dtype=xp.float64)
        self.result = xp.zeros(2, dtype=xp.int32)
        self.no_planes = (xp.zeros(0, dtype=xp.int32), xp.zeros((0, 3), dtype=xp.float64),
                          xp.zeros((0, 3), dtype=xp.float64))
        self.device = warp_device_of(self.edges)
        self._edges_view = warp_view(self.edges, wp.int32)
        self._max_length_view = warp_view(self.max_length, wp.float64)
        self._inverse_mass_view = warp_view(self.inverse_mass, wp.float64)
        self._incident_views = [warp_view(self.incident[0], wp.int32), warp_view(self.incident[1], wp.int32),
                                warp_view(self.incident[2], wp.float64)]
        self._work_views = [warp_view(self.step, wp.vec3d), warp_view(self.active, wp.int32)]
        self.result_view = warp_view(self.result, wp.int32)
        order, class_start = sweep_kernels.colour_edges(edges, len(inverse_mass))
        self.order = xp.asarray(order)
        self._order_view = warp_view(self.order, wp.int32)
        self.class_start = class_start.tolist()          # host copy: launch bounds of the CUDA layout
        self.overshoot_view = warp_view(self.overshoot, wp.vec3d)
        n = len(inverse_mass)
        self._chosen = xp.zeros(len(edges), dtype=xp.int32)
        self._chosen_particles = xp.zeros(n, dtype=xp.int32)
        self._check_counts = xp.zeros(4, dtype=xp.int32)
        self._check_views = [warp_view(xp.zeros(n, dtype=xp.int32), wp.int32),
                             warp_view(xp.zeros(n, dtype=xp.int32), wp.int32),
                             warp_view(self._chosen, wp.int32), warp_view(self._chosen_particles, wp.int32),
                             warp_view(self._check_counts, wp.int32)]
        self.state = xp.zeros(5, dtype=xp.int32)          # device rounds: see kernels.limit.begin_round
        self._state_view = warp_view(self.state, wp.int32)
        self._touched = xp.zeros(n, dtype=xp.int32)
        self._touched_view = warp_view(self._touched, wp.int32)
        self._chosen_flags_view = warp_view(xp.zeros(len(edges), dtype=xp.int32), wp.int32)
        self._every_particle_view = warp_view(xp.arange(n, dtype=xp.int32), wp.int32)
        self.rounds = int(rounds)
        self.passes_per_round = int(passes_per_round)
        self.relaxation = float(relaxation)

    @property
    def parallel(self) -> bool:
        """A thread per item (CUDA's layout, also on the emulated device), else one thread looping over all."""
        return cuda_layout_on(self.device)

    def _launch(self, kernel, count: int, inputs_before: list, inputs_after: list) -> None:
        """``kernel`` over ``count`` items (``kernels.launch_items``; ``parallel`` picks the CUDA layout)."""
        launch_items(kernel, count, self.device, inputs_before, inputs_after, per_item=self.parallel)

    def _check(self, q_view):
        """(edges beyond their limit, edges beyond FAULT_RATIO × it); fills self.overshoot (E, 3) [m]."""
        self.result[:] = 0
        self._launch(limit_kernels.edge_overshoot, len(self.max_length),
                     [self._edges_view, self._max_length_view, FAULT_RATIO, q_view],
                     [self.overshoot_view, self.result_view])
        return int(self.result[0]), int(self.result[1])

    def _check_and_choose(self, q_view):
        """A round's check in the CPU layout, in one kernel (``check_sequential``): (edges beyond their limit,
        edges beyond FAULT_RATIO × it, chosen, particles), filling self.overshoot (E, 3) [m]. chosen (int32): the
        edges that share a particle with an edge beyond its limit, particles (int32): the particles they touch,
        both ascending; a round's passes work on these only, so a pass costs in proportion to the stretched
        region."""
        launch(limit_kernels.check_sequential, 1, device=self.device,
               inputs=[self._edges_view, self._max_length_view, FAULT_RATIO, q_view, self.overshoot_view,
                       *self._check_views])
        found, kept, too_long, faulty = (int(count) for count in self._check_counts.tolist())
        return too_long, faulty, self._chosen[:found], self._chosen_particles[:kept]

    def _passes(self, q_view, planes, chosen, particles) -> None:
        """``passes_per_round`` Jacobi passes over the ``chosen`` edges and their ``particles``, each followed by
        the contact planes, in one launch (``passes_sequential``, the CPU layout: launch overhead was most of a
        pass), stopping after a pass that finds no edge beyond its limit. Edges outside the choice stay inactive."""
        self.active[:] = 0
        particle, point, normal = planes
        launch(limit_kernels.passes_sequential, 1, device=self.device,
               inputs=[warp_view(chosen, wp.int32), self._edges_view, self._max_length_view, self._inverse_mass_view,
                       warp_view(particles, wp.int32), *self._incident_views, wp.float64(self.relaxation),
                       warp_view(particle, wp.int32), warp_view(point, wp.vec3d), warp_view(normal, wp.vec3d),
                       self.passes_per_round, *self._work_views, q_view])

    def _mark_on_device(self, q_view) -> None:
        """CUDA's layout: a round's counts cleared (``begin_round``), then the edges beyond their limit at q counted
        in state[0] (faults in state[1]), their overshoot in self.overshoot and their particles marked touched."""
        launch(limit_kernels.begin_round, 1, device=self.device, inputs=[self._state_view])
        self._touched[...] = 0
        launch(limit_kernels.mark_overshoot, len(self.max_length), device=self.device,
               inputs=[self._edges_view, self._max_length_view, FAULT_RATIO, q_view, self.overshoot_view,
                       self._touched_view, self._state_view])

    def _round_on_device(self, xp, q, global_step, plane_views, first: bool):
        """One round in CUDA's layout, a fixed sequence of launches with no host decision: the check marks the
        edges beyond their limit and the particles they touch, a fault in the first round halts the call (the
        state is left for the simulation's fault check), the global step runs on the overshoot (none: no move),
        then up to ``passes_per_round`` Jacobi passes over the edges that share a particle with a marked one,
        each followed by the contact planes, ending after a pass that finds no edge beyond its limit (all as flags
        on the device, the CPU layout's ends). Returns q."""
        q_view = warp_view(q, wp.vec3d)
        self._mark_on_device(q_view)
        edge_count, particle_count = len(self.max_length), len(self.inverse_mass)
        if first:
            launch(limit_kernels.halt_on_fault, 1, device=self.device, inputs=[self._state_view])
        launch(limit_kernels.choose_edges, edge_count, device=self.device,
               inputs=[self._edges_view, self._touched_view, self._chosen_flags_view, self._work_views[1]])
        if global_step is not None:
            stepped = xp.ascontiguousarray(global_step(q.copy(), self.overshoot), dtype=xp.float64)
            q = xp.ascontiguousarray(xp.where(self.state[2] == 0, stepped, q))
            q_view = warp_view(q, wp.vec3d)
        passes = [(limit_kernels.chosen_edge_steps, edge_count,
                   [self._chosen_flags_view, self._state_view, self._edges_view, self._max_length_view,
                    self._inverse_mass_view, q_view, *self._work_views]),
                  (limit_kernels.apply_steps, particle_count,
                   [self._every_particle_view, *self._incident_views, self._inverse_mass_view,
                    wp.float64(self.relaxation), *self._work_views, 0, 1, q_view]),
                  (limit_kernels.planes_unless_halted, len(plane_views[0]), [self._state_view, *plane_views, q_view])]
        for _ in range(self.passes_per_round):
            launch(limit_kernels.begin_pass, 1, device=self.device, inputs=[self._state_view])
            for kernel, count, inputs in passes:
                launch(kernel, count, device=self.device, inputs=inputs)
            launch(limit_kernels.end_pass, 1, device=self.device, inputs=[self._state_view])
        return q

    def taut_particles(self, xp, positions):
        """(n,) bool: the particles of taut edges at ``positions`` (n, 3) [m]: longer than their energy-free
        length σmax·rest less TAUT_MARGIN of it (a cloth holding a weight); such particles hold against other
        objects."""
        edges = self.edges
        vector = positions[edges[:, 1]] - positions[edges[:, 0]]
        taut = xp.sqrt((vector * vector).sum(axis=1)) > (1.0 - TAUT_MARGIN) * self.free_length
        held = xp.zeros(positions.shape[0], dtype=bool)
        held[edges[taut].ravel()] = True
        return held

    def sweep(self, xp, positions, frozen=None):
        """``passes_per_round`` Gauss–Seidel sweeps (``kernels.limit_sweep``), no global solve and no check:
        positions (n, 3) [m] -> corrected copy; frozen: optional (n,) bool, particles not to move."""
        q = xp.ascontiguousarray(positions, dtype=xp.float64).copy()
        inverse_mass = self._inverse_mass_view
        if frozen is not None:
            held = xp.ascontiguousarray(xp.where(frozen, 0.0, self.inverse_mass), dtype=xp.float64)
            inverse_mass = warp_view(held, wp.float64)
        inputs = [self._edges_view, self._order_view]
        q_view = warp_view(q, wp.vec3d)
        if not self.parallel:
            launch(sweep_kernels.sweeps_sequential, 1, device=self.device,
                   inputs=[*inputs, self._max_length_view, inverse_mass, self.passes_per_round, q_view])
            return q
        for _ in range(self.passes_per_round):
            for first, stop in zip(self.class_start[:-1], self.class_start[1:]):
                launch(sweep_kernels.sweep_colour, stop - first, device=self.device,
                       inputs=[*inputs, first, self._max_length_view, inverse_mass, q_view])
        return q

    def apply(self, xp, positions, global_step=None, planes=None):
        """positions (n, 3) [m] -> (corrected positions (n, 3), rounds run, edges still too long).

        global_step: optional (q, overshoot (E, 3)) -> q run at the start of every round with the edge
        vectors' overshoot beyond their limit (0 for edges within it); the solver passes a solve with its
        PD factorization, which moves a whole stretched region at once. planes: optional (particle (P,)
        int32, point (P, 3), unit normal (P, 3)) contact planes the passes keep those particles above.
        In CUDA's layout every round runs (``_round_on_device``) and the edges still too long are a 0-d device
        array; the CPU layout stops at a round that finds none.
        """
        q = xp.ascontiguousarray(positions, dtype=xp.float64).copy()
        planes = self.no_planes if planes is None else planes
        if self.parallel:
            plane_views = [warp_view(planes[0], wp.int32), warp_view(planes[1], wp.vec3d),
                           warp_view(planes[2], wp.vec3d)]
            for round_index in range(self.rounds):
                q = self._round_on_device(xp, q, global_step, plane_views, round_index == 0)
            self._mark_on_device(warp_view(q, wp.vec3d))                       # the edges still too long
            return q, self.rounds, self.state[0]
        if len(planes[0]):
            # the CPU passes loop over the planes in every pass: keep the ones that act (a particle, a normal)
            particle, point, normal = planes
            acting = xp.nonzero((particle >= 0) & (normal != 0.0).any(axis=1))[0]
            planes = (particle[acting], point[acting], normal[acting])
        for round_index in range(self.rounds):
            q_view = warp_view(q, wp.vec3d)
            too_long, faulty, chosen, particles = self._check_and_choose(q_view)
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
            self._passes(q_view, planes, chosen, particles)
        too_long, _ = self._check(warp_view(q, wp.vec3d))
        return q, self.rounds, too_long

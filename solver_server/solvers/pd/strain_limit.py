"""Hard upper strain limit on cloth edges, applied at the end of every PD substep.

The PD edge constraint is an energy term: with a handful of local/global iterations an edge under a
concentrated load (a point pin carrying half a cloth, a fast impact on a collider) overshoots σmax by
tens of per cent. This pass shortens every edge longer than ``(σmax + slack) · r`` back to that length
(Provot 1995, in the position-based form of Müller et al. 2007), in two parts:

1. A sweep outward from the exactly pinned particles (only when the cloth has some). Particles are
   grouped by their hop distance d from the nearest pin; layer by layer (d = 1, 2, …), every too-long
   edge from layer d − 1 to layer d is shortened by moving its outer end only (the average of its
   edges' corrections), as in follow-the-leader for strands. The load path of a hanging cloth runs
   from the pins outward, so one sweep removes the stretch that Jacobi passes would need hundreds of
   passes to carry along a 100-edge chain.
2. Mass-weighted Jacobi passes over every edge (edges inside a layer, cloth without pins, what the
   sweep left): all too-long edges are corrected at once, a particle's correction is the sum of its
   edges' corrections divided by their number (constraint averaging keeps the iteration stable), times
   an over-relaxation factor. Exactly pinned particles have zero inverse mass and never move.

The pass only moves positions; the solver then sets v = (q − q_t)/h from the corrected positions, so
velocities stay consistent with the motion (removing stretch takes energy out, it never adds any).
Compression (σmin) stays a soft PD band: a hard lower limit would fight the buckling that cloth needs.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse
from scipy.sparse.csgraph import dijkstra


class PinSweep:
    """Layered follow-the-leader shortening from the exactly pinned particles (part 1 above).

    edges: (E, 2) particle pairs; max_length: (E,) [m]; pinned: (P,) exactly pinned particle indices;
    n: particle count. Edges between particles of equal hop distance, and particles not connected to
    any pin, are left to the Jacobi passes.
    """

    def __init__(self, backend, edges: np.ndarray, max_length: np.ndarray, pinned: np.ndarray, n: int):
        xp = backend.xp
        graph = scipy.sparse.csr_matrix((np.ones(len(edges)), (edges[:, 0], edges[:, 1])), shape=(n, n))
        hops = dijkstra(graph, directed=False, indices=np.unique(pinned), unweighted=True, min_only=True)
        first_hops, second_hops = hops[edges[:, 0]], hops[edges[:, 1]]
        outward = np.isfinite(first_hops) & np.isfinite(second_hops) & (first_hops != second_hops)
        inner = np.where(first_hops < second_hops, edges[:, 0], edges[:, 1])[outward]
        outer = np.where(first_hops < second_hops, edges[:, 1], edges[:, 0])[outward]
        layer = hops[outer]
        order = np.argsort(layer, kind="stable")
        inner, outer, layer, limit = inner[order], outer[order], layer[order], max_length[outward][order]
        bounds = np.searchsorted(layer, np.arange(1, int(layer.max()) + 2) if len(layer) else [0])
        self.layers = []     # per hop distance: (inner, outer, max length, outer particles, edge -> particle)
        for start, stop in zip(bounds[:-1], bounds[1:]):
            if stop == start:
                continue
            particles, local = np.unique(outer[start:stop], return_inverse=True)
            self.layers.append(tuple(xp.asarray(a) for a in (inner[start:stop], outer[start:stop],
                                                              limit[start:stop], particles, local)))

    def apply(self, xp, q):
        """q (n, 3) [m], changed in place and returned."""
        for inner, outer, limit, particles, local in self.layers:
            vector = q[outer] - q[inner]
            length = xp.sqrt((vector * vector).sum(axis=1))
            too_long = length > limit
            # outer end moved onto the sphere of radius limit around the inner end
            correction = vector * xp.where(too_long, limit / xp.maximum(length, 1e-30) - 1.0, 0.0)[:, None]
            count = xp.bincount(local, weights=too_long.astype(q.dtype), minlength=len(particles))
            scale = 1.0 / xp.maximum(count, 1.0)
            for axis in range(3):
                q[particles, axis] += scale * xp.bincount(local, weights=correction[:, axis],
                                                          minlength=len(particles))
        return q


class EdgeStrainLimit:
    """Edge-length projection for a batch of edges: pin sweep, then Jacobi passes.

    backend: array backend (xp, sparse); edges: (E, 2) particle pairs; selector: scipy.sparse (E, n) with
    +1 at edges[:, 0] and −1 at edges[:, 1] (the edge_strain batch selector), so ``selector @ q`` is the
    edge vector (E, 3) [m]; max_length: (E,) hard upper length [m]; inverse_mass: (n,) [1/kg], 0 for
    exactly pinned particles (they anchor the pin sweep); rounds × passes_per_round: most Jacobi passes
    per call; relaxation: over-relaxation factor in (0, 2).

    Each round checks every edge once (one sparse product), then runs its passes on the edges that
    touch a particle of a too-long edge only, so a pass costs in proportion to the stretched region.
    """

    def __init__(self, backend, edges: np.ndarray, selector: scipy.sparse.csr_matrix, max_length: np.ndarray,
                 inverse_mass: np.ndarray, rounds: int = 4, passes_per_round: int = 4, relaxation: float = 1.5):
        xp = backend.xp
        n = selector.shape[1]
        incidence = abs(selector).tocsr()                                    # (E, n), 1 at both ends
        inverse_mass_sum = incidence @ inverse_mass                          # w_i + w_j, (E,)
        movable = inverse_mass_sum > 0.0
        to_device = (lambda m: backend.sparse.csr_matrix(m)) if backend.name != "cpu" else (lambda m: m)
        self.n = n
        self.selector = to_device(selector.tocsr())
        self.incidence = to_device(incidence)
        self.incidence_transpose = to_device(incidence.T.tocsr())            # (n, E)
        self.edges = xp.asarray(edges)
        self.max_length = xp.asarray(np.where(movable, max_length, np.inf))
        self.inverse_mass_sum = xp.asarray(np.where(movable, inverse_mass_sum, 1.0))
        self.inverse_mass = xp.asarray(inverse_mass)
        pinned = np.nonzero(inverse_mass == 0.0)[0]
        self.sweep = PinSweep(backend, edges, max_length, pinned, n) if len(pinned) else None
        self.rounds = int(rounds)
        self.passes_per_round = int(passes_per_round)
        self.relaxation = float(relaxation)

    def _too_long(self, xp, q):
        vector = self.selector @ q
        return xp.sqrt((vector * vector).sum(axis=1)) > self.max_length

    def _neighbourhood(self, xp, too_long):
        """Indices of the edges that share a particle with a too-long edge."""
        touched = (self.incidence_transpose @ too_long.astype(float)) > 0
        return xp.nonzero((self.incidence @ touched.astype(float)) > 0)[0]

    def _passes(self, xp, q, chosen):
        """Jacobi passes on the edges ``chosen`` (indices); returns the corrected positions."""
        first, second = self.edges[chosen, 0], self.edges[chosen, 1]
        max_length = self.max_length[chosen]
        inverse_mass_sum = self.inverse_mass_sum[chosen]
        weight_first = self.inverse_mass[first][:, None]
        weight_second = self.inverse_mass[second][:, None]
        for _ in range(self.passes_per_round):
            vector = q[first] - q[second]
            length = xp.sqrt((vector * vector).sum(axis=1))
            overshoot = length - max_length
            active = overshoot > 0.0
            if not bool(active.any()):
                break
            # λ_e n̂_e with λ_e = C_e / (w_i + w_j), C_e = l − l_max, n̂ = (q_i − q_j) / l
            step = vector * xp.where(active, overshoot / (inverse_mass_sum * xp.maximum(length, 1e-30)), 0.0)[:, None]
            weights = active.astype(q.dtype)
            count = xp.maximum(xp.bincount(first, weights=weights, minlength=self.n)
                               + xp.bincount(second, weights=weights, minlength=self.n), 1.0)
            scale = self.relaxation / count
            for axis in range(3):
                moved = (xp.bincount(second, weights=(weight_second * step)[:, axis], minlength=self.n)
                         - xp.bincount(first, weights=(weight_first * step)[:, axis], minlength=self.n))
                q[:, axis] += scale * moved
        return q

    def apply(self, xp, positions):
        """positions (n, 3) [m] -> (corrected positions (n, 3), Jacobi rounds run, edges still too long)."""
        q = positions.copy()
        too_long = self._too_long(xp, q)
        if not bool(too_long.any()):
            return q, 0, 0
        if self.sweep is not None:
            q = self.sweep.apply(xp, q)
        for round_index in range(self.rounds):
            too_long = self._too_long(xp, q)
            if not bool(too_long.any()):
                return q, round_index, 0
            q = self._passes(xp, q, self._neighbourhood(xp, too_long))
        return q, self.rounds, int(self._too_long(xp, q).sum())

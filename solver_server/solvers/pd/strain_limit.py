"""Hard upper strain limit on cloth edges, applied at the end of every PD substep.

The PD edge constraint is an energy term: with a handful of local/global iterations an edge under a
concentrated load (a point pin carrying half a cloth, a fast impact on a collider) overshoots σmax by
tens of per cent. This pass shortens every edge longer than ``(σmax + slack) · r`` back to that length
(Provot 1995, in the position-based form of Müller et al. 2007) with mass-weighted Jacobi passes:
all too-long edges are corrected at once, a particle's correction is the sum of its edges' corrections
divided by their number (constraint averaging keeps the iteration stable), times an over-relaxation
factor. Exactly pinned particles have zero inverse mass and never move. Jacobi carries a correction
about one edge per pass: it removes local overshoot (the edges around a point pin, spikes in a contact
region) in a few passes, not the stretch of a whole region.

Each round of passes starts with one solve through the PD system matrix (see ``PDSolver``), which
carries the shortening of a whole stretched region (a cloth cap on a sphere, the edge between two
pins) at once; the Jacobi passes then clean up what the linear solve leaves.

The pass only moves positions; the solver then sets v = (q − q_t)/h from the corrected positions, so
velocities stay consistent with the motion (removing stretch takes energy out, it never adds any).
Compression (σmin) stays a soft PD band: a hard lower limit would fight the buckling that cloth needs.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse


FAULT_RATIO = 100.0   # an edge this many times its hard limit is a numerical fault, left to the fault check


class EdgeStrainLimit:
    """Edge-length projection for a batch of edges by Jacobi passes.

    backend: array backend (xp, sparse); edges: (E, 2) particle pairs; selector: scipy.sparse (E, n) with
    +1 at edges[:, 0] and −1 at edges[:, 1] (the edge_strain batch selector), so ``selector @ q`` is the
    edge vector (E, 3) [m]; max_length: (E,) hard upper length [m]; inverse_mass: (n,) [1/kg], 0 for
    exactly pinned particles; rounds × passes_per_round: most Jacobi passes
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
        self.rounds = int(rounds)
        self.passes_per_round = int(passes_per_round)
        self.relaxation = float(relaxation)

    def _edge_vectors(self, xp, q):
        """Edge vectors (E, 3) [m] and their lengths (E,) [m] at positions q."""
        vector = self.selector @ q
        return vector, xp.sqrt((vector * vector).sum(axis=1))

    def _neighbourhood(self, xp, too_long):
        """Indices of the edges that share a particle with a too-long edge."""
        touched = (self.incidence_transpose @ too_long.astype(float)) > 0
        return xp.nonzero((self.incidence @ touched.astype(float)) > 0)[0]

    def _passes(self, xp, q, chosen):
        """Jacobi passes on the edges ``chosen`` (indices); returns the corrected positions."""
        ends = self.edges[chosen]                                             # (m, 2)
        particles, local = xp.unique(ends.ravel(), return_inverse=True)       # particles they touch
        local = local.reshape(-1, 2)
        first, second = local[:, 0], local[:, 1]
        count_particles = len(particles)
        x = q[particles]
        max_length = self.max_length[chosen]
        inverse_mass_sum = self.inverse_mass_sum[chosen]
        weight_first = self.inverse_mass[ends[:, 0]][:, None]
        weight_second = self.inverse_mass[ends[:, 1]][:, None]
        for _ in range(self.passes_per_round):
            vector = x[first] - x[second]
            length = xp.sqrt((vector * vector).sum(axis=1))
            overshoot = length - max_length
            active = overshoot > 0.0
            if not bool(active.any()):
                break
            # λ_e n̂_e with λ_e = C_e / (w_i + w_j), C_e = l − l_max, n̂ = (q_i − q_j) / l
            step = vector * xp.where(active, overshoot / (inverse_mass_sum * xp.maximum(length, 1e-30)), 0.0)[:, None]
            weights = active.astype(q.dtype)
            count = xp.maximum(xp.bincount(first, weights=weights, minlength=count_particles)
                               + xp.bincount(second, weights=weights, minlength=count_particles), 1.0)
            scale = self.relaxation / count
            for axis in range(3):
                moved = (xp.bincount(second, weights=(weight_second * step)[:, axis], minlength=count_particles)
                         - xp.bincount(first, weights=(weight_first * step)[:, axis], minlength=count_particles))
                x[:, axis] += scale * moved
        q[particles] = x
        return q

    def apply(self, xp, positions, global_step=None):
        """positions (n, 3) [m] -> (corrected positions (n, 3), Jacobi rounds run, edges still too long).

        global_step: optional (q, overshoot (E, 3)) -> q run at the start of every round with the edge
        vectors' overshoot beyond their limit (0 for edges within it); the solver passes a solve with its
        PD factorization, which moves a whole stretched region at once (Jacobi moves one edge per pass).
        """
        q = positions.copy()
        for round_index in range(self.rounds):
            vector, length = self._edge_vectors(xp, q)
            too_long = length > self.max_length
            if not bool(too_long.any()):
                return q, round_index, 0
            # an edge FAULT_RATIO × its limit is a numerical fault (a point thrown kilometres away), not
            # stretch: the state is left alone so the simulation's fault check reports it instead of the pass
            # quietly pulling the point back
            if round_index == 0 and bool((length > FAULT_RATIO * self.max_length).any()):
                return q, 0, int(too_long.sum())
            if global_step is not None:
                q = global_step(q, vector * xp.where(too_long, 1.0 - self.max_length / xp.maximum(length, 1e-30),
                                                      0.0)[:, None])
            q = self._passes(xp, q, self._neighbourhood(xp, too_long))
        _, length = self._edge_vectors(xp, q)
        return q, self.rounds, int((length > self.max_length).sum())

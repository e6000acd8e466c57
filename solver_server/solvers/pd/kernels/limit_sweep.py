"""Gauss–Seidel sweeps of the cloth hard strain limit (``EdgeStrainLimit.sweep``), for the local clean-up
between collider edge rounds.

The edges are split into colour classes in which no two edges share a particle (``colour_edges``), and a
sweep corrects them class by class, each edge from the positions its neighbours left. Inside a class the
corrections are independent, so the CPU runs every sweep of a call in ONE launch on one thread
(``sweeps_sequential``, stopping after a sweep that corrected nothing), and CUDA runs each class as a launch
with a thread per edge (``sweep_colour``): the same edges in the same order, the same positions.

Gauss–Seidel fixes a local spike (an edge that the collider rounds stretched over a brow) in a few sweeps
where Jacobi's averaging needs many passes (on the Suzanne scenes: worst stretch 3.6–5.1 % against
5.7–8.9 %), but carries a region-wide stretch to the region's last edges instead of spreading it: the
main limit pass (``kernels.limit``, after a global solve) stays Jacobi.
"""

from __future__ import annotations

import numpy as np
import warp as wp

from .limit import distance_step


@wp.func
def limit_edge(q: wp.array(dtype=wp.vec3d), edges: wp.array(dtype=wp.int32, ndim=2),
               max_length: wp.array(dtype=wp.float64), inverse_mass: wp.array(dtype=wp.float64), edge: int) -> int:
    """Shorten ``edge`` to its hard limit if longer, moving its ends by their inverse masses
    (``kernels.limit.distance_step``). Returns 1 if the edge was beyond its limit (and tolerance), else 0."""
    step = distance_step(q, edges, max_length, inverse_mass, edge)
    if wp.length_sq(step) == wp.float64(0.0):
        return 0
    i = edges[edge, 0]
    j = edges[edge, 1]
    q[i] = q[i] - inverse_mass[i] * step
    q[j] = q[j] + inverse_mass[j] * step
    return 1


@wp.kernel
def sweeps_sequential(edges: wp.array(dtype=wp.int32, ndim=2), order: wp.array(dtype=wp.int32),
                      max_length: wp.array(dtype=wp.float64), inverse_mass: wp.array(dtype=wp.float64),
                      sweeps: int, q: wp.array(dtype=wp.vec3d)):
    """One thread: up to ``sweeps`` sweeps over the edges in colour ``order``; stops after a sweep that
    corrected nothing (a further one would change nothing)."""
    for _sweep in range(sweeps):
        corrected = int(0)
        for k in range(order.shape[0]):
            corrected += limit_edge(q, edges, max_length, inverse_mass, order[k])
        if corrected == 0:
            break


@wp.kernel
def sweep_colour(edges: wp.array(dtype=wp.int32, ndim=2), order: wp.array(dtype=wp.int32), first: int,
                 max_length: wp.array(dtype=wp.float64), inverse_mass: wp.array(dtype=wp.float64),
                 q: wp.array(dtype=wp.vec3d)):
    """One colour class, a thread per edge: thread t corrects edge order[first + t]."""
    limit_edge(q, edges, max_length, inverse_mass, order[first + wp.tid()])


def colour_edges(edges: np.ndarray, particle_count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Colour classes of ``edges`` (E, 2) such that no two edges of a class share a particle.

    Each class is a maximal matching built by Luby-style rounds with fixed random priorities: an
    uncoloured edge whose two particles are still free in this class joins it when its priority is the
    highest among such edges at both of its particles. Vectorized per round. Returns (order (E,) int32:
    edge indices sorted by class, class_start (K + 1,) int32: class k is order[class_start[k]:class_start[k + 1]]).
    """
    count = len(edges)
    colour = np.full(count, -1, dtype=np.int64)
    priority = np.random.default_rng(seed).permutation(count)
    current = 0
    while bool((colour < 0).any()):
        free = np.ones(particle_count, dtype=bool)
        while True:
            candidates = np.nonzero((colour < 0) & free[edges[:, 0]] & free[edges[:, 1]])[0]
            if len(candidates) == 0:
                break
            best = np.full(particle_count, -1, dtype=np.int64)
            ends = edges[candidates]
            np.maximum.at(best, ends[:, 0], priority[candidates])
            np.maximum.at(best, ends[:, 1], priority[candidates])
            own = priority[candidates]
            winners = candidates[(best[ends[:, 0]] == own) & (best[ends[:, 1]] == own)]
            colour[winners] = current
            free[edges[winners].ravel()] = False
        current += 1
    order = np.argsort(colour, kind="stable").astype(np.int32)
    class_start = np.searchsorted(colour[order], np.arange(current + 1)).astype(np.int32)
    return order, class_start

"""Warp kernels of the cloth hard strain limit (strain_limit.py): coloured Gauss–Seidel over edges.

The edges are split into colour classes in which no two edges share a particle (``colour_edges``), and a
sweep corrects them class by class. Inside a class the corrections are independent, so:

- on the CPU one thread runs every sweep of a call in ONE launch (``limit_sweeps_sequential``), class
  after class, and stops after a sweep that corrected nothing (a further sweep would change nothing);
- on CUDA each class is one launch of ``limit_colour`` with a thread per edge.

Both visit the same edges in the same order with the same arithmetic, so the CPU and a GPU produce the
same positions up to the order of floating-point rounding within a class (none: each particle is written by
one edge per class). After the edges of a sweep, particles resting on a collider are kept on the
collider's side of their contact plane (``keep_above_plane``): the limit then shortens an edge that wraps a
rim by sliding its points along the surface instead of pulling them into it.
"""

from __future__ import annotations

import numpy as np
import warp as wp

RELATIVE_TOLERANCE = wp.constant(1e-4)   # an edge within (1 + this) × its limit counts as within it


@wp.func
def limit_edge(q: wp.array(dtype=wp.vec3d), edges: wp.array(dtype=wp.int32, ndim=2),
               max_length: wp.array(dtype=wp.float64), inverse_mass: wp.array(dtype=wp.float64),
               relaxation: wp.float64, edge: int) -> int:
    """Shorten ``edge`` to its hard limit if longer, moving its ends by their inverse masses (PBD distance
    constraint, Müller et al. 2007). Returns 1 if the edge was beyond its limit (and tolerance), else 0."""
    i = edges[edge, 0]
    j = edges[edge, 1]
    vector = q[i] - q[j]
    length = wp.length(vector)
    limit = max_length[edge]
    over = length - limit
    if over <= limit * wp.float64(RELATIVE_TOLERANCE):
        return 0
    weight_i = inverse_mass[i]
    weight_j = inverse_mass[j]
    total = weight_i + weight_j
    if total <= wp.float64(0.0):
        return 0
    step = vector * (relaxation * over / (total * length))
    q[i] = q[i] - weight_i * step
    q[j] = q[j] + weight_j * step
    return 1


@wp.func
def keep_above_plane(q: wp.array(dtype=wp.vec3d), particle: int, point: wp.vec3d, normal: wp.vec3d):
    """Move ``particle`` back onto the plane through ``point`` with unit ``normal`` if it is below it (a
    negative particle or a zero normal: nothing to do)."""
    if particle < 0:
        return
    gap = wp.dot(q[particle] - point, normal)
    if gap < wp.float64(0.0):
        q[particle] = q[particle] - gap * normal


@wp.kernel
def limit_sweeps_sequential(edges: wp.array(dtype=wp.int32, ndim=2), order: wp.array(dtype=wp.int32),
                            max_length: wp.array(dtype=wp.float64), inverse_mass: wp.array(dtype=wp.float64),
                            relaxation: wp.float64, sweeps: int,
                            plane_particle: wp.array(dtype=wp.int32), plane_point: wp.array(dtype=wp.vec3d),
                            plane_normal: wp.array(dtype=wp.vec3d),
                            q: wp.array(dtype=wp.vec3d), result: wp.array(dtype=wp.int32)):
    """One thread: up to ``sweeps`` sweeps over the edges in colour ``order``, each followed by the contact
    planes; stops after a sweep with no edge beyond its limit. result[0] = sweeps run, result[1] = edges
    corrected in the last sweep."""
    corrected = int(0)
    run = int(0)
    for sweep in range(sweeps):
        corrected = int(0)
        for k in range(order.shape[0]):
            corrected += limit_edge(q, edges, max_length, inverse_mass, relaxation, order[k])
        for p in range(plane_particle.shape[0]):
            keep_above_plane(q, plane_particle[p], plane_point[p], plane_normal[p])
        run = sweep + 1
        if corrected == 0:
            break
    result[0] = run
    result[1] = corrected


@wp.kernel
def limit_colour(edges: wp.array(dtype=wp.int32, ndim=2), order: wp.array(dtype=wp.int32), first: int,
                 max_length: wp.array(dtype=wp.float64), inverse_mass: wp.array(dtype=wp.float64),
                 relaxation: wp.float64, q: wp.array(dtype=wp.vec3d), result: wp.array(dtype=wp.int32)):
    """One colour class on many threads: thread t corrects edge order[first + t]; result[1] counts them."""
    edge = order[first + wp.tid()]
    if limit_edge(q, edges, max_length, inverse_mass, relaxation, edge) == 1:
        wp.atomic_add(result, 1, 1)


@wp.kernel
def planes_parallel(plane_particle: wp.array(dtype=wp.int32), plane_point: wp.array(dtype=wp.vec3d),
                    plane_normal: wp.array(dtype=wp.vec3d), q: wp.array(dtype=wp.vec3d)):
    """The contact planes, a thread per plane (each particle has at most one)."""
    p = wp.tid()
    keep_above_plane(q, plane_particle[p], plane_point[p], plane_normal[p])


@wp.kernel
def edge_overshoot(edges: wp.array(dtype=wp.int32, ndim=2), max_length: wp.array(dtype=wp.float64),
                   fault_ratio: wp.float64, q: wp.array(dtype=wp.vec3d), overshoot: wp.array(dtype=wp.vec3d),
                   result: wp.array(dtype=wp.int32)):
    """overshoot[e] = the part of edge e's vector beyond its limit (0 within it, or within tolerance);
    result[0] counts edges beyond it, result[1] those beyond ``fault_ratio`` × it (a numerical fault)."""
    e = wp.tid()
    vector = q[edges[e, 0]] - q[edges[e, 1]]
    length = wp.length(vector)
    limit = max_length[e]
    if length - limit > limit * wp.float64(RELATIVE_TOLERANCE):
        overshoot[e] = vector * (wp.float64(1.0) - limit / length)
        wp.atomic_add(result, 0, 1)
        if length > fault_ratio * limit:
            wp.atomic_add(result, 1, 1)
    else:
        overshoot[e] = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))


def colour_edges(edges: np.ndarray, particle_count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Colour classes of ``edges`` (E, 2) such that no two edges of a class share a particle.

    Each class is a maximal matching built by Luby-style rounds with fixed random priorities: an
    uncoloured edge whose two particles are still free in this class joins it when its priority is the
    highest among such edges at both of its particles. Vectorized per round (a few rounds per class, about
    2 × the largest particle degree classes). Returns (order (E,) int32: edge indices sorted by class,
    class_start (K + 1,) int32: class k is order[class_start[k]:class_start[k + 1]]).
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

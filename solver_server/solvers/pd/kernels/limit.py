"""Warp kernels of the cloth hard strain limit (strain_limit.py): Jacobi passes with constraint averaging.

A pass computes every edge's correction from the same positions (``edge_steps``), then moves each particle
by the average of its too-long edges' corrections times an over-relaxation factor (``apply_steps``,
gathering over the particle's incident edges in a fixed order, so the sums are the same on every device),
then keeps particles resting on a collider above their contact plane (``planes``). Jacobi with averaging
spreads a correction over the neighbourhood; a Gauss–Seidel sweep in colour order was tried and
concentrates a region's stretch at its last edges (a cloth stretched 8 % everywhere: worst edge 29 % after
16 sweeps, 12 % after 16 Jacobi passes), which the collider pushes after it then add to.

Every kernel takes ``first`` and ``chunk``: thread t handles items [first + t·chunk, first + (t + 1)·chunk)
(``kernels.launch_items``: one thread looping over all items on the CPU, a thread per item on CUDA). Same
source, same arithmetic, same order of sums.
"""

from __future__ import annotations

import warp as wp

RELATIVE_TOLERANCE = wp.constant(1e-4)   # an edge within (1 + this) × its limit counts as within it


@wp.func
def distance_step(q: wp.array(dtype=wp.vec3d), edges: wp.array(dtype=wp.int32, ndim=2),
                  max_length: wp.array(dtype=wp.float64), inverse_mass: wp.array(dtype=wp.float64),
                  edge: int) -> wp.vec3d:
    """λ n̂ of the PBD distance constraint (Müller et al. 2007) of an edge beyond its limit (and tolerance):
    λ = (l − l_max) / (w_i + w_j), n̂ = (q_i − q_j) / l; end i moves by −w_i λ n̂, end j by +w_j λ n̂. The zero
    vector for an edge within its limit or with both ends fixed. Shared by the Jacobi passes here and the
    Gauss–Seidel sweeps (``kernels.limit_sweep``)."""
    i = edges[edge, 0]
    j = edges[edge, 1]
    vector = q[i] - q[j]
    length = wp.length(vector)
    limit = max_length[edge]
    over = length - limit
    total = inverse_mass[i] + inverse_mass[j]
    if over <= limit * wp.float64(RELATIVE_TOLERANCE) or total <= wp.float64(0.0):
        return wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
    return vector * (over / (total * length))


@wp.func
def edge_step(q: wp.array(dtype=wp.vec3d), edges: wp.array(dtype=wp.int32, ndim=2),
              max_length: wp.array(dtype=wp.float64), inverse_mass: wp.array(dtype=wp.float64), edge: int,
              step: wp.array(dtype=wp.vec3d), active: wp.array(dtype=wp.int32)) -> int:
    """step[edge] = ``distance_step`` of the edge; active[edge] = 1 if it is beyond its limit, else 0.
    Returns active[edge]."""
    correction = distance_step(q, edges, max_length, inverse_mass, edge)
    step[edge] = correction
    if wp.length_sq(correction) > wp.float64(0.0):
        active[edge] = 1
        return 1
    active[edge] = 0
    return 0


@wp.func
def edge_steps_of(chosen: wp.array(dtype=wp.int32), edges: wp.array(dtype=wp.int32, ndim=2),
                  max_length: wp.array(dtype=wp.float64), inverse_mass: wp.array(dtype=wp.float64),
                  q: wp.array(dtype=wp.vec3d), first: int, last: int, step: wp.array(dtype=wp.vec3d),
                  active: wp.array(dtype=wp.int32)) -> int:
    """Corrections of the edges chosen[first:last]; returns how many are active."""
    found = int(0)
    for k in range(first, last):
        found += edge_step(q, edges, max_length, inverse_mass, chosen[k], step, active)
    return found


@wp.func
def apply_steps_of(particles: wp.array(dtype=wp.int32), incident_start: wp.array(dtype=wp.int32),
                   incident_edge: wp.array(dtype=wp.int32), incident_sign: wp.array(dtype=wp.float64),
                   inverse_mass: wp.array(dtype=wp.float64), relaxation: wp.float64, step: wp.array(dtype=wp.vec3d),
                   active: wp.array(dtype=wp.int32), first: int, last: int, q: wp.array(dtype=wp.vec3d)):
    """Particles particles[first:last] move by relaxation · w_p · (mean of their active edges' signed steps);
    incident_sign is −1 where the particle is the edge's first end, +1 where it is the second. Edges outside
    this round's choice must have active = 0."""
    for index in range(first, last):
        particle = particles[index]
        weight = inverse_mass[particle]
        if weight > wp.float64(0.0):
            total = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
            count = int(0)
            for k in range(incident_start[particle], incident_start[particle + 1]):
                edge = incident_edge[k]
                if active[edge] == 1:
                    total = total + incident_sign[k] * step[edge]
                    count += 1
            if count > 0:
                q[particle] = q[particle] + (relaxation * weight / wp.float64(count)) * total


@wp.func
def planes_of(plane_particle: wp.array(dtype=wp.int32), plane_point: wp.array(dtype=wp.vec3d),
              plane_normal: wp.array(dtype=wp.vec3d), first: int, last: int, q: wp.array(dtype=wp.vec3d)):
    """Particles of items [first, last) below the plane through plane_point with unit plane_normal go back
    onto it (a negative particle or a zero normal: nothing to do)."""
    for p in range(first, last):
        particle = plane_particle[p]
        if particle >= 0:
            normal = plane_normal[p]
            gap = wp.dot(q[particle] - plane_point[p], normal)
            if gap < wp.float64(0.0):
                q[particle] = q[particle] - gap * normal


@wp.kernel
def edge_steps(chosen: wp.array(dtype=wp.int32), edges: wp.array(dtype=wp.int32, ndim=2),
               max_length: wp.array(dtype=wp.float64), inverse_mass: wp.array(dtype=wp.float64),
               q: wp.array(dtype=wp.vec3d), first: int, chunk: int, step: wp.array(dtype=wp.vec3d),
               active: wp.array(dtype=wp.int32), result: wp.array(dtype=wp.int32)):
    """Corrections of the edges chosen[first + t·chunk : first + (t + 1)·chunk]; result[0] counts the active ones."""
    first = first + wp.tid() * chunk
    found = edge_steps_of(chosen, edges, max_length, inverse_mass, q, first, wp.min(first + chunk, chosen.shape[0]),
                          step, active)
    if found > 0:
        wp.atomic_add(result, 0, found)


@wp.kernel
def apply_steps(particles: wp.array(dtype=wp.int32), incident_start: wp.array(dtype=wp.int32),
                incident_edge: wp.array(dtype=wp.int32), incident_sign: wp.array(dtype=wp.float64),
                inverse_mass: wp.array(dtype=wp.float64), relaxation: wp.float64, step: wp.array(dtype=wp.vec3d),
                active: wp.array(dtype=wp.int32), first: int, chunk: int, q: wp.array(dtype=wp.vec3d)):
    """``apply_steps_of`` for particles[first + t·chunk : first + (t + 1)·chunk]."""
    first = first + wp.tid() * chunk
    apply_steps_of(particles, incident_start, incident_edge, incident_sign, inverse_mass, relaxation, step, active,
                   first, wp.min(first + chunk, particles.shape[0]), q)


@wp.kernel
def planes(plane_particle: wp.array(dtype=wp.int32), plane_point: wp.array(dtype=wp.vec3d),
           plane_normal: wp.array(dtype=wp.vec3d), first: int, chunk: int, q: wp.array(dtype=wp.vec3d)):
    """``planes_of`` for items [first + t·chunk, first + (t + 1)·chunk)."""
    first = first + wp.tid() * chunk
    planes_of(plane_particle, plane_point, plane_normal, first, wp.min(first + chunk, plane_particle.shape[0]), q)


@wp.kernel
def passes_sequential(chosen: wp.array(dtype=wp.int32), edges: wp.array(dtype=wp.int32, ndim=2),
                      max_length: wp.array(dtype=wp.float64), inverse_mass: wp.array(dtype=wp.float64),
                      particles: wp.array(dtype=wp.int32), incident_start: wp.array(dtype=wp.int32),
                      incident_edge: wp.array(dtype=wp.int32), incident_sign: wp.array(dtype=wp.float64),
                      relaxation: wp.float64, plane_particle: wp.array(dtype=wp.int32),
                      plane_point: wp.array(dtype=wp.vec3d), plane_normal: wp.array(dtype=wp.vec3d), passes: int,
                      step: wp.array(dtype=wp.vec3d), active: wp.array(dtype=wp.int32), q: wp.array(dtype=wp.vec3d)):
    """The CPU layout of a round: up to ``passes`` passes (edge steps, particle moves, contact planes) in one
    thread and one launch, stopping after a pass that finds no edge beyond its limit; the same arithmetic
    in the same order as the three kernels above launched per pass (the CUDA layout)."""
    for _ in range(passes):
        found = edge_steps_of(chosen, edges, max_length, inverse_mass, q, 0, chosen.shape[0], step, active)
        if found == 0:
            break
        apply_steps_of(particles, incident_start, incident_edge, incident_sign, inverse_mass, relaxation, step,
                       active, 0, particles.shape[0], q)
        planes_of(plane_particle, plane_point, plane_normal, 0, plane_particle.shape[0], q)


@wp.kernel
def check_sequential(edges: wp.array(dtype=wp.int32, ndim=2), max_length: wp.array(dtype=wp.float64),
                     fault_ratio: wp.float64, q: wp.array(dtype=wp.vec3d), overshoot: wp.array(dtype=wp.vec3d),
                     touched: wp.array(dtype=wp.int32), moved: wp.array(dtype=wp.int32),
                     chosen: wp.array(dtype=wp.int32), particles: wp.array(dtype=wp.int32),
                     counts: wp.array(dtype=wp.int32)):
    """The CPU layout of ``EdgeStrainLimit._check_and_choose`` in one thread: ``overshoot_of``
    every edge (counts[2]: edges beyond their limit, counts[3]: faults); chosen[:counts[0]] = the edges
    (ascending) that share a particle with an edge beyond its limit, particles[:counts[1]] = the particles
    (ascending) of those edges. touched, moved: (n,) scratch flags."""
    for p in range(touched.shape[0]):
        touched[p] = 0
        moved[p] = 0
    too_long = int(0)
    faulty = int(0)
    for e in range(edges.shape[0]):
        beyond, fault = overshoot_of(edges, max_length, fault_ratio, q, e, overshoot)
        if beyond == 1:
            touched[edges[e, 0]] = 1
            touched[edges[e, 1]] = 1
        too_long += beyond
        faulty += fault
    found = int(0)
    for e in range(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        if touched[i] == 1 or touched[j] == 1:
            chosen[found] = e
            found += 1
            moved[i] = 1
            moved[j] = 1
    kept = int(0)
    for p in range(moved.shape[0]):
        if moved[p] == 1:
            particles[kept] = p
            kept += 1
    counts[0] = found
    counts[1] = kept
    counts[2] = too_long
    counts[3] = faulty


@wp.func
def overshoot_of(edges: wp.array(dtype=wp.int32, ndim=2), max_length: wp.array(dtype=wp.float64),
                 fault_ratio: wp.float64, q: wp.array(dtype=wp.vec3d), e: int, overshoot: wp.array(dtype=wp.vec3d)):
    """overshoot[e] = the part of edge e's vector beyond its limit (0 within it, or within tolerance). Returns
    (1 if beyond, 1 if beyond ``fault_ratio`` × the limit: a numerical fault)."""
    vector = q[edges[e, 0]] - q[edges[e, 1]]
    length = wp.length(vector)
    limit = max_length[e]
    if length - limit > limit * wp.float64(RELATIVE_TOLERANCE):
        overshoot[e] = vector * (wp.float64(1.0) - limit / length)
        faulty = int(0)
        if length > fault_ratio * limit:
            faulty = 1
        return 1, faulty
    overshoot[e] = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
    return 0, 0


@wp.kernel
def edge_overshoot(edges: wp.array(dtype=wp.int32, ndim=2), max_length: wp.array(dtype=wp.float64),
                   fault_ratio: wp.float64, q: wp.array(dtype=wp.vec3d), first: int, chunk: int,
                   overshoot: wp.array(dtype=wp.vec3d), result: wp.array(dtype=wp.int32)):
    """``overshoot_of`` for edges [first + t·chunk, first + (t + 1)·chunk); result[0] counts edges beyond their
    limit, result[1] those beyond ``fault_ratio`` × it."""
    start = first + wp.tid() * chunk
    too_long = int(0)
    faulty = int(0)
    for e in range(start, wp.min(start + chunk, edges.shape[0])):
        beyond, fault = overshoot_of(edges, max_length, fault_ratio, q, e, overshoot)
        too_long += beyond
        faulty += fault
    if too_long > 0:
        wp.atomic_add(result, 0, too_long)
    if faulty > 0:
        wp.atomic_add(result, 1, faulty)

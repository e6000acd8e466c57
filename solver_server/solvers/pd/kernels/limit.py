"""Warp kernels of the cloth hard strain limit (strain_limit.py): Jacobi passes with constraint averaging.

A pass computes every edge's correction from the same positions (``edge_steps_of``), then moves each particle
by the average of its too-long edges' corrections times an over-relaxation factor (``apply_steps_of``,
gathering over the particle's incident edges in a fixed order, so the sums are the same on every device),
then keeps particles resting on a collider above their contact plane (``planes_of``). The CPU runs a round's
passes in one thread (``passes_sequential``), CUDA a kernel per step over flags, with no host decision
(``mark_overshoot`` … ``planes_unless_halted``). Jacobi with averaging
spreads a correction over the neighbourhood; a Gauss–Seidel sweep in colour order was tried and
concentrates a region's stretch at its last edges (a cloth stretched 8 % everywhere: worst edge 29 % after
16 sweeps, 12 % after 16 Jacobi passes), which the collider pushes after it then add to.

A kernel that takes ``first`` and ``chunk`` handles items [first + t·chunk, first + (t + 1)·chunk) in thread t
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
def apply_steps(particles: wp.array(dtype=wp.int32), incident_start: wp.array(dtype=wp.int32),
                incident_edge: wp.array(dtype=wp.int32), incident_sign: wp.array(dtype=wp.float64),
                inverse_mass: wp.array(dtype=wp.float64), relaxation: wp.float64, step: wp.array(dtype=wp.vec3d),
                active: wp.array(dtype=wp.int32), first: int, chunk: int, q: wp.array(dtype=wp.vec3d)):
    """``apply_steps_of`` for particles[first + t·chunk : first + (t + 1)·chunk]."""
    first = first + wp.tid() * chunk
    apply_steps_of(particles, incident_start, incident_edge, incident_sign, inverse_mass, relaxation, step, active,
                   first, wp.min(first + chunk, particles.shape[0]), q)


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


# The device-resident rounds of ``EdgeStrainLimit`` in CUDA's layout: flags instead of compacted lists, no host
# decision, the CPU layout's early ends as flags. ``state`` (5,) int32: [edges beyond the limit in this round's
# check, faults among them, halted (a fault in the first round's check), edges active in this pass, passes go on].


@wp.kernel
def begin_round(state: wp.array(dtype=wp.int32)):
    """One thread: the round's counts start at zero and its passes may run (the halt flag stays)."""
    state[0] = 0
    state[1] = 0
    state[4] = 1


@wp.kernel
def begin_pass(state: wp.array(dtype=wp.int32)):
    """One thread: no edge active yet in this pass."""
    state[3] = 0


@wp.kernel
def end_pass(state: wp.array(dtype=wp.int32)):
    """One thread: a pass that found no edge beyond its limit ends the round's passes (as ``passes_sequential``)."""
    if state[3] == 0:
        state[4] = 0


@wp.kernel
def mark_overshoot(edges: wp.array(dtype=wp.int32, ndim=2), max_length: wp.array(dtype=wp.float64),
                   fault_ratio: wp.float64, q: wp.array(dtype=wp.vec3d), overshoot: wp.array(dtype=wp.vec3d),
                   touched: wp.array(dtype=wp.int32), state: wp.array(dtype=wp.int32)):
    """Per edge: ``overshoot_of``; both particles of an edge beyond its limit marked touched (cleared by the
    caller); state[0] counts such edges and state[1] the faults among them."""
    e = wp.tid()
    beyond, fault = overshoot_of(edges, max_length, fault_ratio, q, e, overshoot)
    if beyond == 1:
        touched[edges[e, 0]] = 1
        touched[edges[e, 1]] = 1
        wp.atomic_add(state, 0, 1)
    if fault == 1:
        wp.atomic_add(state, 1, 1)


@wp.kernel
def halt_on_fault(state: wp.array(dtype=wp.int32)):
    """One thread, after the first round's marks: a fault halts every later kernel of the call (the state is left
    for the simulation's fault check, as the CPU layout leaves it); no fault, no halt (a new call starts here)."""
    state[2] = 0
    if state[1] > 0:
        state[2] = 1


@wp.kernel
def choose_edges(edges: wp.array(dtype=wp.int32, ndim=2), touched: wp.array(dtype=wp.int32),
                 chosen: wp.array(dtype=wp.int32), active: wp.array(dtype=wp.int32)):
    """chosen[e] = 1 for an edge that shares a particle with an edge beyond its limit (the CPU layout's
    ``check_sequential`` list, as flags); every edge inactive."""
    e = wp.tid()
    chosen[e] = 0
    if touched[edges[e, 0]] == 1 or touched[edges[e, 1]] == 1:
        chosen[e] = 1
    active[e] = 0


@wp.kernel
def chosen_edge_steps(chosen: wp.array(dtype=wp.int32), state: wp.array(dtype=wp.int32),
                      edges: wp.array(dtype=wp.int32, ndim=2), max_length: wp.array(dtype=wp.float64),
                      inverse_mass: wp.array(dtype=wp.float64), q: wp.array(dtype=wp.vec3d),
                      step: wp.array(dtype=wp.vec3d), active: wp.array(dtype=wp.int32)):
    """``edge_step`` of every chosen edge while the passes go on and the call is not halted, counting the active
    ones in state[3]; every other edge inactive."""
    e = wp.tid()
    if chosen[e] == 1 and state[2] == 0 and state[4] == 1:
        if edge_step(q, edges, max_length, inverse_mass, e, step, active) == 1:
            wp.atomic_add(state, 3, 1)
    else:
        active[e] = 0


@wp.kernel
def planes_unless_halted(state: wp.array(dtype=wp.int32), plane_particle: wp.array(dtype=wp.int32),
                         plane_point: wp.array(dtype=wp.vec3d), plane_normal: wp.array(dtype=wp.vec3d),
                         q: wp.array(dtype=wp.vec3d)):
    """``planes_of`` for plane tid after a pass with an active edge (``passes_sequential`` skips the planes of a
    pass that finds none)."""
    p = wp.tid()
    if state[3] > 0:
        planes_of(plane_particle, plane_point, plane_normal, p, p + 1, q)

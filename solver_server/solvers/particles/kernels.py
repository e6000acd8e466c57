"""Warp kernels of the particle hair substep (solver.py): one thread per strand, looping over its particles.

A strand's substep is a chain of sequential passes (accelerations scattered from springs and joints, the
symplectic Euler update, the rigid-length blend and the distance clamp rebuilt from the root), so a
thread owns one strand and walks it in order: no atomics, the same sums in the same order on the CPU and
on CUDA. Point arrays are flat (S·P, 3) views of the solver's (S, P, 3) arrays (point p of strand s at
s·P + p); per-spring and per-joint arrays are 2-d (S, P−1), (S, P−2).

The arithmetic follows the vectorized formulas documented in ``solver.py`` operation for operation
(cumulative sums are summed first and then added to their anchor, as the whole-array reference does:
tests/physics_fasthair/particle_reference.py).
"""

from __future__ import annotations

import warp as wp

from ...kernels.air import air_drag_rate

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken, half the compile time

TINY = wp.constant(1e-15)          # lengths at or below this count as zero (not rescaled, no division by them)
STRAIGHT = wp.constant(1e-12)      # sin θ below this: a straight joint takes no angle force
CLAMP_SLACK = wp.constant(1e-12)  # relative rounding of a squared segment length that the clamp leaves alone
RIGID_FLOOR = wp.constant(1e-6)    # a strand recovering from a teleport blends towards its rigid chain above this

@wp.func
def inverse_length(length: wp.float64) -> wp.float64:
    return wp.float64(1.0) / wp.max(length, wp.float64(TINY))


@wp.func
def spring_acceleration(vector: wp.vec3d, length: wp.float64, inverse: wp.float64, rest: wp.float64,
                        stiffness: wp.float64, stretch_stiffness: wp.float64) -> wp.vec3d:
    """Acceleration [m/s²] a spring along ``vector`` (from its first particle to its second, of ``length``
    and ``inverse`` = 1 / max(length, TINY)) applies to its first particle (the second takes minus it):
    k·Δx when compressed, k'·Δx² when stretched (``stretch_stiffness`` k' = k / (stretch_scale·L),
    precomputed); zero for a zero rest length (padding)."""
    zero = wp.float64(0.0)
    if rest <= zero:
        return wp.vec3d(zero, zero, zero)
    extension = length - rest
    magnitude = stiffness * extension
    if extension > zero:
        magnitude = stretch_stiffness * extension * extension
    return vector * (magnitude * inverse)


@wp.func
def joint_accelerations(t1: wp.vec3d, t2: wp.vec3d, inverse1: wp.float64, inverse2: wp.float64,
                        coefficient: wp.float64, rest_angle: wp.float64):
    """Accelerations [m/s²] of the turning-angle spring of one joint on its previous and next particle (the
    middle particle takes minus their sum); t1, t2 the unit segments, inverse1, inverse2 their inverse
    lengths (see ``ParticleHairSolver.angle_accelerations`` for the formulas)."""
    zero = wp.float64(0.0)
    one = wp.float64(1.0)
    nothing = wp.vec3d(zero, zero, zero)
    if coefficient == zero:
        return nothing, nothing
    cosine = wp.clamp(wp.dot(t1, t2), -one, one)
    sine = wp.length(wp.cross(t1, t2))
    if sine <= wp.float64(STRAIGHT):
        return nothing, nothing
    scale = coefficient * (wp.atan2(sine, cosine) - rest_angle) / sine
    return -scale * inverse1 * (t2 - cosine * t1), scale * inverse2 * (t1 - cosine * t2)


@wp.func
def rest_length_segment(segment: wp.vec3d, target: wp.float64) -> wp.vec3d:
    """``segment`` rescaled to length ``target``; a zero-length segment stays."""
    length = wp.length(segment)
    if length <= wp.float64(TINY):
        return segment
    return segment * (target / length)


@wp.func
def clamped_segment(segment: wp.vec3d, shortest: wp.float64, longest: wp.float64) -> wp.vec3d:
    """``segment`` brought to a length within [shortest, longest] (unchanged inside it; a zero-length segment
    stays)."""
    length_sq = wp.dot(segment, segment)
    if length_sq <= wp.float64(TINY) * wp.float64(TINY):
        return segment
    if length_sq > longest * longest:
        return segment * (longest / wp.sqrt(length_sq))
    if length_sq < shortest * shortest:
        return segment * (shortest / wp.sqrt(length_sq))
    return segment


@wp.func
def beyond_clamp(segment: wp.vec3d, shortest: wp.float64, longest: wp.float64) -> bool:
    """Whether ``segment`` lies outside [shortest, longest] by more than rounding (CLAMP_SLACK of its squared
    length: a segment the clamp just set to a bound is within it)."""
    length_sq = wp.dot(segment, segment)
    slack = wp.float64(CLAMP_SLACK)
    return length_sq > wp.float64(TINY) * wp.float64(TINY) and (
        length_sq > longest * longest * (wp.float64(1.0) + slack)
        or length_sq < shortest * shortest * (wp.float64(1.0) - slack))


@wp.func
def kept_above_plane(segment: wp.vec3d, start: wp.vec3d, plane_point: wp.vec3d, normal: wp.vec3d) -> wp.vec3d:
    """``segment`` from ``start`` [m], its length kept, turned so that its end does not fall below the plane
    through ``plane_point`` with unit ``normal`` (zero: no plane): unchanged where it ends on or above it, else
    the nearest direction (in the plane of the segment and the normal) whose end lies on the plane. A particle
    resting on a collider keeps to its contact plane while the clamp shortens its segment, instead of being
    pulled into the surface and pushed back out along the normal, which stretches the segment again."""
    zero = wp.float64(0.0)
    if wp.dot(normal, normal) == zero or wp.dot(start + segment - plane_point, normal) >= zero:
        return segment
    length = wp.length(segment)
    if length <= wp.float64(TINY):
        return segment
    tangential = segment - wp.dot(segment, normal) * normal
    span = wp.length(tangential)
    if span <= wp.float64(1e-12) * length:
        return segment
    rise = wp.clamp(wp.dot(plane_point - start, normal) / length, wp.float64(-1.0), wp.float64(1.0))
    return length * (rise * normal + wp.sqrt(wp.float64(1.0) - rise * rise) * (tangential / span))


@wp.func
def checked_point(x: wp.vec3d, previous: wp.vec3d, rest: wp.float64, largest_sq: wp.float64) -> wp.float64:
    """Fold one particle into a strand's end-of-step figure: the largest (segment length / rest length)² over
    segments with a positive rest length (from ``previous`` to x)."""
    segment = x - previous
    length_sq = wp.dot(segment, segment)
    if rest > wp.float64(0.0) and length_sq > largest_sq * rest * rest:
        largest_sq = length_sq / (rest * rest)
    return largest_sq


@wp.kernel
def internal_accelerations(positions: wp.array(dtype=wp.vec3d), points: int,
                           rest_lengths: wp.array2d(dtype=wp.float64), spring_stiffness: wp.array2d(dtype=wp.float64),
                           spring_stretch: wp.array2d(dtype=wp.float64), rest_lengths2: wp.array2d(dtype=wp.float64),
                           bend_stiffness: wp.array2d(dtype=wp.float64), bend_stretch: wp.array2d(dtype=wp.float64),
                           rest_angles: wp.array2d(dtype=wp.float64), angle_coefficient: wp.array2d(dtype=wp.float64),
                           acceleration: wp.array(dtype=wp.vec3d)):
    """acceleration (S·P, 3) [m/s²] of the neighbour, second-neighbour and angle springs (zero stiffness
    arrays switch a kind off) added to the values ``acceleration`` holds: element by element with the
    substep's own functions (the substep visits the same elements in a sliding window)."""
    strand = wp.tid()
    base = strand * points
    for gap in range(1, 3):
        for k in range(points - gap):
            vector = positions[base + k + gap] - positions[base + k]
            length = wp.length(vector)
            rest = rest_lengths[strand, k]
            stiffness = spring_stiffness[strand, k]
            stretch = spring_stretch[strand, k]
            if gap == 2:
                rest = rest_lengths2[strand, k]
                stiffness = bend_stiffness[strand, k]
                stretch = bend_stretch[strand, k]
            force = spring_acceleration(vector, length, inverse_length(length), rest, stiffness, stretch)
            acceleration[base + k] = acceleration[base + k] + force
            acceleration[base + k + gap] = acceleration[base + k + gap] - force
    for j in range(points - 2):
        first = positions[base + j + 1] - positions[base + j]
        second = positions[base + j + 2] - positions[base + j + 1]
        inverse1 = inverse_length(wp.length(first))
        inverse2 = inverse_length(wp.length(second))
        on_previous, on_next = joint_accelerations(first * inverse1, second * inverse2, inverse1, inverse2,
                                                   angle_coefficient[strand, j], rest_angles[strand, j])
        acceleration[base + j] = acceleration[base + j] + on_previous
        acceleration[base + j + 2] = acceleration[base + j + 2] + on_next
        acceleration[base + j + 1] = acceleration[base + j + 1] - (on_previous + on_next)


@wp.kernel
def substep(first_strand: int, positions: wp.array(dtype=wp.vec3d), velocities: wp.array(dtype=wp.vec3d),
            points: int, pinned: int, shift: wp.array(dtype=wp.vec3d), shifted: int,
            root_now: wp.array(dtype=wp.vec3d), tip_index: wp.array(dtype=wp.int32), field: wp.vec3d, h: wp.float64,
            velocity_keep: wp.float64, air_radius: wp.float64, air_linear_density: wp.float64, air_scale: wp.float64,
            rest_speed: wp.float64, rest_lengths: wp.array2d(dtype=wp.float64), spring_stiffness: wp.array2d(dtype=wp.float64),
            spring_stretch: wp.array2d(dtype=wp.float64), rest_lengths2: wp.array2d(dtype=wp.float64),
            bend_stiffness: wp.array2d(dtype=wp.float64), bend_stretch: wp.array2d(dtype=wp.float64),
            rest_angles: wp.array2d(dtype=wp.float64),
            angle_coefficient: wp.array2d(dtype=wp.float64), rigidity: wp.array(dtype=wp.float64),
            rigidity_decay: wp.float64, max_stretch: wp.float64, corrected: wp.array(dtype=wp.vec3d), finishing: int,
            largest_stretch: wp.array(dtype=wp.float64)):
    """One substep of strand ``first_strand + tid`` (solver.py steps 2–4) in one sweep from root to tip.

    A window holds particles k, k+1, k+2 and their partial accelerations: at particle k the elements whose
    last particle is k+2 are added (the spring k+1 → k+2, the second-neighbour spring k → k+2, the joint at
    k+1), which completes particle k's acceleration; it is integrated, blended towards the rigid chain and
    its segment from k−1 clamped, all while its neighbours are still in registers.

    ``positions`` are the substep's start; when ``shifted`` (teleported strands) they first move by
    ``shift`` (S, 3) and are written back so. ``corrected`` receives the clamped chain; ``velocities`` are
    updated in place; root particles k < pinned go to ``root_now`` (S·pinned, 3), particles after the tip
    (``tip_index``, padding) are not integrated; segments are clamped to [1 / max_stretch, max_stretch] × rest length;
    ``rigidity`` (S,) decays by ``rigidity_decay`` (the blend applies while a strand's rigidity is above
    RIGID_FLOOR). With
    ``finishing`` (the step's last substep, no colliders after it) the sweep also does :func:`finish`'s work."""
    strand = wp.tid() + first_strand
    base = strand * points
    zero = wp.float64(0.0)
    nothing = wp.vec3d(zero, zero, zero)
    offset = nothing
    if shifted != 0:
        offset = shift[strand]
    x0 = positions[base] + offset
    x1 = x0
    if points > 1:
        x1 = positions[base + 1] + offset
    d0 = x1 - x0
    length0 = wp.length(d0)
    inverse0 = inverse_length(length0)
    a0 = nothing
    a1 = nothing
    if points > 1:
        a0 = spring_acceleration(d0, length0, inverse0, rest_lengths[strand, 0], spring_stiffness[strand, 0],
                                 spring_stretch[strand, 0])
        a1 = -a0
    weight = rigidity[strand]
    tip = tip_index[strand]
    tip_final = nothing
    previous_final = nothing
    largest_sq = zero
    inverse_h = wp.float64(1.0) / h
    rest_speed_sq = rest_speed * rest_speed
    previous_predicted = nothing
    previous_current = nothing
    anchor = nothing
    rigid_total = nothing
    clamp_total = nothing
    for k in range(points):
        x2 = x1
        d1 = d0
        inverse1 = inverse0
        a2 = nothing
        if k + 2 < points:
            x2 = positions[base + k + 2] + offset
            d1 = x2 - x1
            length1 = wp.length(d1)
            inverse1 = inverse_length(length1)
            force = spring_acceleration(d1, length1, inverse1, rest_lengths[strand, k + 1],
                                        spring_stiffness[strand, k + 1], spring_stretch[strand, k + 1])
            a1 = a1 + force
            a2 = -force
            skip = x2 - x0
            skip_length = wp.length(skip)
            force = spring_acceleration(skip, skip_length, inverse_length(skip_length), rest_lengths2[strand, k],
                                        bend_stiffness[strand, k], bend_stretch[strand, k])
            a0 = a0 + force
            a2 = a2 - force
            on_previous, on_next = joint_accelerations(d0 * inverse0, d1 * inverse1, inverse0, inverse1,
                                                       angle_coefficient[strand, k], rest_angles[strand, k])
            a0 = a0 + on_previous
            a1 = a1 - (on_previous + on_next)
            a2 = a2 + on_next

        # particle k is complete: symplectic Euler with damping, air drag (its rate at the start velocity, taken
        # implicitly) and rest; kinematic roots
        start_velocity = velocities[base + k]
        drag = air_drag_rate(start_velocity, d0 * inverse0, air_radius, air_linear_density, air_scale)
        v = (start_velocity + h * (a0 + field)) * velocity_keep / (wp.float64(1.0) + h * drag)
        if wp.dot(v, v) < rest_speed_sq:
            v = nothing
        is_free = k >= pinned and k <= tip
        predicted = x0
        if is_free:
            predicted = x0 + h * v
        if k < pinned:
            predicted = root_now[strand * pinned + k]
            v = (predicted - x0) * inverse_h
        # rigid length constraint blended by rigidity (rest-length segments summed from the last root particle)
        current = predicted
        if weight > wp.float64(RIGID_FLOOR) and k >= pinned:
            rigid_total = rigid_total + rest_length_segment(predicted - previous_predicted, rest_lengths[strand, k - 1])
            current = predicted + weight * ((anchor + rigid_total) - predicted)
        # distance clamp: the chain rebuilt from the last root particle; the velocity takes its own segment's change
        final = current
        if k >= 1:
            segment = current - previous_current
            rest = rest_lengths[strand, k - 1]
            clamped = clamped_segment(segment, rest / max_stretch, max_stretch * rest)
            if is_free:
                v = v + (clamped - segment) * inverse_h
            if k >= pinned:
                clamp_total = clamp_total + clamped
                final = anchor + clamp_total
        if k == pinned - 1:
            anchor = current
        if shifted != 0:
            positions[base + k] = x0
        if finishing != 0:
            if k == tip:
                tip_final = final
            if k > tip:
                final = tip_final
                v = nothing
            rest = zero
            if k >= 1:
                rest = rest_lengths[strand, k - 1]
            largest_sq = checked_point(final, previous_final, rest, largest_sq)
            previous_final = final
        velocities[base + k] = v
        corrected[base + k] = final
        previous_predicted = predicted
        previous_current = current
        x0 = x1
        x1 = x2
        d0 = d1
        inverse0 = inverse1
        a0 = a1
        a1 = a2
    rigidity[strand] = weight * rigidity_decay
    if finishing != 0:
        largest_stretch[strand] = wp.sqrt(largest_sq)


@wp.kernel
def clamp_chain(first_strand: int, positions: wp.array(dtype=wp.vec3d), velocities: wp.array(dtype=wp.vec3d),
                points: int, pinned: int, tip_index: wp.array(dtype=wp.int32), rest_lengths: wp.array2d(dtype=wp.float64),
                max_stretch: wp.float64, h: wp.float64, normals: wp.array(dtype=wp.vec3d)):
    """The distance clamp of :func:`substep` again on strand ``first_strand + tid``, after the colliders moved
    some of its particles: the chain rebuilt from the last root particle with every segment clamped to
    [1 / max_stretch, max_stretch] × rest length, in place; a particle the colliders touched (its contact
    ``normals`` (S·P, 3), zero for the others) keeps to the plane through where they put it
    (:func:`kept_above_plane`). As in :func:`substep`, only a particle's own segment correction becomes velocity
    (the translation it inherits from segments nearer the root does not). A strand with no touched particle and
    every segment within the clamp is left exactly as it is (the chain rebuilt would differ in its last bits)."""
    strand = wp.tid() + first_strand
    base = strand * points
    tip = tip_index[strand]
    if pinned < 1 or tip < pinned:
        return
    zero = wp.float64(0.0)
    touched = int(0)
    for k in range(pinned, tip + 1):
        normal = normals[base + k]
        rest = rest_lengths[strand, k - 1]
        if wp.dot(normal, normal) != zero or beyond_clamp(positions[base + k] - positions[base + k - 1],
                                                          rest / max_stretch, max_stretch * rest):
            touched = 1
    if touched == 0:
        return
    previous = positions[base + pinned - 1]
    final = previous
    for k in range(pinned, tip + 1):
        x = positions[base + k]
        rest = rest_lengths[strand, k - 1]
        segment = x - previous
        clamped = kept_above_plane(clamped_segment(segment, rest / max_stretch, max_stretch * rest), final, x,
                                   normals[base + k])
        final = final + clamped
        velocities[base + k] = velocities[base + k] + (clamped - segment) / h
        positions[base + k] = final
        previous = x


@wp.kernel
def finish(first_strand: int, positions: wp.array(dtype=wp.vec3d), velocities: wp.array(dtype=wp.vec3d),
           points: int, tip_index: wp.array(dtype=wp.int32), rest_lengths: wp.array2d(dtype=wp.float64),
           largest_stretch: wp.array(dtype=wp.float64)):
    """End of a step for strand ``first_strand + tid``: padding particles after the tip sit on the tip at
    rest; the largest segment length / rest length over its real segments (0 for none). (Non-finite positions
    are the group's frame check.)"""
    strand = wp.tid() + first_strand
    base = strand * points
    zero = wp.float64(0.0)
    tip = tip_index[strand]
    tip_position = positions[base + tip]
    for k in range(tip + 1, points):
        positions[base + k] = tip_position
        velocities[base + k] = wp.vec3d(zero, zero, zero)
    largest_sq = zero
    previous = positions[base]
    for k in range(points):
        x = positions[base + k]
        rest = zero
        if k >= 1:
            rest = rest_lengths[strand, k - 1]
        largest_sq = checked_point(x, previous, rest, largest_sq)
        previous = x
    largest_stretch[strand] = wp.sqrt(largest_sq)

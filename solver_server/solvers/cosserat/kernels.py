"""Warp kernels of the force-transport Cosserat step (solver.py): one thread per strand, looping over its
segments inside the kernel.

``kinematics`` walks a strand root → tip: segment angular velocities Ω_i = Ω_root + Σ_{j≤i} w_j and, when
asked, node positions and velocities (cumulative sums of l d3 and l Ω × d3), plus the strand's largest |Ω|²
for the refinement and corrector decisions.

``articulated_step`` is the rest of a semi-implicit step for one strand, split into shorter parts for a strand
that turns fast (each strand decides for itself, on the device): the joint accelerations by the
articulated-body algorithm below, the predictor–corrector on the velocity-product terms (a second pass at
the part's mid velocity, on the same configuration), damping, and the quaternion update.

Articulated-body joint accelerations of a rod chain with ball joints (Featherstone's ABA). A strand is a
chain of rigid rods: segment i runs from node i to node i+1 (vector e_i = l_i d3_i, mass m_i, radius r);
joint i (i ≥ 1) is a ball joint at node i between segments i−1 and i. Segment 0 moves with the root frame
(kinematic). The joint coordinates are the world-frame relative angular velocities w_i (Ω_i = Ω_{i−1} + w_i),
so the joint acceleration is ẅ_i = α_i − α_{i−1} exactly.

Classical 6-vectors about a point p of a body: motion (α, a_p) (angular acceleration, acceleration of the
body point at p), force (n_p, f) (moment about p, force). Every body uses its proximal node as p.

* Rigid rod about its proximal node, with c = e/2:  n = I_p α + m c × a_p + Ω × I_p Ω,
  f = m (a_p + α × c + Ω × (Ω × c)), I_p = m (l²/3 + r²/4)(1 − d dᵀ) + m r²/2 d dᵀ.
* Parent → child (r = e_{i−1}): α_i = α_{i−1} + ẅ_i, a_i = a_{i−1} + α_{i−1} × r + κ_i with the
  velocity-product term κ_i = Ω_{i−1} × (Ω_{i−1} × r).
* Tip → root pass (the exact form of the seed's force transport, eqs. 3.9–3.15: the child hands its parent
  the load at their shared node together with the inertia that comes with it): the subtree from segment i
  on needs the wrench I^A_i (α_i, a_i) + p^A_i from its parent. The ball joint carries every force but only
  the joint's own moment Q_i (the CORDE stiffness moment); eliminating ẅ_i from the moment rows leaves the
  reduced inertia I^A − U D⁻¹ Uᵀ (U = I^A S, S = [1; 0]) and bias that are shifted to the parent's node
  with Xᵀ = [[1, [r]×], [0, 1]].
* Root → tip pass: ẅ_i = D⁻¹ (u_i − Uᵀ (X a_{i−1} + κ_i)).

Implicit joint stiffness (backward Euler in the joint's own coordinates, where the elastic energy is block
diagonal): the joint moment Q − K h (w + h ẅ) makes D = Sᵀ I^A S + h² K (a joint "armature") and
u = Q − h K w − Sᵀ p^A.

The symmetric 6 × 6 inertias are kept as blocks [[A, B], [Bᵀ, D]]; the tip → root pass keeps the child's
reduced inertia and wrench in registers and stores per joint only what the root → tip pass needs: the gains
D⁻¹Uᵀ, D⁻¹u, the parent's rod vector and κ (the root → tip pass is then two 3 × 3 products per joint and reads
no orientation). tests/physics_fasthair/cosserat_reference.py holds the same step as whole-array xp code (the
solver's implementation before these kernels), which the kernels are tested against.

Quaternions are (w, x, y, z) ``vec4d`` (quaternion.py's order, not Warp's quat layout). Per-segment arrays
are flat (S·M, ·) views of (S, M, ·) arrays (segment i of strand s at s·M + i); nodes (S·P, 3) with P = M + 1;
per-joint (S, M − 1, 3) arrays at s·(M − 1) + j; scalars per segment are 2-d (S, M).
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken


@wp.func
def quat_multiply(a: wp.vec4d, b: wp.vec4d) -> wp.vec4d:
    """Hamilton product a ⊗ b in (w, x, y, z) order."""
    return wp.vec4d(a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
                    a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
                    a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
                    a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0])


@wp.func
def quat_conjugate(q: wp.vec4d) -> wp.vec4d:
    return wp.vec4d(q[0], -q[1], -q[2], -q[3])


@wp.func
def quat_vector(q: wp.vec4d) -> wp.vec3d:
    return wp.vec3d(q[1], q[2], q[3])


@wp.func
def pure(v: wp.vec3d) -> wp.vec4d:
    return wp.vec4d(wp.float64(0.0), v[0], v[1], v[2])


@wp.func
def director(q: wp.vec4d) -> wp.vec3d:
    """d3 = R(q) e3 (quaternion.rotate: v + w t + u × t with t = 2 u × v)."""
    zero = wp.float64(0.0)
    u = quat_vector(q)
    e3 = wp.vec3d(zero, zero, wp.float64(1.0))
    t = wp.float64(2.0) * wp.cross(u, e3)
    return e3 + q[0] * t + wp.cross(u, t)


@wp.func
def skew(v: wp.vec3d) -> wp.mat33d:
    """[v]× (so [v]× u = v × u)."""
    zero = wp.float64(0.0)
    return wp.mat33d(zero, -v[2], v[1], v[2], zero, -v[0], -v[1], v[0], zero)


@wp.func
def times_skew(m: wp.mat33d, v: wp.vec3d) -> wp.mat33d:
    """m [v]× by rows (row k of m [v]× is m_k × v): 18 flops instead of a 3 × 3 product."""
    return wp.matrix_from_rows(wp.cross(m[0], v), wp.cross(m[1], v), wp.cross(m[2], v))


@wp.func
def skew_times(v: wp.vec3d, m: wp.mat33d) -> wp.mat33d:
    """[v]× m by columns (column j is v × m_j)."""
    t = wp.transpose(m)
    return wp.matrix_from_cols(wp.cross(v, t[0]), wp.cross(v, t[1]), wp.cross(v, t[2]))


@wp.func
def inverse_symmetric(m: wp.mat33d) -> wp.mat33d:
    """Inverse of a symmetric 3 × 3 matrix by the adjugate of its upper triangle."""
    a = m[0, 0]
    b = m[0, 1]
    c = m[0, 2]
    e = m[1, 1]
    f = m[1, 2]
    i = m[2, 2]
    co_a = e * i - f * f
    co_b = c * f - b * i
    co_c = b * f - c * e
    co_e = a * i - c * c
    co_f = b * c - a * f
    co_i = a * e - b * b
    inverse_determinant = wp.float64(1.0) / (a * co_a + b * co_b + c * co_c)
    return wp.mat33d(co_a, co_b, co_c, co_b, co_e, co_f, co_c, co_f, co_i) * inverse_determinant


@wp.func
def holding_moment(previous: wp.vec4d, current: wp.vec4d, stiffness: wp.vec3d, rest_darboux: wp.vec3d,
                   joint_length: wp.float64, valid: int) -> wp.vec3d:
    """World moment [N·m] the joint between two segments (orientations previous, current) applies to the
    distal one: the CORDE moment K (u − û) with u = (2/l̄) Im(q̄_prev ⊗ q_cur), mapped to the world as
    −Im(q_prev ⊗ (0, m) ⊗ q̄_cur) (solver.stiffness_torques); zero for an invalid joint."""
    zero = wp.float64(0.0)
    if valid == 0:
        return wp.vec3d(zero, zero, zero)
    darboux = wp.float64(2.0) * quat_vector(quat_multiply(quat_conjugate(previous), current)) / joint_length
    moment = wp.cw_mul(stiffness, darboux - rest_darboux)
    return -quat_vector(quat_multiply(quat_multiply(previous, pure(moment)), quat_conjugate(current)))


@wp.func
def chain_spins(strand: int, segments: int, free: wp.array2d(dtype=wp.int32),
                joint_velocities: wp.array(dtype=wp.vec3d), root_spin: wp.vec3d, omega: wp.array(dtype=wp.vec3d)):
    """omega (S·M, 3) [rad/s] of one strand, Ω_i = Ω_root + Σ_{j≤i, free} w_j; returns the strand's largest
    |Ω|²."""
    base = strand * segments
    zero = wp.float64(0.0)
    total = wp.vec3d(zero, zero, zero)
    largest = zero
    for i in range(segments):
        if free[strand, i] != 0:
            total = total + joint_velocities[base + i]
        current = root_spin + total
        omega[base + i] = current
        largest = wp.max(largest, wp.dot(current, current))
    return largest


@wp.kernel
def kinematics(first_strand: int, segments: int, orientations: wp.array(dtype=wp.vec4d),
               joint_velocities: wp.array(dtype=wp.vec3d), lengths: wp.array2d(dtype=wp.float64),
               free: wp.array2d(dtype=wp.int32), root_positions: wp.array(dtype=wp.vec3d),
               root_velocities: wp.array(dtype=wp.vec3d), root_omega: wp.array(dtype=wp.vec3d), with_nodes: int,
               omega: wp.array(dtype=wp.vec3d), positions: wp.array(dtype=wp.vec3d),
               node_velocities: wp.array(dtype=wp.vec3d), fastest_sq: wp.array(dtype=wp.float64)):
    """omega (S·M, 3) [rad/s] and the strand's largest |Ω|²; with ``with_nodes`` also node positions and
    velocities (S·P, 3) [m], [m/s] (sums from the root, then the root added, as the xp cumulative sums)."""
    strand = wp.tid() + first_strand
    fastest_sq[strand] = chain_spins(strand, segments, free, joint_velocities, root_omega[strand], omega)
    if with_nodes == 0:
        return
    base = strand * segments
    node = strand * (segments + 1)
    zero = wp.float64(0.0)
    reach = wp.vec3d(zero, zero, zero)
    sweep = wp.vec3d(zero, zero, zero)
    root_x = root_positions[strand]
    root_v = root_velocities[strand]
    positions[node] = root_x
    node_velocities[node] = root_v
    for i in range(segments):
        d3 = director(orientations[base + i])
        length = lengths[strand, i]
        reach = reach + length * d3
        sweep = sweep + length * wp.cross(omega[base + i], d3)
        positions[node + i + 1] = root_x + reach
        node_velocities[node + i + 1] = root_v + sweep


@wp.kernel
def turn_towards(first_strand: int, segments: int, orientations: wp.array(dtype=wp.vec4d),
                 lengths: wp.array2d(dtype=wp.float64), free: wp.array2d(dtype=wp.int32),
                 root_positions: wp.array(dtype=wp.vec3d), targets: wp.array(dtype=wp.vec3d),
                 moved: wp.array(dtype=wp.int32)):
    """Strand ``first_strand + tid`` with ``moved`` set: every free segment, from the root out, turned by the
    shortest arc so that its director points from its (new) proximal node to the target of its distal node
    (``targets`` (S·P, 3) [m]): follow the leader in orientations, the segment lengths kept. A segment whose
    target lies exactly behind it (no shortest arc) or on its proximal node keeps its orientation."""
    strand = wp.tid() + first_strand
    if moved[strand] == 0:
        return
    base = strand * segments
    node = strand * (segments + 1)
    one = wp.float64(1.0)
    tiny = wp.float64(1e-12)
    position = root_positions[strand]
    for i in range(segments):
        q = orientations[base + i]
        d3 = director(q)
        length = lengths[strand, i]
        if free[strand, i] != 0:
            wanted = targets[node + i + 1] - position
            distance = wp.length(wanted)
            if distance > tiny * (one + length):
                to = wanted / distance
                arc = wp.vec4d(one + wp.dot(d3, to), wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
                axis = wp.cross(d3, to)
                arc = wp.vec4d(arc[0], axis[0], axis[1], axis[2])
                size = wp.length(arc)
                if arc[0] > tiny and size > tiny:
                    q = quat_multiply(arc / size, q)
                    q = q / wp.length(q)
                    orientations[base + i] = q
                    d3 = director(q)
        position = position + length * d3


@wp.struct
class Chains:
    """The solver's constant strand data: segments M per strand, radius [m]; per segment (S, M) lengths [m],
    masses [kg], joint bend and twist stiffness [N·m/rad] of the joint at its proximal node, free (1: the joint
    moves); node masses (S, M + 1) [kg]; per joint (S·(M − 1), 3) CORDE stiffness and rest Darboux vectors,
    (S, M − 1) joint lengths [m] and validity."""
    segments: int
    radius: wp.float64
    lengths: wp.array2d(dtype=wp.float64)
    masses: wp.array2d(dtype=wp.float64)
    node_masses: wp.array2d(dtype=wp.float64)
    stiffness: wp.array(dtype=wp.vec3d)
    rest_darboux: wp.array(dtype=wp.vec3d)
    joint_lengths: wp.array2d(dtype=wp.float64)
    joint_valid: wp.array2d(dtype=wp.int32)
    bend: wp.array2d(dtype=wp.float64)
    twist: wp.array2d(dtype=wp.float64)
    free: wp.array2d(dtype=wp.int32)


@wp.struct
class JointWork:
    """Per-joint work arrays (S·M, ·) that the tip → root pass leaves for the root → tip pass: the gains
    D⁻¹ Uᵀ = [D⁻¹ A, D⁻¹ B] (two 3 × 3 blocks; D⁻¹ and A are symmetric), the solved torque D⁻¹ u, the parent
    rod's vector e_{i−1} [m] and the velocity-product term κ_i [m/s²]; and the joint accelerations ẅ."""
    gain_angular: wp.array(dtype=wp.mat33d)
    gain_linear: wp.array(dtype=wp.mat33d)
    solved_torque: wp.array(dtype=wp.vec3d)
    parent_edge: wp.array(dtype=wp.vec3d)
    velocity_product: wp.array(dtype=wp.vec3d)
    acceleration: wp.array(dtype=wp.vec3d)


@wp.func
def articulated_pass(strand: int, chains: Chains, h: wp.float64, orientations: wp.array(dtype=wp.vec4d),
                     joint_velocities: wp.array(dtype=wp.vec3d), omega: wp.array(dtype=wp.vec3d), field: wp.vec3d,
                     external: wp.array(dtype=wp.vec3d), has_external: int, root_alpha: wp.vec3d,
                     root_acceleration: wp.vec3d, work: JointWork):
    """Joint accelerations ẅ (work.acceleration, S·M × 3) [rad/s²] of one strand for the segment angular
    velocities in ``omega`` (the module's articulated-body algorithm; joint i between segments i − 1 and i,
    entry 0 zero). Node k's force is node_mass_k · field (+ external_k) and acts on segment k − 1 at its distal
    node."""
    segments = chains.segments
    radius = chains.radius
    lengths = chains.lengths
    masses = chains.masses
    free = chains.free
    gain_angular = work.gain_angular
    gain_linear = work.gain_linear
    solved_torque = work.solved_torque
    parent_edge = work.parent_edge
    velocity_product = work.velocity_product
    acceleration = work.acceleration
    base = strand * segments
    node = strand * (segments + 1)
    joint_base = strand * (segments - 1)
    zero = wp.float64(0.0)
    half = wp.float64(0.5)
    nothing = wp.vec3d(zero, zero, zero)
    identity = wp.identity(n=3, dtype=wp.float64)
    child_a = wp.mat33d()
    child_b = wp.mat33d()
    child_d = wp.mat33d()
    child_n = nothing
    child_f = nothing
    radius_sq = radius * radius
    q = orientations[base + segments - 1]
    d3 = director(q)
    for step in range(segments - 1):
        i = segments - 1 - step
        q_parent = orientations[base + i - 1]
        d3_parent = director(q_parent)
        length = lengths[strand, i]
        e = length * d3
        mass = masses[strand, i]
        # the rod's spatial inertia about its proximal node: [[I_p, m [c]×], [m [c]×ᵀ, m 1]], c = e/2
        length_sq = wp.dot(e, e)
        direction = e / wp.sqrt(wp.max(length_sq, wp.float64(1e-300)))
        along = wp.outer(direction, direction)
        inertia_p = (mass * (length_sq / wp.float64(3.0) + radius_sq / wp.float64(4.0))) * (identity - along) \
            + (mass * radius_sq * half) * along
        block_a = inertia_p
        block_b = mass * skew(half * e)
        block_d = mass * identity
        if step > 0:
            # the child's reduced inertia shifted to this node: Xᵀ I X with r = e_i (products with [r]× as crosses)
            lower = wp.transpose(child_b) - times_skew(child_d, e)
            block_a = block_a + (child_a - times_skew(child_b, e) + skew_times(e, lower))
            block_b = block_b + (child_b + skew_times(e, child_d))
            block_d = block_d + child_d
        along_d3 = wp.outer(d3, d3)
        joint_stiffness = chains.bend[strand, i] * (identity - along_d3) + chains.twist[strand, i] * along_d3
        # bias wrench of the rod: velocity products and the load at its distal node, plus the child's wrench
        spin = omega[base + i]
        force = chains.node_masses[strand, i + 1] * field
        if has_external != 0:
            force = force + external[node + i + 1]
        pending_n = wp.cross(spin, inertia_p * spin) - wp.cross(e, force)
        pending_f = mass * wp.cross(spin, wp.cross(spin, half * e)) - force
        if step > 0:
            pending_n = pending_n + (child_n + wp.cross(e, child_f))
            pending_f = pending_f + child_f
        spin_parent = omega[base + i - 1]
        e_parent = lengths[strand, i - 1] * d3_parent
        kappa = wp.cross(spin_parent, wp.cross(spin_parent, e_parent))
        if free[strand, i] != 0:
            # the ball joint: D = Sᵀ I^A S + h² K, U = I^A S = [A; Bᵀ]; reduced inertia I^A − U D⁻¹ Uᵀ
            d_inverse = inverse_symmetric(block_a + (h * h) * joint_stiffness)
            u_top = block_a
            u_bottom = wp.transpose(block_b)
            ci_top = u_top * d_inverse
            ci_bottom = u_bottom * d_inverse
            holding = holding_moment(q_parent, q, chains.stiffness[joint_base + i - 1],
                                     chains.rest_darboux[joint_base + i - 1], chains.joint_lengths[strand, i - 1],
                                     chains.joint_valid[strand, i - 1])
            u = holding - h * (joint_stiffness * joint_velocities[base + i]) - pending_n
            child_a = block_a - ci_top * wp.transpose(u_top)
            child_b = block_b - ci_top * wp.transpose(u_bottom)
            child_d = block_d - ci_bottom * wp.transpose(u_bottom)
            child_n = pending_n + child_b * kappa + ci_top * u
            child_f = pending_f + child_d * kappa + ci_bottom * u
        else:
            # a fixed joint (padding, zero-length segment) welds the rod to its parent
            d_inverse = identity
            ci_top = wp.mat33d()
            ci_bottom = wp.mat33d()
            u = nothing
            child_a = block_a
            child_b = block_b
            child_d = block_d
            child_n = pending_n + child_b * kappa
            child_f = pending_f + child_d * kappa
        gain_angular[base + i] = wp.transpose(ci_top)      # (A D⁻¹)ᵀ = D⁻¹ A
        gain_linear[base + i] = wp.transpose(ci_bottom)    # (Bᵀ D⁻¹)ᵀ = D⁻¹ B
        solved_torque[base + i] = d_inverse * u
        parent_edge[base + i] = e_parent
        velocity_product[base + i] = kappa
        q = q_parent
        d3 = d3_parent
    # root → tip: ẅ_i = D⁻¹ (u_i − Uᵀ (X a_{i−1} + κ_i)) = D⁻¹ u_i − D⁻¹ A α_{i−1} − D⁻¹ B a_i
    alpha = root_alpha
    linear = root_acceleration
    acceleration[base] = nothing
    for i in range(1, segments):
        linear = linear - wp.cross(parent_edge[base + i], alpha) + velocity_product[base + i]
        joint = solved_torque[base + i] - (gain_angular[base + i] * alpha + gain_linear[base + i] * linear)
        acceleration[base + i] = joint
        alpha = alpha + joint


@wp.func
def blended_root(start: wp.vec4d, end: wp.vec4d, fraction: wp.float64):
    """The root segment's orientation ``fraction`` of the way from ``start`` to ``end`` (normalized linear blend,
    the quaternions in one hemisphere)."""
    blend = start + fraction * (end - start)
    return blend / wp.length(blend)


@wp.kernel
def articulated_step(first_strand: int, chains: Chains, h: wp.float64, damping: wp.float64, max_turn: wp.float64,
                     max_refinement: int, orientations: wp.array(dtype=wp.vec4d),
                     joint_velocities: wp.array(dtype=wp.vec3d), omega: wp.array(dtype=wp.vec3d), field: wp.vec3d,
                     external: wp.array(dtype=wp.vec3d), has_external: int, root_alpha: wp.array(dtype=wp.vec3d),
                     root_acceleration: wp.array(dtype=wp.vec3d), root_omega_start: wp.array(dtype=wp.vec3d),
                     root_omega_end: wp.array(dtype=wp.vec3d), root_orientation_start: wp.array(dtype=wp.vec4d),
                     root_orientation: wp.array(dtype=wp.vec4d), fastest_sq: wp.array(dtype=wp.float64),
                     corrector_turn: wp.float64, work: JointWork, parts_taken: wp.array(dtype=wp.int32),
                     corrected: wp.array(dtype=wp.int32)):
    """A semi-implicit step of length h [s] of strand ``first_strand + tid`` (solver._substep after the forces),
    split for this strand alone into as many equal parts as keep its fastest segment (``fastest_sq``, |Ω|² at the
    step's start from ``kinematics``) from turning more than ``max_turn`` [rad] in one (at most
    ``max_refinement``); the forces (``field``, ``external``) hold over the parts, the root's angular velocity
    goes linearly from ``root_omega_start`` to ``root_omega_end`` and its orientation from
    ``root_orientation_start`` to ``root_orientation`` (the step's end). Each part: joint accelerations at the
    part's start velocities (``omega``), and when some segment turns by more than ``corrector_turn`` [rad] in the
    part, again at the part's mid velocity (``omega`` is overwritten with it); then w ← (w + h ẅ)/(1 + h·damping)
    on free joints, Ω from the part's end root velocity and q ← normalize(q + h/2 (0, Ω) ⊗ q), the root segment
    set to the root's orientation at the part's end. ``orientations`` and ``joint_velocities`` are updated in
    place; ``parts_taken`` (S,) counts the parts the strand stepped, ``corrected`` (S,) those that took the
    corrector (both added to)."""
    strand = wp.tid() + first_strand
    segments = chains.segments
    free = chains.free
    acceleration = work.acceleration
    base = strand * segments
    zero = wp.float64(0.0)
    half = wp.float64(0.5)
    largest = fastest_sq[strand]
    parts = int(1)
    turn = h * wp.sqrt(largest)
    if turn > max_turn:
        parts = wp.min(max_refinement, int(wp.ceil(turn / max_turn)))
    part = h / wp.float64(parts)
    spin_start = root_omega_start[strand]
    spin_change = root_omega_end[strand] - spin_start
    taken = int(0)
    for index in range(parts):
        begin = spin_start + (wp.float64(index) / wp.float64(parts)) * spin_change
        finish = root_omega_end[strand]
        if index + 1 < parts:
            finish = spin_start + (wp.float64(index + 1) / wp.float64(parts)) * spin_change
        if index > 0:
            largest = chain_spins(strand, segments, free, joint_velocities, begin, omega)
        articulated_pass(strand, chains, part, orientations, joint_velocities, omega, field, external, has_external,
                         root_alpha[strand], root_acceleration[strand], work)
        if part * part * largest > corrector_turn * corrector_turn:
            # mid velocity: w + h ẅ / 2 on free joints (the mean of w and the predicted w + h ẅ)
            mid_root = half * (begin + finish)
            total = wp.vec3d(zero, zero, zero)
            for i in range(segments):
                if free[strand, i] != 0:
                    w = joint_velocities[base + i]
                    total = total + half * (w + (w + part * acceleration[base + i]))
                omega[base + i] = mid_root + total
            articulated_pass(strand, chains, part, orientations, joint_velocities, omega, field, external,
                             has_external, root_alpha[strand], root_acceleration[strand], work)
            taken += 1
        keep = wp.float64(1.0) / (wp.float64(1.0) + part * damping)
        total = wp.vec3d(zero, zero, zero)
        for i in range(segments):
            w = wp.vec3d(zero, zero, zero)
            if free[strand, i] != 0:
                w = (joint_velocities[base + i] + part * acceleration[base + i]) * keep
                total = total + w
            joint_velocities[base + i] = w
            q = orientations[base + i]
            turned = q + (half * part) * quat_multiply(pure(finish + total), q)
            orientations[base + i] = turned / wp.length(turned)
        if index + 1 < parts:
            orientations[base] = blended_root(root_orientation_start[strand], root_orientation[strand],
                                              wp.float64(index + 1) / wp.float64(parts))
        else:
            orientations[base] = root_orientation[strand]
    parts_taken[strand] = parts_taken[strand] + parts
    corrected[strand] = corrected[strand] + taken

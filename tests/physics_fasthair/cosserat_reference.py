"""The Cosserat step written as whole-array xp code: the reference the Warp kernels
(solver_server/solvers/cosserat/kernels.py) are compared with (it was the solver's implementation before
them; test-only now). ``reference_substep`` is solver._substep's former body.

Articulated-body joint accelerations of rod chains with ball joints (Featherstone's ABA), vectorized
over strands with a loop over the segment index only.

A strand is a chain of rigid rods: segment i runs from node i to node i+1 (vector e_i = l_i d3_i,
mass m_i, radius r); joint i (i ≥ 1) is a ball joint at node i between segments i−1 and i. Segment 0
moves with the root frame (kinematic). The joint coordinates are the world-frame relative angular
velocities w_i (Ω_i = Ω_{i−1} + w_i), so the joint acceleration is ẅ_i = α_i − α_{i−1} exactly.

Classical 6-vectors about a point p of a body: motion (α, a_p) (angular acceleration, acceleration of
the body point at p), force (n_p, f) (moment about p, force). Every body uses its proximal node as p.

* Rigid rod about its proximal node, with c = e/2:  n = I_p α + m c × a_p + Ω × I_p Ω,
  f = m (a_p + α × c + Ω × (Ω × c)), I_p = m (l²/3 + r²/4)(1 − d dᵀ) + m r²/2 d dᵀ.
* Parent → child (r = e_{i−1}): α_i = α_{i−1} + ẅ_i, a_i = a_{i−1} + α_{i−1} × r + κ_i with the
  velocity-product term κ_i = Ω_{i−1} × (Ω_{i−1} × r).
* Tip → root pass (the exact form of the seed's force transport, eqs. 3.9–3.15: the child hands its
  parent the load at their shared node together with the inertia that comes with it): the subtree
  from segment i on needs the wrench I^A_i (α_i, a_i) + p^A_i from its parent. The ball joint carries
  every force but only the joint's own moment Q_i (here the CORDE stiffness moment); eliminating ẅ_i
  from the moment rows leaves the reduced inertia I^A − U D⁻¹ Uᵀ (U = I^A S, S = [1; 0]) and bias that
  are shifted to the parent's node with Xᵀ = [[1, [r]×], [0, 1]].
* Root → tip pass: ẅ_i = D⁻¹ (u_i − Uᵀ (X a_{i−1} + κ_i)).

Implicit joint stiffness (backward Euler in the joint's own coordinates, where the elastic energy is
block diagonal): the joint moment Q − K h (w + h ẅ) makes D = Sᵀ I^A S + h² K (a joint "armature")
and u = Q − h K w − Sᵀ p^A.
"""

from __future__ import annotations

import numpy as np

from solver_server.solvers.cosserat import quaternion as quat
from solver_server.solvers.cosserat.solver import CORRECTOR_TURN, MAX_DRAG_SHARE, MAX_REFINEMENT, MAX_TURN_PER_STEP
from tests.physics.air_reference import drag_rates


def skew(v, xp=np):
    """(..., 3) -> (..., 3, 3) cross-product matrices [v]× (so [v]× u = v × u)."""
    zero = xp.zeros_like(v[..., 0])
    return xp.stack([
        xp.stack([zero, -v[..., 2], v[..., 1]], axis=-1),
        xp.stack([v[..., 2], zero, -v[..., 0]], axis=-1),
        xp.stack([-v[..., 1], v[..., 0], zero], axis=-1),
    ], axis=-2)


def inverse3(matrices, xp=np):
    """Inverses of symmetric (..., 3, 3) matrices by the adjugate (closed form: batched LAPACK calls
    cost ~10 µs per 3×3 matrix, this is a couple of dozen array operations for the whole batch)."""
    m = matrices
    a, b, c = m[..., 0, 0], m[..., 0, 1], m[..., 0, 2]
    e, f, i = m[..., 1, 1], m[..., 1, 2], m[..., 2, 2]
    co_a, co_b, co_c = e * i - f * f, c * f - b * i, b * f - c * e
    co_e, co_f, co_i = a * i - c * c, b * c - a * f, a * e - b * b
    adjugate = xp.stack([co_a, co_b, co_c, co_b, co_e, co_f, co_c, co_f, co_i], axis=-1)
    determinant = a * co_a + b * co_b + c * co_c
    return (adjugate / determinant[..., None]).reshape(m.shape)


def rod_inertias(segments, masses, radius: float, xp=np):
    """(S, M, 6, 6) classical spatial inertia of every rod about its proximal node.

    segments (S, M, 3) vectors e = l d3 [m]; masses (S, M) [kg]; radius [m]."""
    length_sq = xp.sum(segments * segments, axis=-1)
    direction = segments / xp.sqrt(xp.maximum(length_sq, 1e-300))[..., None]
    along = direction[..., :, None] * direction[..., None, :]
    eye = xp.eye(3)
    perpendicular = masses * (length_sq / 3.0 + radius ** 2 / 4.0)
    axial = masses * radius ** 2 / 2.0
    coupling = masses[..., None, None] * skew(0.5 * segments, xp)
    inertia = xp.zeros(masses.shape + (6, 6))
    inertia[..., :3, :3] = perpendicular[..., None, None] * (eye - along) + axial[..., None, None] * along
    inertia[..., :3, 3:] = coupling
    inertia[..., 3:, :3] = -coupling
    inertia[..., 3:, 3:] = masses[..., None, None] * eye
    return inertia


def joint_stiffness_matrices(directions, bend, twist, xp=np):
    """(S, M, 3, 3) world-frame joint stiffness bend·(1 − d dᵀ) + twist·d dᵀ [N·m/rad].

    directions (S, M, 3) unit d3 of the joint's distal segment; bend, twist (S, M) [N·m/rad]."""
    along = directions[..., :, None] * directions[..., None, :]
    return bend[..., None, None] * (xp.eye(3) - along) + twist[..., None, None] * along


class ArticulatedChains:
    """The configuration-dependent half of the ABA for one step, factored once: articulated inertias,
    their reductions and the joint matrices D⁻¹ (they do not depend on velocities or loads), so that
    joint accelerations for several velocity/load sets cost only the vector passes.

    segments (S, M, 3) vectors e = l d3 [m]; masses (S, M) [kg]; radius [m]; joint_stiffness
    (S, M, 3, 3) [N·m/rad]; h [s] (for the implicit stiffness); free (S, M) bool (joint i moves)."""

    def __init__(self, segments, masses, radius: float, joint_stiffness, h: float, free, xp=np):
        self.xp = xp
        self.h = h
        count = masses.shape[1]
        # everything is kept segment-axis first, (M, S, ...), so the loops take contiguous slices
        self.segments, self.masses = _front(segments, xp), _front(masses, xp)
        self.joint_stiffness = _front(joint_stiffness, xp)
        self.weight = _front(free.astype(masses.dtype), xp)
        inertia = rod_inertias(self.segments, self.masses, radius, xp)                       # (M, S, 6, 6)
        self.moment_of_inertia = inertia[..., :3, :3]
        # X_i: parent (node i−1) → child (node i) motion transform, r = e_{i−1}
        self.skews = skew(self.segments, xp)
        fixed_identity = (1.0 - self.weight)[..., None, None] * xp.eye(3)
        self.reduced = [None] * count             # I^A − U D⁻¹ Uᵀ
        self.coupling_t = [None] * count          # Uᵀ
        self.coupling_inverse = [None] * count    # U D⁻¹
        self.inverse_d = [None] * count
        child = None
        for i in range(count - 1, 0, -1):
            articulated = inertia[i]
            if child is not None:
                articulated = articulated + self._to_parent(child, i + 1)
            weight_i = self.weight[i][:, None, None]
            d_matrix = (articulated[:, :3, :3] + (h * h) * self.joint_stiffness[i]) * weight_i + fixed_identity[i]
            coupling = articulated[:, :, :3] * weight_i
            inverse = inverse3(d_matrix, xp)
            coupling_inverse = coupling @ inverse
            coupling_t = xp.swapaxes(coupling, -1, -2)
            child = articulated - coupling_inverse @ coupling_t
            self.reduced[i], self.coupling_t[i], self.coupling_inverse[i], self.inverse_d[i] = (
                child, coupling_t, coupling_inverse, inverse)

    def _to_parent(self, inertia, child: int):
        """Xᵀ I X for the child joint ``child`` (X = [[1, 0], [−[r]×, 1]], r = e_{child−1}), blockwise."""
        xp = self.xp
        r = self.skews[child - 1]
        a, b, d = inertia[:, :3, :3], inertia[:, :3, 3:], inertia[:, 3:, 3:]
        lower = xp.swapaxes(b, -1, -2) - d @ r          # Bᵀ − D R
        upper = a - b @ r + r @ lower                   # A − B R + R (Bᵀ − D R)
        return xp.concatenate([xp.concatenate([upper, b + r @ d], axis=-1),
                               xp.concatenate([lower, d], axis=-1)], axis=-2)

    def joint_accelerations(self, omega, node_forces, joint_torques, joint_velocities, root_angular_acceleration,
                            root_acceleration):
        """Joint accelerations ẅ (S, M, 3) [rad/s²] (entry i for joint i; 0 where not free).

        omega (S, M, 3) absolute segment angular velocities [rad/s] (for the velocity-product terms);
        node_forces (S, M+1, 3) [N] (node k's force acts on segment k−1 at its distal node; nodes 0
        and 1 load the kinematic root segment only); joint_torques Q (S, M, 3) [N·m] moment joint i
        applies to segment i (its reaction on segment i−1 is implied); joint_velocities w (S, M, 3)
        (for the implicit stiffness); root_angular_acceleration, root_acceleration (S, 3) of segment 0
        and node 0."""
        xp = self.xp
        segments, masses = self.segments, self.masses
        count = masses.shape[0]
        omega = _front(omega, xp)
        tip_forces = _front(node_forces[:, 1:], xp)
        angular_momentum = xp.einsum("msij,msj->msi", self.moment_of_inertia, omega)
        bias = xp.concatenate([
            xp.cross(omega, angular_momentum) - xp.cross(segments, tip_forces),
            masses[..., None] * xp.cross(omega, xp.cross(omega, 0.5 * segments)) - tip_forces], axis=-1)[..., None]
        # velocity-product acceleration of node i from the parent's rotation, κ_i (entry 0 unused)
        kappa = xp.zeros(segments.shape[:2] + (6, 1))
        kappa[1:, :, 3:, 0] = xp.cross(omega[:-1], xp.cross(omega[:-1], segments[:-1]))
        stiff_rate = xp.einsum("msij,msj->msi", self.joint_stiffness, _front(joint_velocities, xp))
        moments = (_front(joint_torques, xp) - self.h * stiff_rate)[..., None]

        reduced_torque = [None] * count
        child = None
        for i in range(count - 1, 0, -1):
            pending = bias[i]
            if child is not None:
                # Xᵀ f = (n + r × f, f) with r = e_i
                pending = pending + xp.concatenate([child[:, :3] + self.skews[i] @ child[:, 3:], child[:, 3:]], axis=1)
            u = (moments[i] - pending[:, :3]) * self.weight[i][:, None, None]
            child = pending + self.reduced[i] @ kappa[i] + self.coupling_inverse[i] @ u
            reduced_torque[i] = u

        result = xp.zeros(moments.shape)
        alpha = root_angular_acceleration[..., None]
        acceleration = root_acceleration[..., None]
        for i in range(1, count):
            # X a + κ: α unchanged, a + α × r + κ with r = e_{i−1}
            acceleration = acceleration - self.skews[i - 1] @ alpha + kappa[i, :, 3:]
            motion = xp.concatenate([alpha, acceleration], axis=1)
            joint = self.inverse_d[i] @ (reduced_torque[i] - self.coupling_t[i] @ motion)
            result[i] = joint
            alpha = alpha + joint
        return xp.moveaxis(result[..., 0], 0, 1)


def _front(array, xp):
    """Segment axis first, contiguous: (S, M, ...) -> (M, S, ...) so the loops take contiguous slices."""
    return xp.ascontiguousarray(xp.moveaxis(array, 1, 0))


def _air_drag(solver, positions, velocities, h):
    """Air drag force (S, P, 3) [N] on the nodes: −m c v / (1 + h c), at most MAX_DRAG_SHARE of m v / h; a node's
    tangent the direction between its neighbours, its linear density its mass over its half segments."""
    padded = np.concatenate((positions[:, :1], positions, positions[:, -1:]), axis=1)
    along = padded[:, 2:] - padded[:, :-2]
    tangents = along / np.maximum(np.sqrt(np.sum(along * along, axis=-1, keepdims=True)), 1e-300)
    half = 0.5 * solver.lengths
    node_length = np.zeros(solver.node_mass.shape)
    node_length[:, 1:] += half
    node_length[:, :-1] += half
    linear_density = np.divide(solver.node_mass, node_length, out=np.zeros_like(node_length), where=node_length > 0.0)
    rates = drag_rates(velocities, tangents, solver.settings.radius, linear_density, solver.settings.air_drag)
    share = np.minimum(h * rates / (1.0 + h * rates), MAX_DRAG_SHARE)
    return -(solver.node_mass * share / h)[..., None] * velocities


def reference_substep(solver, state, root_pos, root_rot, colliders, extra_forces, h, dt, interval) -> tuple:
    """One semi-implicit step of length h [s] of ``state`` in place (solver._substep's former body, with the strands
    that turn fast splitting it); the collider query covers ``interval`` of the substep dt [s] (solver.step's
    bookkeeping). Returns (contact count, the parts all strands stepped)."""
    xp = solver.xp
    s = solver.settings
    q, w = state.orientations, state.joint_velocities
    root_velocity = (root_pos - state.root_positions) / h
    root_acceleration = (root_velocity - state.root_velocities) / h
    turn = quat.multiply(root_rot, quat.conjugate(state.root_rotations, xp), xp)
    root_omega = 2.0 * turn[:, 1:] * xp.sign(turn[:, :1] + 1e-300) / h
    root_alpha = (root_omega - state.root_angular_velocities) / h

    d3 = quat.axis(q, 2, xp)
    positions = solver._positions(state.root_positions, d3)
    omega = solver._angular_velocities(state.root_angular_velocities, w)
    node_velocity = solver._node_velocities(state.root_velocities, omega, d3)
    wind = xp.asarray(s.wind.acceleration(state.time))
    forces = solver.node_mass[..., None] * (solver.gravity + wind)
    if extra_forces is not None:
        forces = forces + xp.asarray(extra_forces)
    count = 0
    if colliders.count:
        contact_forces, count = solver._collider_forces(state, positions, node_velocity, colliders, h, dt, interval)
        forces = forces + contact_forces
    if solver.interaction is not None:
        interaction, pairs = solver.interaction.forces(positions, node_velocity)
        forces = forces + interaction
        state.interaction_pairs = pairs
    if s.air_drag > 0.0:
        forces = forces + _air_drag(solver, positions, node_velocity, h)

    # per strand: a strand whose fastest segment would turn by more than MAX_TURN_PER_STEP splits the step into
    # equal parts, the forces held over them (every part count taken by all strands, each strand keeping its own)
    fastest = xp.sqrt(xp.max(xp.sum(omega * omega, axis=-1), axis=1))
    parts = np.where(h * fastest > MAX_TURN_PER_STEP,
                     np.minimum(MAX_REFINEMENT, np.ceil(h * fastest / MAX_TURN_PER_STEP)), 1).astype(int)
    root_start = quat.multiply(state.root_rotations, solver.rest_orientations[:, 0], xp)
    root_end = quat.multiply(root_rot, solver.rest_orientations[:, 0], xp)
    new_q, new_w = q.copy(), w.copy()
    for split in np.unique(parts):
        part_q, part_w = q, w
        for index in range(split):
            begin = state.root_angular_velocities + (index / split) * (root_omega - state.root_angular_velocities)
            last = index + 1 == split
            finish = root_omega if last else \
                state.root_angular_velocities + ((index + 1) / split) * (root_omega - state.root_angular_velocities)
            if last:
                orientation = root_end
            else:
                blend = root_start + ((index + 1) / split) * (root_end - root_start)
                orientation = blend / np.linalg.norm(blend, axis=-1, keepdims=True)
            part_q, part_w = _part_step(solver, part_q, part_w, forces, begin, finish, orientation, root_alpha,
                                        root_acceleration, h / split)
        new_q[parts == split], new_w[parts == split] = part_q[parts == split], part_w[parts == split]
    q, w = new_q, new_w

    state.orientations, state.joint_velocities = q, w
    state.root_positions, state.root_rotations = root_pos, root_rot
    state.root_velocities, state.root_angular_velocities = root_velocity, root_omega
    state.time += h
    return count, int(parts.sum())


def _part_step(solver, q, w, forces, root_omega_start, root_omega_end, root_orientation, root_alpha,
               root_acceleration, h):
    """One part of length h [s] of a step: joint accelerations at the part's start velocities (the mid velocity for
    strands turning more than CORRECTOR_TURN), damping and the quaternion update; returns (q, w)."""
    xp = solver.xp
    s = solver.settings
    d3 = quat.axis(q, 2, xp)
    omega = solver._angular_velocities(root_omega_start, w)
    _, holding = solver.stiffness_torques(q, with_joint=True)
    stiffness = joint_stiffness_matrices(d3, solver.joint_bend_stiffness, solver.joint_twist_stiffness, xp)
    chains = ArticulatedChains(solver.lengths[..., None] * d3, solver.mass, s.radius, stiffness, h, solver.free_joint,
                               xp)

    def accelerations(angular_velocities):
        return chains.joint_accelerations(angular_velocities, forces, holding, w, root_alpha, root_acceleration)

    acceleration = accelerations(omega)
    # per strand: a strand in which some segment turns by more than CORRECTOR_TURN takes the mid velocity
    turning = h * xp.sqrt(xp.max(xp.sum(omega * omega, axis=-1), axis=1)) > CORRECTOR_TURN
    if bool(xp.any(turning)):
        predicted = w + h * acceleration
        corrected = accelerations(solver._angular_velocities(0.5 * (root_omega_start + root_omega_end),
                                                             0.5 * (w + predicted)))
        acceleration = xp.where(turning[:, None, None], corrected, acceleration)
    w = xp.where(solver.free_joint[..., None], (w + h * acceleration) / (1.0 + h * s.damping), 0.0)
    omega = solver._angular_velocities(root_omega_end, w)
    q = quat.normalize(q + 0.5 * h * quat.multiply(quat.pure(omega, xp), q, xp), xp)
    q[:, 0] = root_orientation
    return q, w


def reference_step(solver, state, control, dt: float) -> dict:
    """solver.step's former loop with ``reference_substep`` (``state`` advanced in place)."""
    from solver_server.solvers.cosserat.state import CosseratState  # noqa: PLC0415
    from solver_server.solvers.strand_colliders import AnalyticColliders  # noqa: PLC0415

    xp = solver.xp
    colliders = control.colliders if control.colliders is not None else AnalyticColliders()
    start_pos, start_rot = state.root_positions, state.root_rotations
    end_pos = xp.asarray(control.root_positions, dtype=xp.float64)
    end_rot = quat.normalize(xp.asarray(control.root_rotations, dtype=xp.float64), xp)
    end_rot = xp.where(xp.sum(end_rot * start_rot, axis=-1, keepdims=True) < 0.0, -end_rot, end_rot)
    work = CosseratState(xp.array(state.orientations), xp.array(state.joint_velocities), start_pos, start_rot,
                         state.root_velocities, state.root_angular_velocities, state.time,
                         collider_anchor=state.collider_anchor)
    contacts = substeps = strand_parts = 0
    elapsed = anchored = 0.0
    while dt - elapsed > 1e-12 * dt:
        h = solver._step_length(dt - elapsed)
        interval = (anchored / dt, elapsed / dt)
        anchored = elapsed
        elapsed = min(dt, elapsed + h)
        alpha = elapsed / dt
        root_pos = start_pos + alpha * (end_pos - start_pos)
        root_rot = quat.normalize(start_rot + alpha * (end_rot - start_rot), xp)
        contact_count, parts = reference_substep(solver, work, root_pos, root_rot, colliders, control.extra_forces,
                                                 h, dt, interval)
        contacts += contact_count
        strand_parts += parts
        substeps += 1
    if colliders.count:
        solver._collider_forces(work, solver.positions(work), None, colliders, None, dt, (anchored / dt, 1.0))
    for name in ("orientations", "joint_velocities", "root_positions", "root_rotations", "root_velocities",
                 "root_angular_velocities", "time", "collider_anchor"):
        setattr(state, name, getattr(work, name))
    return {"substeps": substeps, "contacts": contacts, "interaction_pairs": work.interaction_pairs,
            "strand_parts": strand_parts}

"""Force-transport Cosserat strands (seed 002, chapter 3 and appendix), vectorized over strands.

State in reduced coordinates: per segment an orientation quaternion q_i (material frame
d1, d2, d3 = R(q_i) e1, e2, e3). Strands are inextensible: node k+1 = node k + l_k d3_k, so
positions are a cumulative sum from the root (eq. 3.3) and node velocities a cumulative sum
of l Ω × d3 (eq. 3.6). The centripetal part of the node accelerations (eq. 3.7) enters the
external force as −m·a_c (appendix eq. 7.1); we take it for the strand's rigid swing about its
first free joint, a_c = Ω₁ × (Ω₁ × (x − x₁)), plus the root frame's rotation (see step 1).
Segment 0 is clamped to the root frame (kinematic).

The seed assumes that "the rest segments move together" (§3.4): a torque on segment i turns
segment i *and the distal part with it*. We make that the integration variable: joint i
(between segments i−1 and i) has a relative angular velocity w_i, and the absolute angular
velocity of segment i is Ω_i = Ω_root + Σ_{j≤i} w_j (a cumulative sum). One step of length h:

1. Node forces f_k = m_k (g + wind − a_c,k − a_root − Ω̇_root × r_k − Ω_root × (Ω_root × r_k)) + contact
   forces, r_k = x_k − x_0. The per-segment centripetal sum Σ l Ω_j × (Ω_j × d3_j) of eq. 3.7 is not
   used: taken explicitly with the diagonal joint inertia it makes the tip segments of floppy
   strands whip and blow up within 0.3 s (measured for 50 segments, E = 1 MPa, r = 5 mm and
   for every E at r = 50 µm); the rigid-swing form is stable on the whole grid up to 10 ms.
2. Stiffness torques T_i on every segment from the CORDE quaternion energy (appendix eq. 7.2,
   gradient mapped to a torque with eq. 7.3): V_j = (l̄_j/2) Σ_k K_k (u_k − û_k)²,
   u = (2/l̄) Im(q̄_j q_{j+1}), K = (EI, EI, GJ) with I = πr⁴/4, J = πr⁴/2 (the seed's "πr²/4" is not
   dimensionally a bending stiffness). Rest Darboux vectors û come from the rest shape, so
   curls are preserved.
3. Force transport tip → root (eqs. 3.9–3.15): F_in = f + F_T(distal) + F_neutralized(distal);
   F_T = (F_in·d3) d3; F_N = F_in − F_T; tf = T × d3 / l (eq. 3.12); the part of F_N opposed by tf
   (c = min(−tf·F̂_N, |F_N|), 0 when tf·F_N > 0, eq. 3.13) is neutralized and carried to the
   proximal segment together with F_T. A loop over the segment index on (strands, 3) arrays.
   T is "the stiffness torque applied here": the moment with which the segment's proximal joint
   holds it (the rod's internal moment m(l)). Using instead the segment's net stiffness torque
   (a difference of two joint moments, m'(l)) made the transport chatter and stall at a wrong
   shape (measured: heavy strand tip stuck at (0.85, −0.47) m vs the elastica's (0.47, −0.81) m).
4. Segment torque τ_i = l_i d3_i × F_N,i + T_i (eq. 3.17; the neutralized part of F_N is the part
   balanced by the stiffness torque, so at equilibrium the whole normal load is carried
   rootwards and the statics of the rod are reproduced exactly). The torque driving joint i is
   the sum over the segments it moves, Q_i = Σ_{j≥i} τ_j (a reverse cumulative sum).
5. Joint inertia: the distal part as a rigid body about node i (bending Σ m_j |c_j − x_i|²,
   twist Σ m_j (r²/2 + distance to the axis²)), the exact form of the seed's (x·mass)·l² term.
   In joint coordinates the elastic energy is block diagonal (turning joint i changes only its
   own Darboux vector), so the stiffness and the damping are taken implicitly per joint, exactly:
   w ← (I w + h Q) / (I (1 + h·damping) + h² K/l̄) (eq. 3.20 uses τ at t+h).
6. q_i ← normalize(q_i + h/2 (0, Ω_i) ⊗ q_i) (eqs. 3.21–3.23).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..guides.layout import StrandLayout
from ..particles.colliders import ColliderSet
from . import quaternion as quat
from .interaction import SweptSphereInteraction
from .settings import CosseratSettings


@dataclass
class CosseratState:
    """orientations (S, M, 4) unit quaternions; joint_velocities (S, M, 3) [rad/s] world-frame angular
    velocity of segment i relative to segment i−1 (entry 0 unused: the root segment is kinematic);
    root_positions (S, 3) [m]; root_rotations (S, 4) rotation of the root frame from rest;
    root_velocities, root_angular_velocities (S, 3) of the last step; time [s]."""

    orientations: object
    joint_velocities: object
    root_positions: object
    root_rotations: object
    root_velocities: object
    root_angular_velocities: object
    time: float = 0.0
    interaction_pairs: int = 0


@dataclass
class CosseratControl:
    """Root frame at the END of the step: root_positions (S, 3) [m], root_rotations (S, 4) unit
    quaternions (rotation from the rest pose); colliders (world space) or None; extra_forces
    (S, P, 3) [N] per node (e.g. strand–strand interaction) or None."""

    root_positions: object
    root_rotations: object
    colliders: ColliderSet | None = None
    extra_forces: object = None


def _dot(a, b, xp):
    return xp.sum(a * b, axis=-1, keepdims=True)


def _reverse_cumsum(values, xp, axis=1):
    """Σ_{j ≥ i} values_j along ``axis``."""
    return xp.flip(xp.cumsum(xp.flip(values, axis=axis), axis=axis), axis=axis)


class CosseratSolver:
    """Force-transport Cosserat strands of one hair object.

    rest_positions: (S, P, 3) padded rest points [m]; gravity (3,) [m/s²]; xp numpy or cupy.
    """

    def __init__(self, rest_positions, layout: StrandLayout, settings: CosseratSettings, gravity, xp=np):
        self.xp = xp
        self.layout = layout
        self.settings = settings
        self.gravity = xp.asarray(np.asarray(gravity, np.float64) * settings.gravity_scale)
        rest = np.asarray(rest_positions, np.float64)
        vectors = rest[:, 1:] - rest[:, :-1]
        lengths = np.linalg.norm(vectors, axis=-1)
        segment_valid = layout.segment_valid & (lengths > 0.0)
        self.rest_root = xp.asarray(rest[:, 0])
        self.lengths = xp.asarray(np.where(segment_valid, lengths, 0.0))                     # (S, M)
        self.rest_orientations = xp.asarray(self._rest_orientations(vectors, lengths, segment_valid))
        self.segment_valid = xp.asarray(segment_valid)
        joint_valid = segment_valid[:, :-1] & segment_valid[:, 1:]
        joint_lengths = np.where(joint_valid, 0.5 * (lengths[:, :-1] + lengths[:, 1:]), 1.0)
        self.joint_valid = xp.asarray(joint_valid)
        self.joint_lengths = xp.asarray(joint_lengths)
        self.stiffness = xp.asarray([settings.bend_stiffness, settings.bend_stiffness, settings.twist_stiffness])
        self.rest_darboux = self._darboux(self.rest_orientations)                            # (S, M-1, 3)
        self.mass = xp.asarray(settings.density * settings.area * np.where(segment_valid, lengths, 0.0))
        node_mass = np.zeros(rest.shape[:2])
        segment_mass = np.asarray(self.mass) if xp is np else settings.density * settings.area * lengths
        node_mass[:, 1:] += 0.5 * segment_mass
        node_mass[:, :-1] += 0.5 * segment_mass
        node_mass[:, :2] = 0.0                       # nodes of the clamped root segment
        self.node_mass = xp.asarray(node_mass)
        # joint i (i ≥ 1) sits between segments i−1 and i; stiffness of its own rotation, (S, M)
        joint_bend = np.zeros(lengths.shape)
        joint_bend[:, 1:] = np.where(joint_valid, settings.bend_stiffness / joint_lengths, 0.0)
        joint_twist = np.zeros(lengths.shape)
        joint_twist[:, 1:] = np.where(joint_valid, settings.twist_stiffness / joint_lengths, 0.0)
        self.joint_bend_stiffness = xp.asarray(joint_bend)
        self.joint_twist_stiffness = xp.asarray(joint_twist)
        free = segment_valid.copy()
        free[:, 0] = False
        self.free_joint = xp.asarray(free)
        self.interaction = None
        if settings.interaction_outer_radius > 0.0:
            self.interaction = SweptSphereInteraction(
                settings.interaction_inner_radius, settings.interaction_outer_radius,
                settings.interaction_stiffness, settings.interaction_damping, segment_valid)

    # ----------------------------------------------------------------- set-up helpers
    @staticmethod
    def _rest_orientations(vectors, lengths, segment_valid):
        """(S, M, 4) rest frames: d3 along each segment, d1/d2 parallel transported from the root.

        A loop over the segment index (set-up only) on (S, ·) arrays; padded and zero-length
        segments repeat the previous frame.
        """
        strands, segments = lengths.shape
        tangents = vectors / np.maximum(lengths, 1e-300)[..., None]
        e3 = np.broadcast_to([0.0, 0.0, 1.0], (strands, 3))
        q = quat.from_two_vectors(e3, tangents[:, 0])
        frames = np.empty((strands, segments, 4))
        frames[:, 0] = q
        current = tangents[:, 0]
        for i in range(1, segments):
            valid = segment_valid[:, i][:, None]
            target = np.where(valid, tangents[:, i], current)
            q = quat.normalize(quat.multiply(quat.from_two_vectors(current, target), q))
            frames[:, i] = q
            current = target
        return frames

    def _darboux(self, q):
        """(S, M-1, 3) discrete Darboux vectors u_j = (2/l̄_j) Im(q̄_j ⊗ q_{j+1}) in the material frame."""
        xp = self.xp
        relative = quat.multiply(quat.conjugate(q[:, :-1], xp), q[:, 1:], xp)
        return 2.0 * relative[..., 1:] / self.joint_lengths[..., None]

    # ----------------------------------------------------------------- state
    def initial_state(self) -> CosseratState:
        xp = self.xp
        strands = self.lengths.shape[0]
        identity = xp.zeros((strands, 4))
        identity[:, 0] = 1.0
        zeros = xp.zeros((strands, 3))
        return CosseratState(self.rest_orientations.copy(), xp.zeros(self.rest_orientations.shape[:-1] + (3,)),
                             self.rest_root.copy(), identity, zeros, zeros.copy(), 0.0)

    def positions(self, state: CosseratState):
        """(S, P, 3) node positions [m] (eq. 3.3: cumulative sum of l d3 from the root)."""
        return self._positions(state.root_positions, quat.axis(state.orientations, 2, self.xp))

    def _positions(self, root, d3):
        xp = self.xp
        steps = self.lengths[..., None] * d3
        return xp.concatenate([root[:, None], root[:, None] + xp.cumsum(steps, axis=1)], axis=1)

    def energy(self, orientations):
        """Elastic energy Σ_j (l̄_j/2) Σ_k K_k (u_k − û_k)² [J] per strand, (S,)."""
        xp = self.xp
        strain = self._darboux(orientations) - self.rest_darboux
        density = 0.5 * self.joint_lengths * xp.sum(self.stiffness * strain * strain, axis=-1)
        return xp.sum(xp.where(self.joint_valid, density, 0.0), axis=1)

    def stiffness_torques(self, q, with_joint: bool = False):
        """(S, M, 3) world torques [N·m] of the CORDE energy on every segment (appendix eqs. 7.2–7.3).

        with_joint: also return (S, M, 3) the part applied to segment i by its proximal joint alone
        (the internal bending/twisting moment holding the distal part; zero for segment 0)."""
        xp = self.xp
        moment = self.stiffness * (self._darboux(q) - self.rest_darboux)                        # (S, M-1, 3)
        moment = xp.where(self.joint_valid[..., None], moment, 0.0)
        m4 = quat.pure(moment, xp)
        on_distal = -quat.multiply(quat.multiply(q[:, :-1], m4, xp), quat.conjugate(q[:, 1:], xp), xp)[..., 1:]
        on_proximal = quat.multiply(quat.multiply(q[:, 1:], m4, xp), quat.conjugate(q[:, :-1], xp), xp)[..., 1:]
        torque = xp.zeros(q.shape[:-1] + (3,))
        torque[:, 1:] += on_distal
        torque[:, :-1] += on_proximal
        if not with_joint:
            return torque
        joint = xp.zeros_like(torque)
        joint[:, 1:] = on_distal
        return torque, joint

    def joint_inertia(self, positions, d3):
        """Inertia of the part distal of each joint as a rigid body about node i.

        Returns bend, twist (S, M) [kg·m²] about axes ⊥ and ∥ to d3_i (distal segment centres c_k)."""
        xp = self.xp
        relative = positions - positions[:, :1]
        centers = 0.5 * (relative[:, 1:] + relative[:, :-1])                                  # (S, M, 3)
        m = self.mass
        total = _reverse_cumsum(m, xp)
        first = _reverse_cumsum(m[..., None] * centers, xp)
        second = _reverse_cumsum(m[..., None, None] * centers[..., :, None] * centers[..., None, :], xp)
        node = relative[:, :-1]
        trace = second[..., 0, 0] + second[..., 1, 1] + second[..., 2, 2]
        bend = (trace - 2.0 * xp.sum(node * first, axis=-1) + total * xp.sum(node * node, axis=-1)
                + _reverse_cumsum(m * self.lengths ** 2, xp) / 12.0)
        axial_second = xp.einsum("smi,smij,smj->sm", d3, second, d3)
        node_axial = xp.sum(node * d3, axis=-1)
        axial = axial_second - 2.0 * node_axial * xp.sum(first * d3, axis=-1) + total * node_axial ** 2
        twist = bend - axial + total * self.settings.radius ** 2 / 2.0
        tiny = 1e-300
        return xp.maximum(bend, tiny), xp.maximum(twist, tiny)

    # ----------------------------------------------------------------- dynamics
    def transport(self, node_forces, d3, tf):
        """Tip → root force transport (eqs. 3.9–3.15).

        node_forces (S, P, 3) [N]; d3, tf (S, M, 3). Returns F_N (S, M, 3), the normal force acting
        on each segment. A loop over the segment index on (S, 3) slices (the recursion is nonlinear:
        projections and the neutralization clamp), vectorized over strands.
        """
        xp = self.xp
        strands, segments = d3.shape[:2]
        axes = xp.ascontiguousarray(xp.moveaxis(d3, 1, 0))                 # (M, S, 3) contiguous slices
        torque_forces = xp.ascontiguousarray(xp.moveaxis(tf, 1, 0))
        loads = xp.ascontiguousarray(xp.moveaxis(node_forces, 1, 0))
        normal = xp.zeros_like(axes)
        carried = xp.zeros((strands, 3))
        for i in range(segments - 1, 0, -1):
            axis = axes[i]
            incoming = loads[i + 1] + carried
            normal_force = incoming - xp.einsum("sk,sk->s", incoming, axis)[:, None] * axis
            # neutralized = c·F̂_N with c = min(−tf·F̂_N, |F_N|) (0 when tf·F_N > 0)  =  ratio·F_N
            ratio = xp.einsum("sk,sk->s", torque_forces[i], normal_force)
            ratio /= -(xp.einsum("sk,sk->s", normal_force, normal_force) + 1e-300)
            xp.clip(ratio, 0.0, 1.0, out=ratio)
            normal[i] = normal_force
            carried = incoming - (1.0 - ratio)[:, None] * normal_force       # F_T + F_neutralized
        return xp.moveaxis(normal, 0, 1)

    def solve_joints(self, w, joint_torque, positions, d3, h):
        """New joint velocities (S, M, 3) from the joint torques Q (S, M, 3).

        Joint i turns its distal part as a rigid body (inertia about node i, split into bending and
        twist about d3_i). Stiffness and damping are implicit per joint (exact for the stiffness,
        which is block diagonal in joint coordinates): w_i ← (I w_i + h Q_i) / (I (1 + h·damping)
        + h² K/l̄). The joints are solved independently (a diagonal joint-space inertia). A forward
        Gauss–Seidel sweep that subtracts the torque needed to carry the distal part along with the
        already-updated proximal joints was tried and made undamped stiff strands blow up
        (docs/fast_hair.md); the diagonal version conserves energy for stiff strands and
        over-accelerates softer ones transiently.
        """
        xp = self.xp
        damping = self.settings.damping
        bend, twist = self.joint_inertia(positions, d3)
        bend, twist = bend[..., None], twist[..., None]
        rate = _dot(w, d3, xp)
        torque_along = _dot(joint_torque, d3, xp)
        bent = (bend * (w - rate * d3) + h * (joint_torque - torque_along * d3)) / (
            bend * (1.0 + h * damping) + h * h * self.joint_bend_stiffness[..., None])
        twisted = (twist * rate + h * torque_along) / (
            twist * (1.0 + h * damping) + h * h * self.joint_twist_stiffness[..., None])
        return xp.where(self.free_joint[..., None], bent + twisted * d3, 0.0)

    def step(self, state_in: CosseratState, state_out: CosseratState, control: CosseratControl,
             contacts=None, dt: float = 1.0 / 96.0) -> dict:
        """Advance by dt [s] (split into steps ≤ settings.max_step) into ``state_out``; returns stats."""
        xp = self.xp
        substeps = max(1, math.ceil(dt / self.settings.max_step - 1e-9))
        h = dt / substeps
        colliders = control.colliders.to_device(xp) if control.colliders is not None else ColliderSet()
        start_pos, start_rot = state_in.root_positions, state_in.root_rotations
        end_pos = xp.asarray(control.root_positions, dtype=xp.float64)
        end_rot = quat.normalize(xp.asarray(control.root_rotations, dtype=xp.float64), xp)
        end_rot = xp.where(_dot(end_rot, start_rot, xp) < 0.0, -end_rot, end_rot)
        state = CosseratState(xp.array(state_in.orientations), xp.array(state_in.joint_velocities),
                              start_pos, start_rot, state_in.root_velocities, state_in.root_angular_velocities,
                              state_in.time)
        contact_count = 0
        for sub in range(substeps):
            alpha = (sub + 1) / substeps
            root_pos = start_pos + alpha * (end_pos - start_pos)
            root_rot = quat.normalize(start_rot + alpha * (end_rot - start_rot), xp)
            contact_count += self._substep(state, root_pos, root_rot, colliders, control.extra_forces, h)
        if not bool(xp.all(xp.isfinite(state.orientations))):
            raise FloatingPointError("Cosserat strands produced NaN/Inf orientations")
        for name in ("orientations", "joint_velocities", "root_positions", "root_rotations", "root_velocities",
                     "root_angular_velocities", "time"):
            setattr(state_out, name, getattr(state, name))
        return {"substeps": substeps, "contacts": contact_count, "interaction_pairs": state.interaction_pairs,
                "ignored_colliders": list(colliders.ignored)}

    def _substep(self, state: CosseratState, root_pos, root_rot, colliders, extra_forces, h) -> int:
        xp = self.xp
        s = self.settings
        q, w = state.orientations, state.joint_velocities
        root_velocity = (root_pos - state.root_positions) / h
        root_acceleration = (root_velocity - state.root_velocities) / h
        turn = quat.multiply(root_rot, quat.conjugate(state.root_rotations, xp), xp)
        root_omega = 2.0 * turn[:, 1:] * xp.sign(turn[:, :1] + 1e-300) / h
        root_alpha = (root_omega - state.root_angular_velocities) / h
        q[:, 0] = quat.multiply(root_rot, self.rest_orientations[:, 0], xp)

        d3 = quat.axis(q, 2, xp)
        positions = self._positions(root_pos, d3)
        omega = root_omega[:, None] + xp.cumsum(xp.where(self.free_joint[..., None], w, 0.0), axis=1)
        spin = xp.cross(omega, d3)
        zero = xp.zeros_like(positions[:, :1])
        node_velocity = root_velocity[:, None] + xp.concatenate(
            [zero, xp.cumsum(self.lengths[..., None] * spin, axis=1)], axis=1)
        arm = positions - root_pos[:, None]
        frame_acceleration = (root_acceleration[:, None] + xp.cross(root_alpha[:, None], arm)
                              + xp.cross(root_omega[:, None], xp.cross(root_omega[:, None], arm)))
        wind = xp.asarray(s.wind.acceleration(state.time))
        # centripetal acceleration of the strand's rigid swing about its first free joint (the seed's
        # "rest segments move together"); the per-segment sum of eq. 3.7 taken explicitly makes the
        # tip segments of floppy strands whip and blow up (module docstring, docs/fast_hair.md)
        swing = omega[:, 1:2]
        centripetal = xp.cross(swing, xp.cross(swing, positions - positions[:, 1:2]))
        forces = self.node_mass[..., None] * (self.gravity + wind - centripetal - frame_acceleration)
        if extra_forces is not None:
            forces = forces + xp.asarray(extra_forces)
        contact_forces, count = self._collider_forces(positions, node_velocity, colliders, h)
        forces = forces + contact_forces
        if self.interaction is not None:
            to_host = np.asarray if xp is np else xp.asnumpy
            interaction, pairs = self.interaction.forces(to_host(positions), to_host(node_velocity))
            forces = forces + xp.asarray(interaction)
            state.interaction_pairs = pairs

        stiffness, holding = self.stiffness_torques(q, with_joint=True)
        tf = xp.cross(holding, d3) / xp.maximum(self.lengths, 1e-300)[..., None]
        normal = self.transport(forces, d3, tf)
        segment_torque = self.lengths[..., None] * xp.cross(d3, normal) + stiffness
        joint_torque = _reverse_cumsum(segment_torque, xp)

        w = self.solve_joints(w, joint_torque, positions, d3, h)
        omega = root_omega[:, None] + xp.cumsum(w, axis=1)
        q = quat.normalize(q + 0.5 * h * quat.multiply(quat.pure(omega, xp), q, xp), xp)
        q[:, 0] = quat.multiply(root_rot, self.rest_orientations[:, 0], xp)

        state.orientations, state.joint_velocities = q, w
        state.root_positions, state.root_rotations = root_pos, root_rot
        state.root_velocities, state.root_angular_velocities = root_velocity, root_omega
        state.time += h
        return count

    def _collider_forces(self, positions, velocities, colliders: ColliderSet, h):
        """(S, P, 3) node forces [N] pushing penetrating nodes out of the colliders within about
        one step (remove the approaching normal velocity, close half the depth per step) with a
        Coulomb-capped tangential friction force; returns (forces, contact count)."""
        xp = self.xp
        if colliders.count == 0:
            return xp.zeros_like(positions), 0
        distance, normal = colliders.signed_distance(positions, xp)
        depth = self.settings.radius - distance
        touching = (depth > 0.0) & (self.node_mass > 0.0)
        mass = self.node_mass
        normal_speed = xp.sum(velocities * normal, axis=-1)
        push = mass * (xp.maximum(-normal_speed, 0.0) / h + 0.5 * depth / (h * h))
        tangential = velocities - normal_speed[..., None] * normal
        tangential_speed = xp.sqrt(xp.sum(tangential * tangential, axis=-1))
        friction = xp.minimum(self.settings.collider_friction * push, mass * tangential_speed / h)
        force = push[..., None] * normal - (friction / xp.maximum(tangential_speed, 1e-300))[..., None] * tangential
        return xp.where(touching[..., None], force, 0.0), int(xp.count_nonzero(touching))

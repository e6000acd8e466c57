"""Force-transport Cosserat strands (seed 002, chapter 3 and appendix), on Warp kernels (a thread per strand).

State in reduced coordinates: per segment an orientation quaternion q_i (material frame
d1, d2, d3 = R(q_i) e1, e2, e3). Strands are inextensible: node k+1 = node k + l_k d3_k, so
positions are a cumulative sum from the root (eq. 3.3) and node velocities a cumulative sum
of l Ω × d3 (eq. 3.6). Segment 0 is clamped to the root frame (kinematic).

The seed's "rest segments move together" (§3.4) is the integration variable: joint i (between
segments i−1 and i) has a world-frame relative angular velocity w_i, Ω_i = Ω_root + Σ_{j≤i} w_j
(a cumulative sum). One step of length h (semi-implicit Euler):

1. Node forces f_k = m_k (g + wind) + air drag + contact and strand–strand interaction forces. The air drag
   of a node moving at v_k is −m_k c_k v_k / (1 + h c_k), the velocity decay v ← v / (1 + h c) of the drag rate
   c_k (``kernels/air.py``, lagged from the step's start) as a force. The root frame's motion (finite
   differences of the driven root) enters as the kinematic segment 0's acceleration.
2. Stiffness moments from the CORDE quaternion energy (appendix eq. 7.2, gradient mapped to a torque
   with eq. 7.3): V_j = (l̄_j/2) Σ_k K_k (u_k − û_k)², u = (2/l̄) Im(q̄_j q_{j+1}), K = (EI, EI, GJ) with
   I = πr⁴/4, J = πr⁴/2 (the seed's "πr²/4" is not dimensionally a bending stiffness). Rest Darboux
   vectors û come from the rest shape, so curls are preserved. Joint i's moment Q_i acts on segment i
   and its reaction on segment i−1.
3. Force transport tip → root with the inertia carried along: the articulated-body algorithm
   (kernels.py; Featherstone), the exact form of eqs. 3.9–3.15. A ball joint passes the whole
   force (tangential and normal) to the proximal segment and only the stiffness moment as a moment
   (the seed's neutralization), and the distal part's inertia comes with it, so a tip load no longer
   accelerates a root segment as if the chain beyond had no mass (the earlier per-joint inertia
   over-accelerated soft strands: 8–33 m/s peaks, energy gains of 60–600 %). The stiffness is
   implicit per joint (block diagonal in joint coordinates): D = Sᵀ I^A S + h² K/l̄.
4. The velocity-product terms (centripetal eq. 3.7 / 7.1, gyroscopic) are taken at the step's mid
   velocity by a predictor–corrector on the same factorization; taken at the start velocity a
   whipping floppy strand gained 4–20 % of its energy per swing.
5. Damping: every velocity relative to the root frame decays at ``damping`` [1/s] (implicit:
   w ← w / (1 + h·damping), mass-proportional Rayleigh damping).
6. q_i ← normalize(q_i + h/2 (0, Ω_i) ⊗ q_i) with the new Ω (eqs. 3.21–3.23).

Steps are at most ``max_step`` long (a split of the substep that depends on its length alone, planned on the
host without reading the device); a strand whose fastest segment would turn by more than MAX_TURN_PER_STEP in
a step (a whipping tip) splits that step for itself into shorter parts on the device.
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

from ...kernels import cuda_layout_on, int32_view, launch_split, warp_device_of, warp_view
from ..air_drag import StrandAirDrag
from ..guides.layout import StrandLayout
from ..strand_colliders import AnalyticColliders
from . import quaternion as quat
from . import kernels
from .interaction import SweptSphereInteraction
from .settings import CosseratSettings
from .state import CosseratControl, CosseratState


# rounds of (turn the strands whose nodes the colliders moved, query again) at the end of a substep: a turn keeps
# the segment's length, so a node lands short of its anchor and the rounds close in on it (300 strands resting
# on the turning Suzanne: 3 rounds leave up to 8 nodes a fraction of a millimetre under the skin, 8 rounds 3,
# 16 rounds 2 at a third more time per frame)
TURN_OUT_ROUNDS = 8
CLAMPED_NODES = 2
"""The nodes of the clamped root segment: they follow the root frame."""
MAX_TURN_PER_STEP = 0.1
"""rad: the largest turn of any segment in one step (the velocity-product terms are explicit)."""
MAX_REFINEMENT = 32
"""The most parts a strand splits one step into (the shortest part is max_step / MAX_REFINEMENT)."""
DEPTH_SPEED = 0.5
"""m/s: the fastest a node's contact push closes its depth (DER's recovery speed)."""
MAX_DRAG_SHARE = 0.25
"""The largest part m v of a node's momentum its air drag takes in one step: the articulated solve moves a
node whose neighbours are free as if it were lighter than its own mass (a free rod hit at its end moves like
a quarter of its mass), so a drag that stops the node's mass in one step overshoots. Hair in air (h c ≈ 0.04)
never comes near it; a strand thinner than a micrometre does."""
CORRECTOR_TURN = 0.005
"""rad: steps in which some segment turns further take the velocity-product terms at the mid velocity."""


def _dot(a, b, xp):
    return xp.sum(a * b, axis=-1, keepdims=True)


class CosseratSolver:
    """Force-transport Cosserat strands of one hair object.

    rest_positions: (S, P, 3) padded rest points [m]; gravity (3,) [m/s²]; xp numpy or cupy; painted:
    {param: (S, P) factor per point} scaling ``density`` (per segment: the mean of its two points),
    ``young_modulus`` (bending) and ``shear_modulus`` (twist) of the joint at each interior point.
    """

    def __init__(self, rest_positions, layout: StrandLayout, settings: CosseratSettings, gravity, xp=np,
                 painted: dict | None = None):
        self.xp = xp
        self.layout = layout
        self.settings = settings
        self.gravity = np.asarray(gravity, np.float64) * settings.gravity_scale
        self.device = warp_device_of(xp.zeros(1))
        self._work = None
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
        painted = painted or {}
        ones = np.ones(rest.shape[:2])
        # joint j of the (S, M-1) joint arrays sits at point j + 1; a segment takes the mean of its two points
        joint_young = painted.get("young_modulus", ones)[:, 1:-1]
        joint_shear = painted.get("shear_modulus", ones)[:, 1:-1]
        density = painted.get("density", ones)
        segment_density = settings.density * 0.5 * (density[:, :-1] + density[:, 1:])
        bend = settings.bend_stiffness * joint_young
        self.stiffness = xp.asarray(np.stack([bend, bend, settings.twist_stiffness * joint_shear], axis=-1))  # (S, M-1, 3)
        self.rest_darboux = self._darboux(self.rest_orientations)                            # (S, M-1, 3)
        segment_mass = segment_density * settings.area * np.where(segment_valid, lengths, 0.0)
        self.mass = xp.asarray(segment_mass)
        node_mass = np.zeros(rest.shape[:2])
        node_mass[:, 1:] += 0.5 * segment_mass
        node_mass[:, :-1] += 0.5 * segment_mass
        node_mass[:, :CLAMPED_NODES] = 0.0           # nodes of the clamped root segment
        self.node_mass = xp.asarray(node_mass)
        half_segment = 0.5 * np.where(segment_valid, lengths, 0.0)
        node_length = np.zeros(rest.shape[:2])
        node_length[:, 1:] += half_segment
        node_length[:, :-1] += half_segment
        self.air = None
        if settings.air_drag > 0.0:
            linear_density = np.divide(node_mass, node_length, out=np.zeros_like(node_mass), where=node_length > 0.0)
            self.air = StrandAirDrag(xp, np.full(node_mass.size, settings.radius), linear_density.ravel(),
                                     np.full(node_mass.size, settings.air_drag))
        # joint i (i ≥ 1) sits between segments i−1 and i; stiffness of its own rotation, (S, M)
        joint_bend = np.zeros(lengths.shape)
        joint_bend[:, 1:] = np.where(joint_valid, settings.bend_stiffness * joint_young / joint_lengths, 0.0)
        joint_twist = np.zeros(lengths.shape)
        joint_twist[:, 1:] = np.where(joint_valid, settings.twist_stiffness * joint_shear / joint_lengths, 0.0)
        self.joint_bend_stiffness = xp.asarray(joint_bend)
        self.joint_twist_stiffness = xp.asarray(joint_twist)
        free = segment_valid.copy()
        free[:, 0] = False
        self.free_joint = xp.asarray(free)
        as_int = {"free": self.free_joint, "joint_valid": self.joint_valid}
        as_float = {"lengths": self.lengths, "mass": self.mass, "node_mass": self.node_mass,
                    "joint_lengths": self.joint_lengths, "joint_bend": self.joint_bend_stiffness,
                    "joint_twist": self.joint_twist_stiffness}
        self._views = {name: int32_view(xp, array) for name, array in as_int.items()}
        self._views.update({name: warp_view(xp.ascontiguousarray(array, dtype=xp.float64), wp.float64)
                            for name, array in as_float.items()})
        self._views.update({name: warp_view(xp.ascontiguousarray(array, dtype=xp.float64).reshape(-1, 3), wp.vec3d)
                            for name, array in (("stiffness", self.stiffness), ("rest_darboux", self.rest_darboux))})
        self._chains = kernels.Chains()
        self._chains.segments = int(self.lengths.shape[1])
        self._chains.radius = float(settings.radius)
        for field_name, view in (("lengths", "lengths"), ("masses", "mass"), ("node_masses", "node_mass"),
                                 ("stiffness", "stiffness"), ("rest_darboux", "rest_darboux"),
                                 ("joint_lengths", "joint_lengths"), ("joint_valid", "joint_valid"),
                                 ("bend", "joint_bend"), ("twist", "joint_twist"), ("free", "free")):
            setattr(self._chains, field_name, self._views[view])
        self.interaction = None
        if settings.interaction_outer_radius > 0.0:
            self.interaction = SweptSphereInteraction(
                settings.interaction_inner_radius, settings.interaction_outer_radius,
                settings.interaction_stiffness, settings.interaction_damping, segment_valid, xp,
                segment_lengths=np.where(segment_valid, lengths, 0.0))

    @property
    def gravity(self):
        """(3,) scaled gravity [m/s²] on the solver's device (set it with host or device values)."""
        return self._gravity

    @gravity.setter
    def gravity(self, value):
        self.gravity_host = np.asarray(value.get() if hasattr(value, "get") else value, np.float64).reshape(3)
        self._gravity = self.xp.asarray(self.gravity_host)

    def _field(self, time: float):
        """(3,) host float64 [m/s²]: the uniform field on every node at ``time`` [s], scaled gravity plus wind."""
        return self.gravity_host + np.asarray(self.settings.wind.acceleration(time), np.float64)

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
        state = CosseratState(self.rest_orientations.copy(), xp.zeros(self.rest_orientations.shape[:-1] + (3,)),
                              self.rest_root.copy(), identity, zeros, zeros.copy(), 0.0)
        state.collider_anchor = self.positions(state)
        return state

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

    def energies(self, state: CosseratState):
        """Per strand (S,) kinetic, gravitational and elastic energy [J] of the free segments (rigid rods
        of mass m and radius r; gravity potential −m g·c with the scaled gravity, zero at the origin)."""
        xp = self.xp
        d3 = quat.axis(state.orientations, 2, xp)
        positions = self._positions(state.root_positions, d3)
        omega = self._angular_velocities(state.root_angular_velocities, state.joint_velocities)
        velocities = self._node_velocities(state.root_velocities, omega, d3)
        segments = self.lengths[..., None] * d3
        weight = xp.where(self.free_joint, self.mass, 0.0)
        centers = 0.5 * (velocities[:, 1:] + velocities[:, :-1])
        spin_sq = xp.sum(omega * omega, axis=-1)
        axial_sq = _dot(omega, d3, xp)[..., 0] ** 2
        radius_sq = self.settings.radius ** 2
        rotation = (self.lengths ** 2 / 12.0 + radius_sq / 4.0) * (spin_sq - axial_sq) + radius_sq / 2.0 * axial_sq
        kinetic = 0.5 * xp.sum(weight * (xp.sum(centers * centers, axis=-1) + rotation), axis=1)
        middle = positions[:, :-1] + 0.5 * segments
        gravity = -xp.sum(weight * (middle @ self.gravity), axis=1)
        return kinetic, gravity, self.energy(state.orientations)

    def _angular_velocities(self, root_omega, joint_velocities):
        """(S, M, 3) absolute segment angular velocities Ω_i = Ω_root + Σ_{j≤i} w_j [rad/s]."""
        xp = self.xp
        return root_omega[:, None] + xp.cumsum(xp.where(self.free_joint[..., None], joint_velocities, 0.0), axis=1)

    def _node_velocities(self, root_velocity, omega, d3):
        """(S, P, 3) node velocities [m/s] (eq. 3.6: cumulative sum of l Ω × d3 from the root)."""
        xp = self.xp
        spin = self.lengths[..., None] * xp.cross(omega, d3)
        zero = xp.zeros_like(spin[:, :1])
        return root_velocity[:, None] + xp.concatenate([zero, xp.cumsum(spin, axis=1)], axis=1)

    def step(self, state_in: CosseratState, state_out: CosseratState, control: CosseratControl,
             contacts=None, dt: float = 1.0 / 96.0) -> dict:
        """Advance by dt [s] into ``state_out``; returns stats (``contacts``, ``recovered_inside``,
        ``strand_parts``: the parts all strands stepped (strands × steps where none split its steps) and
        ``corrected_strands``: those that took the corrector, as device scalars read with the frame's stats;
        ``substeps``: the steps taken).

        dt is split into equal steps ≤ settings.max_step, a split that depends on dt alone, so the host plans the
        steps without reading the device. A strand whose fastest segment would turn by more than MAX_TURN_PER_STEP
        in a step (the velocity-product terms are explicit: a whipping tip) splits that step for itself into up to
        MAX_REFINEMENT parts inside ``kernels.articulated_step``, the step's forces held over its parts."""
        xp = self.xp
        colliders = control.colliders.to_device(xp) if control.colliders is not None else AnalyticColliders()
        start_pos, start_rot = state_in.root_positions, state_in.root_rotations
        end_pos = xp.asarray(control.root_positions, dtype=xp.float64)
        end_rot = quat.normalize(xp.asarray(control.root_rotations, dtype=xp.float64), xp)
        end_rot = xp.where(_dot(end_rot, start_rot, xp) < 0.0, -end_rot, end_rot)
        state = CosseratState(xp.array(state_in.orientations, dtype=xp.float64, order="C"),
                              xp.array(state_in.joint_velocities, dtype=xp.float64, order="C"),
                              start_pos, start_rot, state_in.root_velocities, state_in.root_angular_velocities,
                              state_in.time, state_in.interaction_pairs, state_in.collider_anchor)
        contact_count = substeps = 0
        work = self._work_arrays()
        work["parts"][:] = 0
        work["corrected"][:] = 0
        elapsed = anchored = 0.0        # [s] into dt: this step's start, the collider anchor's time
        while dt - elapsed > 1e-12 * dt:
            # the start velocities (and, when forces need them, node positions and velocities) of this step
            nodes = self._kinematics(state, with_nodes=colliders.count > 0 or self.interaction is not None
                                     or self.air is not None)
            h = self._step_length(dt - elapsed)
            contact = None
            if colliders.count:
                contact = self._collider_forces(state, nodes["positions"], nodes["velocities"], colliders, h, dt,
                                                (anchored / dt, elapsed / dt))
                anchored = elapsed
            elapsed = min(dt, elapsed + h)
            alpha = elapsed / dt
            root_pos = start_pos + alpha * (end_pos - start_pos)
            root_rot = quat.normalize(start_rot + alpha * (end_rot - start_rot), xp)
            contact_count += self._substep(state, nodes, root_pos, root_rot, contact, control.extra_forces, h)
            substeps += 1
        recovered_count = 0
        if colliders.count:
            recovered_count = self._settle_on_colliders(state, colliders, dt, anchored)
        if not self._resident and not bool(xp.all(xp.isfinite(state.orientations))):
            raise FloatingPointError("Cosserat strands produced NaN/Inf orientations")
        for name in ("orientations", "joint_velocities", "root_positions", "root_rotations", "root_velocities",
                     "root_angular_velocities", "time", "collider_anchor"):
            setattr(state_out, name, getattr(state, name))
        return {"recovered_inside": recovered_count, "substeps": substeps, "contacts": contact_count,
                "corrected_strands": xp.sum(work["corrected"]), "strand_parts": xp.sum(work["parts"]),
                "interaction_pairs": state.interaction_pairs, "ignored_colliders": list(colliders.ignored)}

    @property
    def _resident(self) -> bool:
        """Whether the step runs device-resident (CUDA's layout): it then reads nothing back inside a substep (a
        non-finite state is caught by the group's check after the substep)."""
        return cuda_layout_on(self.device)

    def _settle_on_colliders(self, state: CosseratState, colliders, dt: float, anchored: float):
        """The end of a substep with colliders: the contact anchor carried to the end (the next step's query starts
        there, at rest), a node whose anchor is inside a closed shell recovered, then TURN_OUT_ROUNDS rounds of
        ``_turn_out`` (turned segments move the nodes after them: query again, at rest). On the CPU the rounds end
        at the first that turns nothing; on a device all of them run (a round that turns nothing changes
        nothing). Returns the number of free nodes recovered (a device scalar)."""
        xp = self.xp
        end = self._kinematics(state, with_nodes=True)
        self._collider_forces(state, end["positions"], end["velocities"], colliders, None, dt, (anchored / dt, 1.0))
        # only the free nodes: the root lies on the skin, reads as inside about half the time and would search for a
        # way out of the head at every substep, and the clamped nodes' anchors steer nothing
        anchor = state.collider_anchor
        free, recovered = colliders.recover_inside(xp.ascontiguousarray(anchor[:, CLAMPED_NODES:]),
                                                   self.settings.radius, xp)
        state.collider_anchor = xp.concatenate((anchor[:, :CLAMPED_NODES], free), axis=1)
        recovered_count = xp.count_nonzero(recovered & (self.node_mass[:, CLAMPED_NODES:] > 0.0))
        for _ in range(TURN_OUT_ROUNDS):
            if not self._turn_out(state, end["positions"]):
                break
            end = self._kinematics(state, with_nodes=True)
            self._collider_forces(state, end["positions"], end["velocities"], colliders, None, dt, (1.0, 1.0))
        return recovered_count

    def _step_length(self, remaining: float) -> float:
        """Length [s] of the next step: ``remaining`` [s] split evenly into steps ≤ max_step."""
        return remaining / max(1, math.ceil(remaining / self.settings.max_step - 1e-9))

    def _kinematics(self, state: CosseratState, with_nodes: bool) -> dict:
        """Segment angular velocities (S, M, 3) of ``state`` into the work array ``omega``, every strand's largest
        |Ω|² into ``fastest_sq`` (for ``kernels.articulated_step``'s refinement) and, with_nodes, new (S, P, 3)
        node "positions" and "velocities" (kernels.kinematics, a thread per strand)."""
        xp = self.xp
        work = self._work_arrays()
        strands, segments = self.lengths.shape
        nodes = {}
        if with_nodes:
            nodes = {"positions": xp.empty((strands, segments + 1, 3)), "velocities": xp.empty((strands, segments + 1, 3))}
        point_views = [warp_view(nodes[name].reshape(-1, 3), wp.vec3d) if with_nodes else work["views"]["no_nodes"]
                       for name in ("positions", "velocities")]
        launch_split(kernels.kinematics, strands, self.device, [], [
            segments, warp_view(state.orientations.reshape(-1, 4), wp.vec4d),
            warp_view(state.joint_velocities.reshape(-1, 3), wp.vec3d), self._views["lengths"], self._views["free"],
            warp_view(xp.ascontiguousarray(state.root_positions), wp.vec3d),
            warp_view(xp.ascontiguousarray(state.root_velocities), wp.vec3d),
            warp_view(xp.ascontiguousarray(state.root_angular_velocities), wp.vec3d), int(with_nodes),
            work["views"]["omega"], *point_views, work["views"]["fastest_sq"]])
        return nodes

    def _work_arrays(self) -> dict:
        """The kernels' per-segment work arrays (allocated once per solver, on the solver's device)."""
        if self._work is None:
            xp = self.xp
            strands, segments = self.lengths.shape
            count = strands * segments
            arrays = {"omega": xp.zeros((count, 3)), "fastest_sq": xp.zeros(strands),
                      "parts": xp.zeros(strands, dtype=xp.int32), "corrected": xp.zeros(strands, dtype=xp.int32),
                      "gain_angular": xp.zeros((count, 3, 3)), "gain_linear": xp.zeros((count, 3, 3)),
                      "solved_torque": xp.zeros((count, 3)), "parent_edge": xp.zeros((count, 3)),
                      "velocity_product": xp.zeros((count, 3)), "acceleration": xp.zeros((count, 3)),
                      "no_nodes": xp.zeros((0, 3))}
            kinds = {"fastest_sq": wp.float64, "gain_angular": wp.mat33d, "gain_linear": wp.mat33d,
                     "parts": wp.int32, "corrected": wp.int32}
            arrays["views"] = {name: warp_view(array, kinds.get(name, wp.vec3d)) for name, array in list(arrays.items())}
            arrays["joints"] = kernels.JointWork()
            for name in ("gain_angular", "gain_linear", "solved_torque", "parent_edge", "velocity_product",
                         "acceleration"):
                setattr(arrays["joints"], name, arrays["views"][name])
            self._work = arrays
        return self._work

    def _substep(self, state: CosseratState, nodes: dict, root_pos, root_rot, contact, extra_forces, h) -> int:
        """Semi-implicit Euler step of length h [s] (kernels.articulated_step, a thread per strand): joint
        accelerations from the configuration and the start velocities (``nodes``: this state's kinematics),
        then w, Ω and q; the root frame moves to (root_pos, root_rot) whose finite differences give its
        velocity and acceleration. ``contact``: (collider forces (S, P, 3) [N], contact count) of
        ``_collider_forces`` or None; they, interaction and extra forces are summed here (xp) when present.
        A strand in which some segment would turn by more than MAX_TURN_PER_STEP splits the step into parts, and
        a part in which some segment turns by more than CORRECTOR_TURN takes the velocity-product terms at its mid
        velocity, by a second articulated pass on the same configuration (their error grows with (h·Ω)²; the
        strands are independent in this pass, so each decides for itself, on the device). Returns the contact
        count (a device scalar with colliders)."""
        xp = self.xp
        s = self.settings
        strands = self.lengths.shape[0]
        root_velocity = (root_pos - state.root_positions) / h
        root_acceleration = (root_velocity - state.root_velocities) / h
        turn = quat.multiply(root_rot, quat.conjugate(state.root_rotations, xp), xp)
        root_omega = 2.0 * turn[:, 1:] * xp.sign(turn[:, :1] + 1e-300) / h
        root_alpha = (root_omega - state.root_angular_velocities) / h

        count = 0
        external = None
        if extra_forces is not None:
            external = xp.asarray(extra_forces, dtype=xp.float64)
        if contact is not None:
            contact_forces, count = contact
            external = contact_forces if external is None else external + contact_forces
        if self.interaction is not None:
            interaction, pairs = self.interaction.forces(nodes["positions"], nodes["velocities"])
            external = interaction if external is None else external + interaction
            state.interaction_pairs = pairs
        if self.air is not None:
            drag = self._air_drag(nodes["positions"], nodes["velocities"], h)
            external = drag if external is None else external + drag
        work = self._work_arrays()
        views = work["views"]
        field = self._field(state.time)
        # the root segment's orientation where the last step left it (root rotation times its rest orientation)
        root_orientation_start = xp.ascontiguousarray(state.orientations[:, 0])
        root_orientation = xp.ascontiguousarray(quat.multiply(root_rot, self.rest_orientations[:, 0], xp))
        external_view = views["no_nodes"] if external is None else \
            warp_view(xp.ascontiguousarray(external).reshape(-1, 3), wp.vec3d)
        launch_split(kernels.articulated_step, strands, self.device, [], [
            self._chains, h, float(s.damping), MAX_TURN_PER_STEP, MAX_REFINEMENT,
            warp_view(state.orientations.reshape(-1, 4), wp.vec4d),
            warp_view(state.joint_velocities.reshape(-1, 3), wp.vec3d), views["omega"], wp.vec3d(*field.tolist()),
            external_view, int(external is not None), warp_view(xp.ascontiguousarray(root_alpha), wp.vec3d),
            warp_view(xp.ascontiguousarray(root_acceleration), wp.vec3d),
            warp_view(xp.ascontiguousarray(state.root_angular_velocities), wp.vec3d),
            warp_view(xp.ascontiguousarray(root_omega), wp.vec3d), warp_view(root_orientation_start, wp.vec4d),
            warp_view(root_orientation, wp.vec4d), views["fastest_sq"], CORRECTOR_TURN, work["joints"],
            views["parts"], views["corrected"]])
        state.root_positions, state.root_rotations = root_pos, root_rot
        state.root_velocities, state.root_angular_velocities = root_velocity, root_omega
        state.time += h
        return count

    def _air_drag(self, positions, velocities, h: float):
        """Air drag force (S, P, 3) [N] on the nodes at positions and velocities (S, P, 3): −m c v / (1 + h c),
        each node's tangent the direction between its neighbours (its one segment at the ends); the force takes
        at most MAX_DRAG_SHARE of a node's momentum per step."""
        xp = self.xp
        padded = xp.concatenate((positions[:, :1], positions, positions[:, -1:]), axis=1)
        along = padded[:, 2:] - padded[:, :-2]
        length = xp.sqrt(xp.sum(along * along, axis=-1, keepdims=True))
        tangents = along / xp.maximum(length, 1e-300)
        rates = self.air.rates(velocities.reshape(-1, 3), tangents.reshape(-1, 3)).reshape(self.node_mass.shape)
        share = xp.minimum(h * rates / (1.0 + h * rates), MAX_DRAG_SHARE)
        return -(self.node_mass * share / h)[..., None] * velocities

    def _turn_out(self, state: CosseratState, positions) -> bool:
        """The substep's last word on the colliders: the contact push is a force that closes part of a node's
        depth per step, so a node that crossed a surface late in the substep would end it inside. Strands with
        a node that the contact query moved (``state.collider_anchor``: the nodes pushed out on the side each
        came from) turn their segments towards those positions (``kernels.turn_towards``, lengths kept); the
        joint velocities stay, and the next step's contact force meets the motion into the surface. Returns
        whether a strand may have turned (on a device the launch always runs: a strand that did not move keeps
        its orientations)."""
        xp = self.xp
        strands, points = positions.shape[:2]
        shift = state.collider_anchor - positions
        moved = xp.ascontiguousarray((xp.sum(shift * shift, axis=-1) > 0.0).any(axis=1).astype(xp.int32))
        if not self._resident and not bool(moved.any()):
            return False
        launch_split(kernels.turn_towards, strands, self.device, [], [
            points - 1, warp_view(state.orientations.reshape(-1, 4), wp.vec4d), self._views["lengths"],
            self._views["free"], warp_view(xp.ascontiguousarray(state.root_positions), wp.vec3d),
            warp_view(xp.ascontiguousarray(state.collider_anchor).reshape(-1, 3), wp.vec3d),
            warp_view(moved, wp.int32)])
        return True

    def lay_onto(self, state: CosseratState, targets, strands) -> None:
        """The free segments of the ``strands`` (S,) bool turned, from the root out, to point at the node positions
        ``targets`` (S, P, 3) [m] (``kernels.turn_towards``): targets a segment's length apart, as a strand laid out
        of the colliders' shells is, are met exactly. The joint velocities stay; those nodes' contact anchors move
        to the targets, so the next contact query starts from there."""
        xp = self.xp
        targets = xp.ascontiguousarray(targets, dtype=xp.float64)
        chosen = xp.ascontiguousarray(strands.astype(xp.int32))
        launch_split(kernels.turn_towards, targets.shape[0], self.device, [], [
            targets.shape[1] - 1, warp_view(state.orientations.reshape(-1, 4), wp.vec4d), self._views["lengths"],
            self._views["free"], warp_view(xp.ascontiguousarray(state.root_positions), wp.vec3d),
            warp_view(targets.reshape(-1, 3), wp.vec3d), warp_view(chosen, wp.int32)])
        if state.collider_anchor is not None:
            state.collider_anchor = xp.where(strands[:, None, None], targets, state.collider_anchor)

    def _collider_forces(self, state: CosseratState, positions, velocities, colliders: AnalyticColliders, h, dt: float,
                         interval) -> tuple:
        """(S, P, 3) node forces [N] pushing the nodes in contact out of the colliders within about one step of
        length h [s] (remove the normal velocity towards the surface, hold the field pressing them on it, close
        half the depth per step at most at DEPTH_SPEED) with a Coulomb-capped tangential friction force, both against the touched
        surface's velocity; returns (forces, contact count: a device scalar).

        The contact query (``colliders.contact``) runs from ``state.collider_anchor`` to ``positions`` (S, P, 3)
        [m] over ``interval`` (fractions of the substep dt [s] since the anchor was taken) and moves the anchor
        to the nodes pushed out on the side each came from. A node that crossed a mesh surface inside one step
        is therefore pushed back through it, and keeps being pushed until it is out: its anchor stays on the
        side it came from. h None: only the anchor moves (returns None)."""
        xp = self.xp
        anchor = positions if state.collider_anchor is None else state.collider_anchor
        depth, normal, surface_motion, projected, touching = colliders.contact(positions, self.settings.radius, xp,
                                                                              start=anchor, interval=interval)
        state.collider_anchor = projected
        if h is None:
            return None
        touching = touching & (self.node_mass > 0.0)
        mass = self.node_mass
        relative = velocities - surface_motion / dt
        normal_speed = xp.sum(relative * normal, axis=-1)
        # the field (gravity and wind) pressing the node on the surface is held too: without it a resting node
        # sinks to where the depth term balances it (2 g h², half a millimetre at h = 5 ms)
        field = xp.asarray(self._field(state.time))
        pressing = xp.maximum(-xp.sum(field * normal, axis=-1), 0.0)
        # the depth closes at half per step but never faster than DEPTH_SPEED: at the short steps of a whipping
        # strand half a millimetre per step is metres per second, a kick the node keeps once it is out
        push = mass * (xp.maximum(-normal_speed, 0.0) / h + pressing + xp.minimum(0.5 * depth / h, DEPTH_SPEED) / h)
        tangential = relative - normal_speed[..., None] * normal
        tangential_speed = xp.sqrt(xp.sum(tangential * tangential, axis=-1))
        friction = xp.minimum(self.settings.collider_friction * push, mass * tangential_speed / h)
        force = push[..., None] * normal - (friction / xp.maximum(tangential_speed, 1e-300))[..., None] * tangential
        return xp.where(touching[..., None], force, 0.0), xp.count_nonzero(touching)

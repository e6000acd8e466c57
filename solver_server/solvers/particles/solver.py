"""Game-style particle hair (seed 004): spring chains integrated explicitly, one Warp kernel per substep.

Per step of length dt (split into stable internal substeps h):

1. Root motion: the pinned root points move to their targets; their speed is the "velocity from
   root motion". If it exceeds ``teleport_speed`` (a teleport or a violent cut), that motion is
   discarded — the strand is carried along rigidly with the root displacement, creating no
   velocity — and the rigid length constraint switches on (rigidity 1), fading back to springs
   with time constant ``teleport_recovery``.
2. Accelerations: gravity · gravity_scale, wind (sine-varying strength), neighbour and
   second-neighbour springs with the asymmetric response (linear when compressed, quadratic when
   stretched).
3. v ← (v + h a)(1 − damping h) / (1 + h c), c the air drag rate of the particle's start velocity across its
   segment (``kernels/air.py``: still air on a cylinder of the strand's radius and density, times
   ``air_drag``); points slower than ``rest_speed`` rest (v = 0, not moved);
   x ← x + h v (symplectic Euler; the seed's averaged velocity (v0+v1)/2 amplifies undamped
   oscillations by √(1 + h²ω²/2) per step and is not used).
4. Rigid length constraint blended by rigidity, then the distance clamp (segments within [1/max_stretch, max_stretch] ×
   rest length); both rebuild the chain from the root with a cumulative sum over segment
   vectors. Only a point's own segment correction becomes velocity (PBD style); turning the
   translation inherited from segments nearer the root into velocity whips the tip (measured:
   tips at 4 m/s and chains folding over their root in a plain drop test).
5. Colliders (plane / sphere / capsule): points pushed out, inward velocity removed, friction.

Steps 2–4 of a substep are one launch of ``kernels.substep`` (a thread per strand walking its particles in
order); step 5 projects onto the colliders with the shared collider code, and only when there are colliders.

Arrays are padded (strands S, points P, 3) [m], [m/s]; see guides.layout.StrandLayout.
"""

from __future__ import annotations

import math

import numpy as np
import warp as wp

from ...kernels import launch, launch_split, warp_device_of, warp_view
from ..guides.layout import StrandLayout
from . import kernels
from ..strand_colliders import AnalyticColliders
from .settings import ParticleHairSettings
from .state import ParticleState, StrandControl


# projections onto the colliders per internal step, the distance clamp between each two
COLLIDER_ROUNDS = 2


# ω² of the angle springs is at most this × k (Gershgorin over a particle's own and its neighbours' joints,
# |∂θ/∂x| ≤ 2/L at the middle particle), added to the springs' bound in max_substep
ANGLE_STIFFNESS_BOUND = 4.0


class ParticleHairSolver:
    """Particle-spring hair of one object. Build from rest positions, step states.

    rest_positions: (S, P, 3) padded rest points [m] (layout.pad of the scene points);
    gravity: (3,) [m/s²]; xp: numpy or cupy; painted: {param: (S, P) factor per point} scaling
    ``particle_stiffness`` and ``particle_bend_stiffness`` (a spring takes the mean of its two ends) and
    ``particle_angle_stiffness`` (the turning angle at a particle takes that particle's factor).
    """

    def __init__(self, rest_positions, layout: StrandLayout, settings: ParticleHairSettings, gravity, xp=np,
                 painted: dict | None = None):
        self.xp = xp
        self.layout = layout
        self.settings = settings
        self.gravity_host = np.asarray(gravity, np.float64) * settings.gravity_scale
        self.gravity = xp.asarray(self.gravity_host)
        rest = xp.asarray(rest_positions, dtype=xp.float64)
        self.rest_positions = rest
        free = np.array(layout.valid, dtype=bool)
        free[:, :settings.pinned_points] = False
        self.free = xp.asarray(free)                                              # (S, P): integrated particles
        self._segments = None                                                     # _segment_view
        self.tip_index = xp.asarray((layout.valid.sum(axis=1) - 1).astype(np.int32))
        self.device = warp_device_of(self.rest_positions)
        self.rest_lengths = self._lengths(rest[:, 1:] - rest[:, :-1])
        self.rest_lengths2 = self._lengths(rest[:, 2:] - rest[:, :-2])
        painted = painted or {}
        # spring stiffness k/m [1/s²] of the (S, P-1) neighbour and (S, P-2) second-neighbour springs
        self.spring_stiffness = {gap: xp.asarray(np.broadcast_to(self._spring_factors(painted.get(name), gap) * value,
                                                                 (rest.shape[0], max(rest.shape[1] - gap, 0))).copy())
                                 for gap, name, value in ((1, "particle_stiffness", settings.stiffness),
                                                          (2, "particle_bend_stiffness", settings.bend_stiffness))}
        # k' = k / (stretch_scale · L): the stretched springs' k'·Δx² (0 for padding springs of zero rest length)
        self.stretch_stiffness = {gap: self.spring_stiffness[gap] / xp.maximum(settings.stretch_scale * rest_length, 1e-15)
                                  for gap, rest_length in ((1, self.rest_lengths), (2, self.rest_lengths2))}
        rest_host = np.asarray(rest_positions, np.float64)
        rest_segments = np.linalg.norm(rest_host[:, 1:] - rest_host[:, :-1], axis=-1)
        joint_valid = (rest_segments[:, :-1] > 0.0) & (rest_segments[:, 1:] > 0.0)
        self.rest_angles = xp.asarray(np.where(joint_valid, self._turning_angles(np, rest_host), 0.0))  # (S, P-2)
        angle_factors = painted.get("particle_angle_stiffness")
        angle_factors = 1.0 if angle_factors is None else np.asarray(angle_factors, np.float64)[:, 1:-1]
        mean_rest = 0.5 * (rest_segments[:, :-1] + rest_segments[:, 1:])
        # k L̄² per joint (0 where a segment is padding): the angle spring's coefficient [m²/s²]
        self.angle_coefficient = xp.asarray(np.where(joint_valid, settings.angle_stiffness * angle_factors
                                                     * mean_rest ** 2, 0.0))
        largest = {name: float(np.max(factors)) if factors.size else 1.0 for name, factors in painted.items()}
        stiffest = (settings.stiffness * largest.get("particle_stiffness", 1.0)
                    + settings.bend_stiffness * largest.get("particle_bend_stiffness", 1.0)) * max(
            1.0, 2.0 * (settings.max_stretch - 1.0) / settings.stretch_scale) \
            + ANGLE_STIFFNESS_BOUND * settings.angle_stiffness * largest.get("particle_angle_stiffness", 1.0)
        # symplectic Euler is stable for ω h < 2; keep ω_max h ≤ 1 with ω_max² ≤ 4 Σk (chain bound)
        self.max_substep = 1.0 / math.sqrt(4.0 * stiffest)
        self._views = {"tip_index": warp_view(self.tip_index, wp.int32), "rest_lengths": warp_view(self.rest_lengths, wp.float64),
                       "rest_lengths2": warp_view(self.rest_lengths2, wp.float64),
                       "spring1": warp_view(self.spring_stiffness[1], wp.float64),
                       "spring2": warp_view(self.spring_stiffness[2], wp.float64),
                       "stretch1": warp_view(self.stretch_stiffness[1], wp.float64),
                       "stretch2": warp_view(self.stretch_stiffness[2], wp.float64),
                       "rest_angles": warp_view(self.rest_angles, wp.float64),
                       "angle_coefficient": warp_view(self.angle_coefficient, wp.float64)}

    @staticmethod
    def _spring_factors(factors, gap: int):
        """Painted factors (S, P) -> (S, P - gap) mean of each spring's two ends (1.0 when unpainted)."""
        if factors is None:
            return 1.0
        factors = np.asarray(factors, np.float64)
        return 0.5 * (factors[:, gap:] + factors[:, :-gap])

    @staticmethod
    def _turning_angles(xp, positions):
        """(S, P-2) angle [rad] between the two segments at every interior particle (0: straight)."""
        first = positions[:, 1:-1] - positions[:, :-2]
        second = positions[:, 2:] - positions[:, 1:-1]
        cross = xp.sqrt(xp.sum(xp.cross(first, second) ** 2, axis=-1))
        return xp.arctan2(cross, xp.sum(first * second, axis=-1))

    def angle_accelerations(self, positions):
        """(S, P, 3) accelerations [m/s²] −∇ of Σ ½ k L̄² (θ − θ̄)² per unit mass (the turning-angle springs).

        With t₁, t₂ the unit segments at particle i, ∂θ/∂x_{i−1} = (t₂ − cos θ t₁)/(l₁ sin θ) and
        ∂θ/∂x_{i+1} = −(t₁ − cos θ t₂)/(l₂ sin θ); x_i takes minus their sum. (θ − θ̄)/sin θ stays finite
        for a straight rest shape; a joint exactly straight with a curved rest angle gets no force there.
        Computed by the substep's own kernel code (kernels.add_angle_springs)."""
        return self._internal_accelerations(positions, springs=False, angles=True)

    def spring_accelerations(self, positions):
        """(S, P, 3) accelerations [m/s²] of the neighbour and second-neighbour springs (kernels.spring_force:
        k·Δx compressed, k·Δx²/(stretch_scale·L) stretched, per unit mass)."""
        return self._internal_accelerations(positions, springs=True, angles=False)

    def _internal_accelerations(self, positions, springs: bool, angles: bool):
        xp = self.xp
        positions = xp.ascontiguousarray(xp.asarray(positions, dtype=xp.float64))
        acceleration = xp.zeros_like(positions)
        stiffness = [self.spring_stiffness[1], self.stretch_stiffness[1], self.spring_stiffness[2],
                     self.stretch_stiffness[2]]
        if not springs:
            stiffness = [xp.zeros_like(array) for array in stiffness]
        angle_k = self.angle_coefficient if angles else xp.zeros_like(self.angle_coefficient)
        launch(kernels.internal_accelerations, positions.shape[0], [
            warp_view(positions.reshape(-1, 3), wp.vec3d), positions.shape[1],
            warp_view(self.rest_lengths, wp.float64), warp_view(stiffness[0], wp.float64),
            warp_view(stiffness[1], wp.float64), warp_view(self.rest_lengths2, wp.float64),
            warp_view(stiffness[2], wp.float64), warp_view(stiffness[3], wp.float64),
            warp_view(self.rest_angles, wp.float64), warp_view(angle_k, wp.float64),
            warp_view(acceleration.reshape(-1, 3), wp.vec3d)], self.device)
        return acceleration

    def _lengths(self, vectors):
        return self.xp.sqrt(self.xp.sum(vectors * vectors, axis=-1))

    def _segment_view(self):
        """Warp int32 (S·(P − 1), 2) view of every strand's segments as particle index pairs (built once)."""
        if self._segments is None:
            xp = self.xp
            strands, points = self.rest_positions.shape[:2]
            first = (xp.arange(strands)[:, None] * points + xp.arange(points - 1)[None, :]).reshape(-1)
            self._segments = xp.ascontiguousarray(xp.stack((first, first + 1), axis=1).astype(xp.int32))
        return warp_view(self._segments, wp.int32)

    def _collide(self, colliders, start, corrected, velocities, h: float, interval):
        """The colliders' projection of the clamped chain ``corrected`` (S, P, 3) [m] whose particles moved from
        ``start`` during this internal step of length h [s] (a mesh collider moves over ``interval``, the part of
        the simulation substep the step covers). A pushed particle stretches or squashes its segments: the
        distance clamp (``kernels.clamp_chain``) and the colliders alternate (COLLIDER_ROUNDS projections), so the
        step ends outside every collider with its segments (nearly) within the clamp. Between
        the first projection and the clamp, segments that a mesh's edge crossed go back to their side
        (``resolve_edges``).
        Every round runs, contact or not (a fixed sequence of launches, no host decision).
        Returns (positions, velocities, contacts of the first projection: a 0-d device array)."""
        xp, s = self.xp, self.settings
        free = self.free[..., None]
        contacts = None
        for round_index in range(COLLIDER_ROUNDS):
            collided, collided_velocities, count, normals = colliders.resolve(corrected, velocities, s.radius, xp,
                                                                              start=start, interval=interval)
            corrected = xp.ascontiguousarray(xp.where(free, collided, corrected))
            velocities = xp.ascontiguousarray(xp.where(free, collided_velocities, velocities))
            if round_index == 0:
                # a mesh's edge (an ear's rim) between two particles that both stay outside: the segment goes
                # back to its side, its particles' velocities take the move (zero for a segment left alone)
                moved, edge_count = colliders.resolve_edges(start, corrected, self._segment_view(), s.radius,
                                                            self.free, xp, interval)
                if moved is not corrected:      # the points themselves come back where no mesh edge can act
                    velocities = xp.ascontiguousarray(velocities + (moved - corrected) / h)
                    corrected = xp.ascontiguousarray(moved)
                contacts = count + edge_count
            if round_index < COLLIDER_ROUNDS - 1:
                strands, points = corrected.shape[:2]
                launch_split(kernels.clamp_chain, strands, self.device, [], [
                    warp_view(corrected.reshape(-1, 3), wp.vec3d), warp_view(velocities.reshape(-1, 3), wp.vec3d),
                    points, s.pinned_points, self._views["tip_index"], self._views["rest_lengths"],
                    float(s.max_stretch), float(h),
                    warp_view(xp.ascontiguousarray(normals, dtype=xp.float64).reshape(-1, 3), wp.vec3d)])
        return corrected, velocities, contacts

    def initial_state(self) -> ParticleState:
        xp = self.xp
        strands = self.rest_positions.shape[0]
        return ParticleState(self.rest_positions.copy(), xp.zeros_like(self.rest_positions), xp.zeros(strands), 0.0)

    def step(self, state_in: ParticleState, state_out: ParticleState, control: StrandControl,
             contacts=None, dt: float = 1.0 / 96.0) -> dict:
        """Advance ``state_in`` by dt [s] into ``state_out``; returns stats (counts and the largest stretch as 0-d
        device arrays, read at the frame's end). Each substep is one kernel launch (kernels.substep, a thread per
        strand) plus the colliders' projection when there are colliders; nothing is read back to the host."""
        xp = self.xp
        s = self.settings
        pinned = s.pinned_points
        strands, points = self.rest_positions.shape[:2]
        targets = xp.asarray(control.root_targets, dtype=xp.float64)
        colliders = control.colliders.to_device(xp) if control.colliders is not None else AnalyticColliders()
        positions = xp.array(state_in.positions, dtype=xp.float64, order="C")
        velocities = xp.array(state_in.velocities, dtype=xp.float64, order="C")
        rigidity = xp.array(state_in.rigidity, dtype=xp.float64)

        displacement = targets[:, 0] - positions[:, 0]                              # (S, 3)
        root_speed = self._lengths(displacement) / dt
        teleport = root_speed > s.teleport_speed
        shift = xp.ascontiguousarray(xp.where(teleport[:, None], displacement, 0.0))
        root_start = positions[:, :pinned] + shift[:, None, :]
        rigidity = xp.where(teleport, 1.0, rigidity)

        substeps = max(1, math.ceil(dt / self.max_substep - 1e-9))
        h = dt / substeps
        decay = math.exp(-h / s.teleport_recovery)
        views = self._views
        corrected = xp.empty_like(positions)
        max_stretch = xp.zeros(strands)
        contact_count = xp.zeros((), dtype=xp.int64)
        time = state_in.time
        shared = {"shift": warp_view(shift, wp.vec3d), "rigidity": warp_view(rigidity, wp.float64),
                  "max_stretch": warp_view(max_stretch, wp.float64)}
        for sub in range(substeps):
            alpha = (sub + 1) / substeps
            root_now = xp.ascontiguousarray(root_start + alpha * (targets - root_start))
            field = np.asarray(self.gravity_host + s.wind.acceleration(time), np.float64)
            finishing = sub == substeps - 1 and not colliders.count
            launch_split(kernels.substep, strands, self.device, [], [
                warp_view(positions.reshape(-1, 3), wp.vec3d), warp_view(velocities.reshape(-1, 3), wp.vec3d),
                points, pinned, shared["shift"], int(sub == 0), warp_view(root_now.reshape(-1, 3), wp.vec3d),
                views["tip_index"], wp.vec3d(*field.tolist()), h, max(0.0, 1.0 - s.damping * h), float(s.radius),
                s.density * math.pi * s.radius ** 2, float(s.air_drag), float(s.rest_speed),
                views["rest_lengths"], views["spring1"], views["stretch1"], views["rest_lengths2"], views["spring2"],
                views["stretch2"], views["rest_angles"], views["angle_coefficient"], shared["rigidity"],
                decay, float(s.max_stretch), warp_view(corrected.reshape(-1, 3), wp.vec3d),
                int(finishing), shared["max_stretch"]])
            if colliders.count:
                corrected, velocities, count = self._collide(colliders, positions, corrected, velocities, h,
                                                             (sub / substeps, alpha))
                contact_count += count
            positions, corrected = corrected, positions
            time += h
        if colliders.count:
            launch_split(kernels.finish, strands, self.device, [], [
                warp_view(positions.reshape(-1, 3), wp.vec3d), warp_view(velocities.reshape(-1, 3), wp.vec3d), points,
                views["tip_index"], views["rest_lengths"], shared["max_stretch"]])
        state_out.positions, state_out.velocities, state_out.rigidity, state_out.time = (
            positions, velocities, rigidity, time)
        return {
            "substeps": substeps,
            "contacts": contact_count,
            "teleported_strands": teleport.sum(),
            "max_stretch": xp.max(max_stretch) if strands else xp.zeros(()),
            "ignored_colliders": list(colliders.ignored),
        }

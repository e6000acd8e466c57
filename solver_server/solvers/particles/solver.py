"""Game-style particle hair (seed 004): spring chains integrated explicitly, vectorized over strands.

Per step of length dt (split into stable internal substeps h):

1. Root motion: the pinned root points move to their targets; their speed is the "velocity from
   root motion". If it exceeds ``teleport_speed`` (a teleport or a violent cut), that motion is
   discarded — the strand is carried along rigidly with the root displacement, creating no
   velocity — and the rigid length constraint switches on (rigidity 1), fading back to springs
   with time constant ``teleport_recovery``.
2. Accelerations: gravity · gravity_scale, wind (sine-varying strength), neighbour and
   second-neighbour springs with the asymmetric response (linear when compressed, quadratic when
   stretched).
3. v ← (v + h a)(1 − damping h); points slower than ``rest_speed`` rest (v = 0, not moved);
   x ← x + h v (symplectic Euler; the seed's averaged velocity (v0+v1)/2 amplifies undamped
   oscillations by √(1 + h²ω²/2) per step and is not used).
4. Rigid length constraint blended by rigidity, then the distance clamp (segments ≤ max_stretch ×
   rest length); both rebuild the chain from the root with a cumulative sum over segment
   vectors. Only a point's own segment correction becomes velocity (PBD style); turning the
   translation inherited from segments nearer the root into velocity whips the tip (measured:
   tips at 4 m/s and chains folding over their root in a plain drop test).
5. Colliders (plane / sphere / capsule): points pushed out, inward velocity removed, friction.

Arrays are padded (strands S, points P, 3) [m], [m/s]; see guides.layout.StrandLayout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..guides.layout import StrandLayout
from .colliders import ColliderSet
from .settings import ParticleHairSettings


@dataclass
class ParticleState:
    """positions, velocities: (S, P, 3); rigidity: (S,) in [0, 1]; time [s] since the start."""

    positions: object
    velocities: object
    rigidity: object
    time: float = 0.0

    def copy(self, xp) -> "ParticleState":
        return ParticleState(xp.array(self.positions), xp.array(self.velocities), xp.array(self.rigidity), self.time)


@dataclass
class StrandControl:
    """Inputs of one step: root_targets (S, K, 3) world positions of the K pinned root points at
    the END of the step [m]; colliders in world space (may be empty)."""

    root_targets: object
    colliders: ColliderSet | None = None


def rebuild_chain(positions, segments, first_free: int, xp):
    """Chain positions from fixed points [0, first_free) and new segment vectors.

    positions: (S, P, 3); segments: (S, P-1, 3) new vectors from point k to k+1. Points k ≥
    first_free are recomputed as the last fixed point plus the cumulative sum of the segments
    after it (a vectorized reverse of "follow the leader").
    """
    anchor = positions[:, first_free - 1:first_free]
    rebuilt = anchor + xp.cumsum(segments[:, first_free - 1:], axis=1)
    return xp.concatenate([positions[:, :first_free], rebuilt], axis=1)


def scaled_segments(positions, target_lengths, xp, only_longer: bool):
    """Segment vectors of ``positions`` rescaled to ``target_lengths`` (S, P-1).

    only_longer: scale down segments longer than the target only (distance clamp); otherwise
    every segment gets exactly the target length (rigid constraint). Zero-length segments stay.
    """
    segments = positions[:, 1:] - positions[:, :-1]
    length = xp.sqrt(xp.sum(segments * segments, axis=-1))
    ratio = target_lengths / xp.maximum(length, 1e-15)
    if only_longer:
        ratio = xp.minimum(ratio, 1.0)
    ratio = xp.where(length > 1e-15, ratio, 1.0)
    return segments * ratio[..., None]


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
        self.gravity = xp.asarray(np.asarray(gravity, np.float64) * settings.gravity_scale)
        rest = xp.asarray(rest_positions, dtype=xp.float64)
        self.rest_positions = rest
        valid = xp.asarray(layout.valid)
        self.free = valid.copy()
        self.free[:, :settings.pinned_points] = False
        self.valid = valid
        self.tip_index = xp.asarray(layout.valid.sum(axis=1) - 1)
        self.rest_lengths = self._lengths(rest[:, 1:] - rest[:, :-1])
        self.rest_lengths2 = self._lengths(rest[:, 2:] - rest[:, :-2])
        self.max_lengths = self.rest_lengths * settings.max_stretch
        painted = painted or {}
        # spring stiffness k/m [1/s²] of the (S, P-1) neighbour and (S, P-2) second-neighbour springs
        self.spring_stiffness = {gap: xp.asarray(self._spring_factors(painted.get(name), gap) * value)
                                 for gap, name, value in ((1, "particle_stiffness", settings.stiffness),
                                                          (2, "particle_bend_stiffness", settings.bend_stiffness))}
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
        for a straight rest shape; a joint exactly straight with a curved rest angle gets no force there."""
        xp = self.xp
        acceleration = xp.zeros_like(positions)
        if positions.shape[1] < 3:
            return acceleration
        first = positions[:, 1:-1] - positions[:, :-2]
        second = positions[:, 2:] - positions[:, 1:-1]
        first_length = xp.maximum(self._lengths(first), 1e-15)
        second_length = xp.maximum(self._lengths(second), 1e-15)
        t1 = first / first_length[..., None]
        t2 = second / second_length[..., None]
        cosine = xp.clip(xp.sum(t1 * t2, axis=-1), -1.0, 1.0)
        sine = xp.sqrt(xp.sum(xp.cross(t1, t2) ** 2, axis=-1))
        angle = xp.arctan2(sine, cosine)
        bent = sine > 1e-12
        scale = xp.where(bent, self.angle_coefficient * (angle - self.rest_angles) / xp.where(bent, sine, 1.0), 0.0)
        on_previous = -scale[..., None] * (t2 - cosine[..., None] * t1) / first_length[..., None]
        on_next = scale[..., None] * (t1 - cosine[..., None] * t2) / second_length[..., None]
        acceleration[:, :-2] += on_previous
        acceleration[:, 2:] += on_next
        acceleration[:, 1:-1] -= on_previous + on_next
        return acceleration

    def _lengths(self, vectors):
        return self.xp.sqrt(self.xp.sum(vectors * vectors, axis=-1))

    def initial_state(self) -> ParticleState:
        xp = self.xp
        strands = self.rest_positions.shape[0]
        return ParticleState(self.rest_positions.copy(), xp.zeros_like(self.rest_positions), xp.zeros(strands), 0.0)

    def spring_accelerations(self, positions):
        """(S, P, 3) accelerations [m/s²] of the neighbour and second-neighbour springs."""
        xp = self.xp
        s = self.settings
        acceleration = xp.zeros_like(positions)
        for gap, rest, k in ((1, self.rest_lengths, self.spring_stiffness[1]),
                             (2, self.rest_lengths2, self.spring_stiffness[2])):
            if (s.stiffness if gap == 1 else s.bend_stiffness) == 0.0 or positions.shape[1] <= gap:
                continue
            vector = positions[:, gap:] - positions[:, :-gap]
            length = self._lengths(vector)
            extension = length - rest
            magnitude = xp.where(extension <= 0.0, k * extension,
                                 k * extension * extension / xp.maximum(s.stretch_scale * rest, 1e-15))
            magnitude = xp.where(rest > 0.0, magnitude, 0.0)
            force = vector * (magnitude / xp.maximum(length, 1e-15))[..., None]
            acceleration[:, :-gap] += force
            acceleration[:, gap:] -= force
        return acceleration

    def step(self, state_in: ParticleState, state_out: ParticleState, control: StrandControl,
             contacts=None, dt: float = 1.0 / 96.0) -> dict:
        """Advance ``state_in`` by dt [s] into ``state_out``; returns stats."""
        xp = self.xp
        s = self.settings
        pinned = s.pinned_points
        targets = xp.asarray(control.root_targets, dtype=xp.float64)
        colliders = control.colliders.to_device(xp) if control.colliders is not None else ColliderSet()
        positions = xp.array(state_in.positions)
        velocities = xp.array(state_in.velocities)
        rigidity = xp.array(state_in.rigidity)

        root_start = positions[:, :pinned]
        displacement = targets[:, 0] - root_start[:, 0]                          # (S, 3)
        root_speed = self._lengths(displacement) / dt
        teleport = root_speed > s.teleport_speed
        positions = positions + xp.where(teleport[:, None, None], displacement[:, None, :], 0.0)
        root_start = positions[:, :pinned]
        rigidity = xp.where(teleport, 1.0, rigidity)

        substeps = max(1, math.ceil(dt / self.max_substep - 1e-9))
        h = dt / substeps
        free = self.free[..., None]
        contact_count = 0
        time = state_in.time
        for sub in range(substeps):
            alpha = (sub + 1) / substeps
            root_now = root_start + alpha * (targets - root_start)
            wind = xp.asarray(s.wind.acceleration(time))
            acceleration = self.spring_accelerations(positions) + self.angle_accelerations(positions) \
                + self.gravity + wind
            velocities = (velocities + h * acceleration) * max(0.0, 1.0 - s.damping * h)
            moving = self._lengths(velocities) >= s.rest_speed
            velocities = xp.where(moving[..., None], velocities, 0.0)
            predicted = xp.where(free, positions + h * velocities, positions)
            predicted[:, :pinned] = root_now
            velocities[:, :pinned] = (root_now - positions[:, :pinned]) / h

            corrected = predicted
            if float(xp.max(rigidity)) > 1e-6:
                rigid = rebuild_chain(predicted, scaled_segments(predicted, self.rest_lengths, xp, False), pinned, xp)
                corrected = predicted + rigidity[:, None, None] * (rigid - predicted)
            segments = corrected[:, 1:] - corrected[:, :-1]
            clamped = scaled_segments(corrected, self.max_lengths, xp, True)
            corrected = rebuild_chain(corrected, clamped, pinned, xp)
            # velocity: each point takes only its own segment's correction (the translation inherited
            # from shortened segments nearer the root is not turned into velocity, which would whip the tip)
            local = xp.concatenate([xp.zeros_like(segments[:, :1]), clamped - segments], axis=1)
            velocities = velocities + xp.where(free, local / h, 0.0)
            collided, collided_velocities, count = colliders.resolve(corrected, velocities, s.radius, xp,
                                                                     start=positions)
            contact_count += count
            positions = xp.where(free, collided, corrected)
            velocities = xp.where(free, collided_velocities, velocities)
            rigidity = rigidity * math.exp(-h / s.teleport_recovery)
            time += h

        tips = positions[xp.arange(positions.shape[0]), self.tip_index]
        positions = xp.where(self.valid[..., None], positions, tips[:, None, :])
        velocities = xp.where(self.valid[..., None], velocities, 0.0)
        if not bool(xp.all(xp.isfinite(positions))):
            raise FloatingPointError("particle hair produced NaN/Inf positions")
        state_out.positions, state_out.velocities, state_out.rigidity, state_out.time = (
            positions, velocities, rigidity, time)
        segment = self._lengths(positions[:, 1:] - positions[:, :-1])
        stretch = segment / xp.maximum(self.rest_lengths, 1e-15)
        valid_segments = self.rest_lengths > 0.0
        return {
            "substeps": substeps,
            "contacts": contact_count,
            "teleported_strands": int(xp.count_nonzero(teleport)),
            "max_stretch": float(xp.max(xp.where(valid_segments, stretch, 0.0))),
            "ignored_colliders": list(colliders.ignored),
        }

"""The particle hair step written as whole-array numpy, operation by operation from the formulas in
``solver_server/solvers/particles/solver.py``: the reference the one-sweep Warp kernel is compared with.
(It was the solver's implementation before the kernel; test-only now.)"""

from __future__ import annotations

import math

import numpy as np

from tests.physics.air_reference import drag_rates


def _particle_tangents(positions):
    """(S, P, 3): each particle's segment to the next one, the last particle's the last segment, normalized
    (zero for a zero-length segment), as the substep kernel takes them for the air drag."""
    segments = positions[:, 1:] - positions[:, :-1]
    segments = np.concatenate([segments, segments[:, -1:]], axis=1)
    return segments / np.maximum(_lengths(segments), 1e-15)[..., None]


def _lengths(vectors):
    return np.sqrt(np.sum(vectors * vectors, axis=-1))


def _rebuild_chain(positions, segments, first_free: int):
    anchor = positions[:, first_free - 1:first_free]
    rebuilt = anchor + np.cumsum(segments[:, first_free - 1:], axis=1)
    return np.concatenate([positions[:, :first_free], rebuilt], axis=1)


def _scaled_segments(positions, target_lengths, only_longer: bool, shortest=None):
    """Segments rescaled to ``target_lengths``; with ``only_longer`` only those longer, and with ``shortest`` also
    those shorter than it, to it."""
    segments = positions[:, 1:] - positions[:, :-1]
    length = _lengths(segments)
    ratio = target_lengths / np.maximum(length, 1e-15)
    if only_longer:
        ratio = np.minimum(ratio, 1.0)
    if shortest is not None:
        ratio = np.where(length < shortest, shortest / np.maximum(length, 1e-15), ratio)
    ratio = np.where(length > 1e-15, ratio, 1.0)
    return segments * ratio[..., None]


def _clamped(corrected, solver, pinned):
    """(chain rebuilt from the root with every segment within [1/max_stretch, max_stretch] × rest, per-particle
    own segment corrections (S, P, 3))."""
    s = solver.settings
    segments = corrected[:, 1:] - corrected[:, :-1]
    clamped = _scaled_segments(corrected, solver.rest_lengths * s.max_stretch, True,
                               solver.rest_lengths / s.max_stretch)
    local = np.concatenate([np.zeros_like(segments[:, :1]), clamped - segments], axis=1)
    return _rebuild_chain(corrected, clamped, pinned), local


def _clamped_on_planes(positions, solver, pinned, normals):
    """``_clamped`` with the particles that ``normals`` (S, P, 3) marks (non-zero) kept to the plane through their
    position with that normal: each segment, clamped, turns its length kept towards the plane where it would end
    below it (the kernel's ``kept_above_plane``), point by point from the root (vectorized over the strands)."""
    s = solver.settings
    placed = positions.copy()
    local = np.zeros_like(positions)
    for k in range(pinned, positions.shape[1]):
        segment = positions[:, k] - positions[:, k - 1]
        clamped = _scaled_segments(positions[:, k - 1:k + 1], solver.rest_lengths[:, k - 1:k] * s.max_stretch, True,
                                   solver.rest_lengths[:, k - 1:k] / s.max_stretch)[:, 0]
        start, normal, plane = placed[:, k - 1], normals[:, k], positions[:, k]
        below = (np.sum(normal * normal, axis=-1) > 0) & (np.sum((start + clamped - plane) * normal, axis=-1) < 0)
        length = _lengths(clamped)
        tangential = clamped - np.sum(clamped * normal, axis=-1)[:, None] * normal
        span = _lengths(tangential)
        rise = np.clip(np.sum((plane - start) * normal, axis=-1) / np.maximum(length, 1e-300), -1.0, 1.0)
        turned = length[:, None] * (rise[:, None] * normal + np.sqrt(1.0 - rise * rise)[:, None]
                                    * tangential / np.maximum(span, 1e-300)[:, None])
        clamped = np.where((below & (length > 1e-15) & (span > 1e-12 * length))[:, None], turned, clamped)
        placed[:, k] = start + clamped
        local[:, k] = clamped - segment
    return placed, local


def spring_accelerations(solver, positions):
    s = solver.settings
    acceleration = np.zeros_like(positions)
    for gap, rest, k in ((1, solver.rest_lengths, solver.spring_stiffness[1]),
                         (2, solver.rest_lengths2, solver.spring_stiffness[2])):
        if positions.shape[1] <= gap:
            continue
        vector = positions[:, gap:] - positions[:, :-gap]
        length = _lengths(vector)
        extension = length - rest
        magnitude = np.where(extension <= 0.0, k * extension,
                             k * extension * extension / np.maximum(s.stretch_scale * rest, 1e-15))
        magnitude = np.where(rest > 0.0, magnitude, 0.0)
        force = vector * (magnitude / np.maximum(length, 1e-15))[..., None]
        acceleration[:, :-gap] += force
        acceleration[:, gap:] -= force
    return acceleration


def angle_accelerations(solver, positions):
    acceleration = np.zeros_like(positions)
    first = positions[:, 1:-1] - positions[:, :-2]
    second = positions[:, 2:] - positions[:, 1:-1]
    first_length = np.maximum(_lengths(first), 1e-15)
    second_length = np.maximum(_lengths(second), 1e-15)
    t1 = first / first_length[..., None]
    t2 = second / second_length[..., None]
    cosine = np.clip(np.sum(t1 * t2, axis=-1), -1.0, 1.0)
    sine = _lengths(np.cross(t1, t2))
    bent = sine > 1e-12
    scale = np.where(bent, solver.angle_coefficient * (np.arctan2(sine, cosine) - solver.rest_angles)
                     / np.where(bent, sine, 1.0), 0.0)
    on_previous = -scale[..., None] * (t2 - cosine[..., None] * t1) / first_length[..., None]
    on_next = scale[..., None] * (t1 - cosine[..., None] * t2) / second_length[..., None]
    acceleration[:, :-2] += on_previous
    acceleration[:, 2:] += on_next
    acceleration[:, 1:-1] -= on_previous + on_next
    return acceleration


def reference_step(solver, positions, velocities, rigidity, time, root_targets, colliders, dt):
    """(positions, velocities, rigidity, time) after one step of dt [s]; colliders: particles.ColliderSet."""
    s = solver.settings
    pinned = s.pinned_points
    valid = solver.layout.valid
    free = solver.free[..., None]
    positions, velocities, rigidity = positions.copy(), velocities.copy(), rigidity.copy()
    displacement = root_targets[:, 0] - positions[:, 0]
    teleport = _lengths(displacement) / dt > s.teleport_speed
    positions = positions + np.where(teleport[:, None, None], displacement[:, None, :], 0.0)
    root_start = positions[:, :pinned]
    rigidity = np.where(teleport, 1.0, rigidity)
    substeps = max(1, math.ceil(dt / solver.max_substep - 1e-9))
    h = dt / substeps
    for sub in range(substeps):
        root_now = root_start + (sub + 1) / substeps * (root_targets - root_start)
        acceleration = spring_accelerations(solver, positions) + angle_accelerations(solver, positions) \
            + solver.gravity_host + s.wind.acceleration(time)
        drag = drag_rates(velocities, _particle_tangents(positions), s.radius, s.density * math.pi * s.radius ** 2,
                          s.air_drag)
        velocities = (velocities + h * acceleration) * max(0.0, 1.0 - s.damping * h) / (1.0 + h * drag[..., None])
        velocities = np.where((_lengths(velocities) >= s.rest_speed)[..., None], velocities, 0.0)
        predicted = np.where(free, positions + h * velocities, positions)
        predicted[:, :pinned] = root_now
        velocities[:, :pinned] = (root_now - positions[:, :pinned]) / h
        rigid = _rebuild_chain(predicted, _scaled_segments(predicted, solver.rest_lengths, False), pinned)
        corrected = np.where((rigidity > 1e-6)[:, None, None], predicted + rigidity[:, None, None] * (rigid - predicted),
                             predicted)      # a strand recovering from a teleport blends towards its rigid chain
        corrected, local = _clamped(corrected, solver, pinned)
        velocities = velocities + np.where(free, local / h, 0.0)
        collided, collided_velocities, count, normals = colliders.resolve(corrected, velocities, s.radius, np)
        positions = np.where(free, collided, corrected)
        velocities = np.where(free, collided_velocities, velocities)
        if colliders.count:   # the clamp again (pushed particles keep to their contact planes), the colliders again
            normals = np.where(free, normals, 0.0)
            placed, local = _clamped_on_planes(positions, solver, pinned, normals)
            squared = _lengths(positions[:, 1:] - positions[:, :-1]) ** 2     # beyond the clamp by more than rounding
            rest = solver.rest_lengths
            beyond = valid[:, 1:] & ((squared > (rest * s.max_stretch) ** 2 * (1.0 + 1e-12))
                                     | (squared < (rest / s.max_stretch) ** 2 * (1.0 - 1e-12)))
            redone = (np.sum(normals * normals, axis=-1) > 0).any(axis=1) | beyond[:, pinned - 1:].any(axis=1)
            positions = np.where(redone[:, None, None], placed, positions)   # other strands are left exactly
            velocities = velocities + np.where(free & redone[:, None, None], local / h, 0.0)
            collided, collided_velocities, _, _ = colliders.resolve(positions, velocities, s.radius, np)
            positions = np.where(free, collided, positions)
            velocities = np.where(free, collided_velocities, velocities)
        rigidity = rigidity * math.exp(-h / s.teleport_recovery)
        time += h
    tips = positions[np.arange(positions.shape[0]), valid.sum(axis=1) - 1]
    positions = np.where(valid[..., None], positions, tips[:, None, :])
    velocities = np.where(valid[..., None], velocities, 0.0)
    return positions, velocities, rigidity, time

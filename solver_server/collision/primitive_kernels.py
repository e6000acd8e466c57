"""Warp kernel of ResolveCollision against a run of analytic colliders (seed Algorithm 2 lines 2 and 12).

``project_on_primitives`` does for every point what ``ColliderSet.project`` did with one chain of numpy
operations per collider: for each collider of the run in scene order, the signed distance and outward
normal of the primitive (``primitives.py``: plane, sphere, box, torus), the push out to the point's reach
(its thickness plus the collider's), the contact's depth, normal, friction and the motion of the touched
surface material over the substep. One launch per run instead of ~25 array passes per collider (the
141 × 141 cloth benchmark projected 20 000 points 20 times per substep).

Each collider is one row of ``PARAMETER_COLUMNS`` float64 values (:func:`packed_parameters`), built on the
host once per pose and uploaded with it.
"""

from __future__ import annotations

import numpy as np
import warp as wp

# columns of a collider's parameter row (constants, so the kernels read the same layout the host writes)
KIND, CENTER, ROTATION, SIZES = wp.constant(0), wp.constant(1), wp.constant(4), wp.constant(13)
THICKNESS, FRICTION, MOVING, BACK, BACK_SHIFT = wp.constant(16), wp.constant(17), wp.constant(18), wp.constant(19), \
    wp.constant(28)
PARAMETER_COLUMNS = 32
# [m] a point this close outside its reach still touches (with zero push): a point pushed out to its reach lies
# there within rounding, so without the skin whether it touches at the next query (friction, the no-kick rule, a
# strand's contact force) would be decided by the last bit of its position, differently on every device
CONTACT_SKIN = 1e-9
_SKIN = wp.constant(wp.float64(CONTACT_SKIN))
KINDS = {"Plane": 0, "Sphere": 1, "Box": 2, "Torus": 3}


def packed_parameters(collider) -> np.ndarray:
    """The (PARAMETER_COLUMNS,) float64 row of a primitive ``collider`` (collision.colliders.Collider) at
    its current pose: kind; centre (a plane: its point); rotation (row-major); sizes (box half extents,
    sphere radius, torus major and minor radii, plane normal); thickness [m]; friction; whether it moved
    over the substep; the map back to its previous pose, linear part (row-major) and shift."""
    geometry = collider.geometry
    kind = type(geometry).__name__
    row = np.zeros(PARAMETER_COLUMNS)
    row[KIND] = KINDS[kind]
    row[ROTATION:ROTATION + 9] = np.eye(3).ravel()
    if kind == "Plane":
        row[CENTER:CENTER + 3] = geometry.point
        row[SIZES:SIZES + 3] = geometry.normal
    else:
        row[CENTER:CENTER + 3] = geometry.center
    if kind in ("Box", "Torus"):
        row[ROTATION:ROTATION + 9] = np.asarray(geometry.rotation).ravel()
    if kind == "Sphere":
        row[SIZES] = geometry.radius
    elif kind == "Box":
        row[SIZES:SIZES + 3] = geometry.half
    elif kind == "Torus":
        row[SIZES], row[SIZES + 1] = geometry.major, geometry.minor
    row[THICKNESS], row[FRICTION] = collider.thickness, collider.friction
    if not (collider.matrix is collider.matrix_previous or np.array_equal(collider.matrix, collider.matrix_previous)):
        back = collider.matrix_previous @ np.linalg.inv(collider.matrix)
        row[MOVING] = 1.0
        row[BACK:BACK + 9] = back[:3, :3].ravel()
        row[BACK_SHIFT:BACK_SHIFT + 3] = back[:3, 3]
    return row


@wp.func
def _column3(params: wp.array2d(dtype=wp.float64), row: int, start: int):
    return wp.vec3d(params[row, start], params[row, start + 1], params[row, start + 2])


@wp.func
def _matrix3(params: wp.array2d(dtype=wp.float64), row: int, start: int):
    return wp.mat33d(params[row, start], params[row, start + 1], params[row, start + 2],
                     params[row, start + 3], params[row, start + 4], params[row, start + 5],
                     params[row, start + 6], params[row, start + 7], params[row, start + 8])


@wp.func
def _unit_or_axis(vector: wp.vec3d, axis: int):
    """(unit vector, length) of ``vector``, or (the unit ``axis``, 0) where it is shorter than 1e-12."""
    length = wp.length(vector)
    if length < wp.float64(1e-12):
        fallback = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
        fallback[axis] = wp.float64(1.0)
        return fallback, wp.float64(0.0)
    return vector / length, length


@wp.func
def _box_distance(local: wp.vec3d, half: wp.vec3d):
    """(distance, outward normal) of a box's local point: outside the Euclidean distance to the box, inside
    minus the distance to the nearest face (its normal)."""
    excess = wp.vec3d(wp.abs(local[0]) - half[0], wp.abs(local[1]) - half[1], wp.abs(local[2]) - half[2])
    outside = wp.vec3d(wp.max(excess[0], wp.float64(0.0)) * wp.sign(local[0]),
                       wp.max(excess[1], wp.float64(0.0)) * wp.sign(local[1]),
                       wp.max(excess[2], wp.float64(0.0)) * wp.sign(local[2]))
    outside_length = wp.length(outside)
    if outside_length > wp.float64(0.0):
        return outside_length, outside / outside_length
    axis = int(0)
    for k in range(1, 3):
        if excess[k] > excess[axis]:
            axis = k
    normal = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
    side = wp.sign(local[axis])
    if side == wp.float64(0.0):
        side = wp.float64(1.0)
    normal[axis] = side
    return excess[axis], normal


@wp.func
def primitive_distance(params: wp.array2d(dtype=wp.float64), row: int, point: wp.vec3d):
    """(signed distance [m], positive outside; outward unit normal) of ``point`` to collider ``row``."""
    kind = int(params[row, KIND])
    center = _column3(params, row, CENTER)
    sizes = _column3(params, row, SIZES)
    if kind == 0:
        return wp.dot(point - center, sizes), sizes
    if kind == 1:
        normal, length = _unit_or_axis(point - center, 2)
        return length - sizes[0], normal
    rotation = _matrix3(params, row, ROTATION)
    local = wp.transpose(rotation) * (point - center)
    if kind == 2:
        distance, normal_local = _box_distance(local, sizes)
        return distance, rotation * normal_local
    radial_direction, _ = _unit_or_axis(wp.vec3d(local[0], local[1], wp.float64(0.0)), 0)
    tube_normal, tube_length = _unit_or_axis(local - sizes[0] * radial_direction, 2)
    return tube_length - sizes[1], rotation * tube_normal


@wp.func
def push_out(params: wp.array2d(dtype=wp.float64), point: wp.vec3d, thickness: wp.float64,
             friction: wp.float64):
    """``point`` pushed out of every collider row in order, closer than its reach (``thickness`` + the
    collider's). Returns (point, summed push depth [m], normal, motion (the touched surface material's
    displacement over the substep, 0 for a still collider), μ (mean of ``friction`` and the collider's), 1 if a
    collider touched it (within its reach plus CONTACT_SKIN) else 0); normal, motion and μ are the last touching
    collider's."""
    zero = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
    depth = wp.float64(0.0)
    normal = zero
    motion = zero
    mu = wp.float64(0.0)
    touched = int(0)
    for row in range(params.shape[0]):
        distance, surface_normal = primitive_distance(params, row, point)
        push = thickness + params[row, THICKNESS] - distance
        if push > -_SKIN:
            push = wp.max(push, wp.float64(0.0))
            point = point + push * surface_normal
            depth = depth + push
            normal = surface_normal
            motion = zero
            if params[row, MOVING] != wp.float64(0.0):
                motion = point - (_matrix3(params, row, BACK) * point + _column3(params, row, BACK_SHIFT))
            mu = wp.float64(0.5) * (friction + params[row, FRICTION])
            touched = 1
    return point, depth, normal, motion, mu, touched


@wp.kernel
def project_on_primitives(params: wp.array2d(dtype=wp.float64), thickness: wp.array(dtype=wp.float64),
                          friction: wp.array(dtype=wp.float64), first: int, chunk: int,
                          points: wp.array(dtype=wp.vec3d),
                          depth: wp.array(dtype=wp.float64), normal: wp.array(dtype=wp.vec3d),
                          motion: wp.array(dtype=wp.vec3d), mu: wp.array(dtype=wp.float64),
                          touched: wp.array(dtype=wp.int32)):
    """Points [first + t·chunk, first + (t + 1)·chunk) through ``push_out``: ``points`` moved in place;
    ``depth`` adds the push; ``normal``, ``motion``, ``mu`` and ``touched`` (1) are set where a collider
    pushed."""
    start = first + wp.tid() * chunk
    for index in range(start, wp.min(start + chunk, points.shape[0])):
        point, push, surface_normal, surface_motion, point_mu, pushed = push_out(params, points[index],
                                                                                 thickness[index], friction[index])
        points[index] = point
        if pushed == 1:
            depth[index] = depth[index] + push
            normal[index] = surface_normal
            motion[index] = surface_motion
            mu[index] = point_mu
            touched[index] = 1


@wp.func
def coulomb_contact_force(stiffness: wp.float64, free: wp.vec3d, projected: wp.vec3d, start: wp.vec3d,
                          motion: wp.vec3d, normal: wp.vec3d, mu: wp.float64) -> wp.vec3d:
    """The PD contact local step's force [N] on a point of gain ``stiffness`` [kg/s²] freed of its last force at
    ``free`` [m] and pushed to ``projected`` [m] along the unit ``normal``: the normal force k (projected − free)
    and the Coulomb friction force against the slip since the substep start ``start`` [m], relative to the surface
    that moved ``motion`` [m]: all of it (sticking) while k |slip| ≤ μ |normal force|, else that limit (sliding)."""
    normal_force = stiffness * (projected - free)
    slip = projected - start - motion
    slip = slip - wp.dot(slip, normal) * normal
    wanted = stiffness * wp.length(slip)
    limit = mu * wp.length(normal_force)
    scale = wp.float64(1.0)
    if wanted > limit:
        scale = limit / wp.max(wanted, wp.float64(1e-300))
    return normal_force - (scale * stiffness) * slip


@wp.kernel
def contact_forces(params: wp.array2d(dtype=wp.float64), candidates: wp.array(dtype=wp.int32),
                   q: wp.array(dtype=wp.vec3d), q_start: wp.array(dtype=wp.vec3d),
                   previous: wp.array(dtype=wp.vec3d), gain: wp.array(dtype=wp.float64),
                   thickness: wp.array(dtype=wp.float64), friction: wp.array(dtype=wp.float64),
                   movable: wp.array(dtype=wp.float64), first: int, chunk: int, force: wp.array(dtype=wp.vec3d),
                   particle_force: wp.array(dtype=wp.vec3d)):
    """One PD contact local step (``solvers.pd.contact.ContactPoints.forces``) for the candidate points
    [first + t·chunk, first + (t + 1)·chunk), each its own particle: the point freed of its previous force,
    y = q − f_prev / k, is pushed out by ``push_out``; the normal force k (y* − y) and the Coulomb friction
    force against the slip since the substep start (relative to the touched surface), at most μ times the
    normal force, give force[k]; particle_force[c] = force[k] × movable[c] (unset for other particles)."""
    start = first + wp.tid() * chunk
    for k in range(start, wp.min(start + chunk, candidates.shape[0])):
        c = candidates[k]
        stiffness = gain[c]
        free = q[c] - previous[k] / stiffness
        projected, depth, normal, motion, mu, pushed = push_out(params, free, thickness[c], friction[c])
        result = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
        if pushed == 1:
            result = coulomb_contact_force(stiffness, free, projected, q_start[c], motion, normal, mu)
        force[k] = result
        particle_force[c] = result * movable[c]


@wp.kernel
def contact_planes(params: wp.array2d(dtype=wp.float64), thickness: wp.array(dtype=wp.float64), band: wp.float64,
                   movable: wp.array(dtype=wp.float64), q: wp.array(dtype=wp.vec3d), first: int, chunk: int,
                   plane_point: wp.array(dtype=wp.vec3d), plane_normal: wp.array(dtype=wp.vec3d)):
    """Contact planes of points that are their own particles (``solvers.pd.contact.ContactPoints.contact_planes``)
    for points [first + t·chunk, first + (t + 1)·chunk): a movable point within (1 + band) × its thickness of a
    collider gets the plane through its projection at the contact offset with the pushing collider's normal;
    the others a zero normal (a no-op plane)."""
    start = first + wp.tid() * chunk
    for index in range(start, wp.min(start + chunk, q.shape[0])):
        reach = thickness[index] * (wp.float64(1.0) + band) + wp.float64(1e-9)
        projected, depth, normal, motion, mu, pushed = push_out(params, q[index], reach, wp.float64(0.0))
        if pushed == 0 or movable[index] == wp.float64(0.0):
            normal = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
        plane_normal[index] = normal
        plane_point[index] = projected - (reach - thickness[index]) * normal

"""Warp kernel of the PD contact local step against contact planes (``solvers.pd.contact.ContactPoints.forces``).

Against mesh colliders a point's contact inside the iterations is its tangent plane, found once per substep by
the colliders' own query (continuous, two-sided: the plane faces the side the point started the substep on).
An iteration then costs one launch of arithmetic per candidate point instead of a tree query and a continuous
test per iteration; the exact geometry is restored after the iterations by the colliders' projection.
"""

from __future__ import annotations

import warp as wp

from ....collision.primitive_kernels import coulomb_contact_force


@wp.kernel
def plane_contact_forces(candidates: wp.array(dtype=wp.int32), points: wp.array(dtype=wp.vec3d),
                         start: wp.array(dtype=wp.vec3d), previous: wp.array(dtype=wp.vec3d),
                         gain: wp.array(dtype=wp.float64), plane_point: wp.array(dtype=wp.vec3d),
                         plane_normal: wp.array(dtype=wp.vec3d), plane_motion: wp.array(dtype=wp.vec3d),
                         friction: wp.array(dtype=wp.float64), movable: wp.array(dtype=wp.float64), first: int,
                         chunk: int, force: wp.array(dtype=wp.vec3d), point_force: wp.array(dtype=wp.vec3d)):
    """One contact local step for candidates [first + t·chunk, first + (t + 1)·chunk): candidate k is point
    c = candidates[k] at ``points[c]`` [m] (``start[c]`` at the substep start) with the force ``previous[k]`` [N]
    of the last iteration and gain k_c = ``gain[c]`` [kg/s²]. Freed of that force, y = points[c] − previous[k]/k_c
    is pushed onto its plane (through ``plane_point[k]`` with unit ``plane_normal[k]``; a zero normal: no contact)
    where it lies behind it, and force[k] is the contact force there (``coulomb_contact_force``: the normal force
    and the Coulomb friction against the slip relative to the surface, which moved ``plane_motion[k]`` [m] over the
    substep, with μ = ``friction[k]``); point_force[c] = force[k] × movable[c]."""
    begin = first + wp.tid() * chunk
    for k in range(begin, wp.min(begin + chunk, candidates.shape[0])):
        c = candidates[k]
        stiffness = gain[c]
        free = points[c] - previous[k] / stiffness
        normal = plane_normal[k]
        behind = wp.dot(free - plane_point[k], normal)
        result = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
        if behind < wp.float64(0.0):
            result = coulomb_contact_force(stiffness, free, free - behind * normal, start[c], plane_motion[k],
                                           normal, friction[k])
        force[k] = result
        point_force[c] = result * movable[c]

"""Warp kernel of the DER reference frames' time-parallel transport (state.transported_configuration), a
thread per strand (reference-frame transport).

Per edge: the new unit tangent t, the base frame's reference director carried by the minimal rotation from
the base tangent to t (frames.parallel_transport), then made exactly unit and perpendicular to t
(frames.orthonormalize). Per interior vertex: the reference twist, the signed angle from P(t⁰→t¹) u⁰ to u¹
about t¹ (frames.reference_twist_value), unwrapped to the turn nearest the base's value
(frames.shortest_turn).
"""

from __future__ import annotations

import math

import warp as wp

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken

TWO_PI = wp.constant(2.0 * math.pi)


@wp.func
def parallel_transport(a: wp.vec3d, b: wp.vec3d, x: wp.vec3d) -> wp.vec3d:
    """x rotated by the minimal rotation taking unit a to unit b."""
    axis = wp.cross(a, b)
    cos_angle = wp.dot(a, b)
    denominator = wp.max(wp.float64(1.0) + cos_angle, wp.float64(1e-12))
    return cos_angle * x + wp.cross(axis, x) + (wp.dot(axis, x) / denominator) * axis


@wp.func
def transport_strand(strand: int, strand_offsets: wp.array(dtype=wp.int32), positions: wp.array(dtype=wp.vec3d),
                     base_tangents: wp.array(dtype=wp.vec3d), base_u: wp.array(dtype=wp.vec3d),
                     base_twist: wp.array(dtype=wp.float64), reference_u: wp.array(dtype=wp.vec3d),
                     reference_twist: wp.array(dtype=wp.float64)):
    """reference_u (E, 3) and reference_twist (B,) of one strand (its entries only)."""
    begin = strand_offsets[strand]
    end = strand_offsets[strand + 1]
    previous_tangent = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
    previous_u = previous_tangent
    for vertex in range(begin, end - 1):
        edge = vertex - strand                           # edges of a strand: one fewer than its vertices
        vector = positions[vertex + 1] - positions[vertex]
        tangent = vector / wp.length(vector)
        moved = parallel_transport(base_tangents[edge], tangent, base_u[edge])
        moved = moved - wp.dot(moved, tangent) * tangent
        u = moved / wp.length(moved)
        reference_u[edge] = u
        if vertex > begin:
            element = vertex - 1 - 2 * strand            # the interior vertex `vertex` (elements: n − 2 per strand)
            transported = parallel_transport(previous_tangent, tangent, previous_u)
            raw = wp.atan2(wp.dot(wp.cross(transported, u), tangent), wp.dot(transported, u))
            base = base_twist[element]
            turn = raw - base
            reference_twist[element] = base + (turn - wp.float64(TWO_PI) * wp.round(turn / wp.float64(TWO_PI)))
        previous_tangent = tangent
        previous_u = u


@wp.kernel
def transport_frames(first: int, strands: wp.array(dtype=wp.int32), strand_offsets: wp.array(dtype=wp.int32),
                     positions: wp.array(dtype=wp.vec3d), base_tangents: wp.array(dtype=wp.vec3d),
                     base_u: wp.array(dtype=wp.vec3d), base_twist: wp.array(dtype=wp.float64),
                     reference_u: wp.array(dtype=wp.vec3d), reference_twist: wp.array(dtype=wp.float64)):
    """reference_u (E, 3) and reference_twist (B,) of strand strands[first + tid] (other strands untouched)."""
    transport_strand(strands[wp.tid() + first], strand_offsets, positions, base_tangents, base_u, base_twist,
                     reference_u, reference_twist)

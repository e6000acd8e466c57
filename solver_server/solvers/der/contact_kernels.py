"""Warp kernel of the DER contact problem's projected Gauss–Seidel sweeps (contact_space.py) on the CPU.

``colour_sweeps`` runs every sweep of DelassusOperator.gauss_seidel in one launch of one thread: per sweep,
colour by colour, the members' local steps (contact frames: normal impulse to the target velocity, friction
to cancel the sliding, projection onto the Coulomb disc), then the colour's effect W Δλ on the relative
velocities of the contacts it touches, and the stopping test on the largest single colour step's change.
The arithmetic is the xp loop's; only the order of the sums in a colour's product differs (per block
instead of per CSR row). The xp loop issued ~10 small array operations per colour step (a dense DER substep
runs ~14 000 colour steps); here a colour step costs its arithmetic.

Arrays in colour order (contact k of the order at index k): members of colour c are [member_start[c],
member_start[c + 1]); the rows a colour's blocks touch are rows[row_start[c]:row_start[c + 1]] and the
colour's blocks pairs [pair_start[c], pair_start[c + 1]) with their row's slot in that list (global index)
and their column contact.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken


@wp.func
def clamp_to_disc(impulse: wp.vec3d, mu: wp.float64) -> wp.vec3d:
    """λ_N ≥ 0 (else 0), ‖λ_T‖ ≤ μ λ_N by scaling λ_T (contact_space._clamp_to_disc)."""
    normal = wp.max(impulse[0], wp.float64(0.0))
    length = wp.sqrt(impulse[1] * impulse[1] + impulse[2] * impulse[2])
    scale = wp.min(mu * normal / wp.max(length, wp.float64(1e-300)), wp.float64(1.0))
    return wp.vec3d(normal, impulse[1] * scale, impulse[2] * scale)


@wp.kernel
def colour_sweeps(sweeps: int, colours: int, member_start: wp.array(dtype=wp.int32),
                  row_start: wp.array(dtype=wp.int32), pair_start: wp.array(dtype=wp.int32),
                  rows: wp.array(dtype=wp.int32), pair_row: wp.array(dtype=wp.int32),
                  pair_column: wp.array(dtype=wp.int32), blocks: wp.array(dtype=wp.mat33d),
                  step_maps: wp.array(dtype=wp.mat33d), target: wp.array(dtype=wp.vec3d),
                  mu: wp.array(dtype=wp.float64), inverse_tolerance: wp.array(dtype=wp.float64),
                  lam: wp.array(dtype=wp.vec3d), u: wp.array(dtype=wp.vec3d), delta: wp.array(dtype=wp.vec3d),
                  row_change: wp.array(dtype=wp.vec3d), outcome: wp.array(dtype=wp.float64)):
    """Sweeps until the largest change of a colour step, relative to its row's tolerance, is ≤ 1, at most
    ``sweeps``; lam and u (colour order, contact frames) updated in place; outcome = (sweeps done, largest)."""
    zero = wp.float64(0.0)
    done = int(0)
    largest = zero
    for sweep in range(sweeps):
        done = sweep + 1
        largest = zero
        for colour in range(colours):
            for member in range(member_start[colour], member_start[colour + 1]):
                old = lam[member]
                new = clamp_to_disc(old + step_maps[member] * (target[member] - u[member]), mu[member])
                delta[member] = new - old
                lam[member] = new
            for slot in range(row_start[colour], row_start[colour + 1]):
                row_change[slot] = wp.vec3d(zero, zero, zero)
            for pair in range(pair_start[colour], pair_start[colour + 1]):
                slot = pair_row[pair]
                row_change[slot] = row_change[slot] + blocks[pair] * delta[pair_column[pair]]
            for slot in range(row_start[colour], row_start[colour + 1]):
                row = rows[slot]
                change = row_change[slot]
                u[row] = u[row] + change
                scale = inverse_tolerance[row]
                largest = wp.max(largest, wp.max(wp.abs(change[0]) * scale,
                                                 wp.max(wp.abs(change[1]) * scale, wp.abs(change[2]) * scale)))
        if largest <= wp.float64(1.0):
            break
    outcome[0] = wp.float64(done)
    outcome[1] = largest

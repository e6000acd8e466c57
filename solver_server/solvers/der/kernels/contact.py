"""Warp kernels of the DER contact problem's projected Gauss–Seidel sweeps (contact_space.py).

On the CPU ``sequential_sweeps`` runs every sweep of DelassusOperator.gauss_seidel in one launch of one thread, contact
after contact (true Gauss–Seidel, no colouring): the contact's local step in its frame (normal impulse to
the target velocity, friction to cancel the sliding, projection onto the Coulomb disc) from the relative
velocity that every earlier step of the sweep has already updated, then its effect W_rc Δλ_c on the
relative velocities of the contacts r it is coupled to (the blocks of its column), and the stopping test on
the largest single step's change.  A contact whose impulse does not change (a slack contact staying at zero)
skips its column.

On CUDA (and on the CPU where asked) the sweeps go colour after colour: contacts of one colour share no strand,
so ``colour_steps`` takes all their local steps at once from the same relative velocities (a thread per
contact), then ``colour_effects`` adds their effect to the relative velocities of every contact their blocks
reach (a thread per reached contact summing its row of the colour's blocks: no atomics, so every device sums in
the same order). ``sweep_start`` and ``sweep_end`` keep the sweep count and the stopping test on the device, so
a solve's sweeps can be one CUDA graph with a while-node (contact_space._ColourSweeps).  ``colour_round`` is a
round of the colouring (contact_space._greedy_colouring).

``strand_inverse_blocks`` gives the Delassus operator the entries of A⁻¹ it needs on the CPU's LAPACK path: a thread
per touched strand solves L y = e_k forward from row k for each of the strand's touched DOFs (the columns of L⁻¹)
and takes their inner products, A⁻¹[k, l] = (L⁻¹ e_k)·(L⁻¹ e_l), since A⁻¹ = L⁻ᵀ L⁻¹ (no back substitution).
``pair_blocks`` then sums, for every pair of contacts that share a strand, the weighted 3 × 3 blocks of A⁻¹ between
their vertex slots on a common strand into W_cc' (a thread per pair, no atomics).
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


@wp.func
def local_step(old: wp.vec3d, step_map: wp.mat33d, target: wp.vec3d, u: wp.vec3d, mu: wp.float64) -> wp.vec3d:
    """A contact's new impulse (its frame): the step map applied to its velocity shortfall target − u, projected
    onto the Coulomb disc (contact_space._local_step_maps)."""
    return clamp_to_disc(old + step_map * (target - u), mu)


@wp.func
def scaled_change(change: wp.vec3d, inverse_tolerance: wp.float64) -> wp.float64:
    """The largest component of a velocity change [m/s] relative to the contact's tolerance."""
    return wp.max(wp.abs(change[0]), wp.max(wp.abs(change[1]), wp.abs(change[2]))) * inverse_tolerance


@wp.kernel
def sequential_sweeps(sweeps: int, contacts: int, column_start: wp.array(dtype=wp.int32),
                      pair_row: wp.array(dtype=wp.int32), blocks: wp.array(dtype=wp.mat33d),
                      step_maps: wp.array(dtype=wp.mat33d), target: wp.array(dtype=wp.vec3d),
                      mu: wp.array(dtype=wp.float64), inverse_tolerance: wp.array(dtype=wp.float64),
                      lam: wp.array(dtype=wp.vec3d), u: wp.array(dtype=wp.vec3d), outcome: wp.array(dtype=wp.float64)):
    """Sweeps until the largest velocity change of one contact step at one contact, relative to that contact's
    tolerance, is ≤ 1, at most ``sweeps``; lam and u (contact frames) updated in place; outcome = (sweeps
    done, largest).  Contact c's blocks W_rc are [column_start[c], column_start[c + 1]) with row r = pair_row."""
    zero = wp.float64(0.0)
    done = int(0)
    largest = zero
    for sweep in range(sweeps):
        done = sweep + 1
        largest = zero
        for contact in range(contacts):
            old = lam[contact]
            new = local_step(old, step_maps[contact], target[contact], u[contact], mu[contact])
            delta = new - old
            if delta[0] != zero or delta[1] != zero or delta[2] != zero:
                lam[contact] = new
                for pair in range(column_start[contact], column_start[contact + 1]):
                    row = pair_row[pair]
                    change = blocks[pair] * delta
                    u[row] = u[row] + change
                    largest = wp.max(largest, scaled_change(change, inverse_tolerance[row]))
        if largest <= wp.float64(1.0):
            break
    outcome[0] = wp.float64(done)
    outcome[1] = largest


@wp.kernel
def colour_steps(first: int, step_maps: wp.array(dtype=wp.mat33d), target: wp.array(dtype=wp.vec3d),
                 mu: wp.array(dtype=wp.float64), u: wp.array(dtype=wp.vec3d), lam: wp.array(dtype=wp.vec3d),
                 delta: wp.array(dtype=wp.vec3d)):
    """The local steps of one colour's contacts (sweep order first + thread): lam updated in place, its change
    in delta."""
    contact = first + wp.tid()
    old = lam[contact]
    new = local_step(old, step_maps[contact], target[contact], u[contact], mu[contact])
    delta[contact] = new - old
    lam[contact] = new


@wp.kernel
def colour_effects(first: int, effect_row: wp.array(dtype=wp.int32), effect_start: wp.array(dtype=wp.int32),
                   effect_column: wp.array(dtype=wp.int32), effect_blocks: wp.array(dtype=wp.mat33d),
                   delta: wp.array(dtype=wp.vec3d), inverse_tolerance: wp.array(dtype=wp.float64),
                   u: wp.array(dtype=wp.vec3d), outcome: wp.array(dtype=wp.float64)):
    """Effect row k = first + thread of one colour: u[r] += Σ_p W_{r, column p} Δλ_{column p} over the row's
    blocks [effect_start[k], effect_start[k + 1]) (r = effect_row[k]); outcome[1] keeps the sweep's largest
    change relative to the tolerance of its row."""
    entry = first + wp.tid()
    change = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
    for pair in range(effect_start[entry], effect_start[entry + 1]):
        change = change + effect_blocks[pair] * delta[effect_column[pair]]
    row = effect_row[entry]
    u[row] = u[row] + change
    wp.atomic_max(outcome, 1, scaled_change(change, inverse_tolerance[row]))


@wp.kernel
def sweep_start(sweeps: int, outcome: wp.array(dtype=wp.float64), running: wp.array(dtype=wp.int32)):
    """Before a solve's first sweep: outcome = (sweeps done 0, largest change 0), a sweep to run if any is
    allowed."""
    outcome[0] = wp.float64(0.0)
    outcome[1] = wp.float64(0.0)
    running[0] = wp.where(sweeps > 0, 1, 0)


@wp.kernel
def sweep_reset(outcome: wp.array(dtype=wp.float64)):
    """Before a sweep's colours: no change seen yet."""
    outcome[1] = wp.float64(0.0)


@wp.kernel
def sweep_end(sweeps: int, outcome: wp.array(dtype=wp.float64), running: wp.array(dtype=wp.int32)):
    """After a sweep: count it, and run another while a step changed some velocity by more than its tolerance
    and fewer than ``sweeps`` were done."""
    done = outcome[0] + wp.float64(1.0)
    outcome[0] = done
    running[0] = wp.where(outcome[1] > wp.float64(1.0) and done < wp.float64(sweeps), 1, 0)


@wp.kernel
def colour_round(round_number: int, row_start: wp.array(dtype=wp.int32), neighbour: wp.array(dtype=wp.int32),
                 priority: wp.array(dtype=wp.float64), colour: wp.array(dtype=wp.int64)):
    """One round of the independent-set colouring: an uncoloured contact takes colour ``round_number`` when its
    priority beats that of every neighbour still uncoloured at the round's start (its neighbours are
    neighbour[row_start[c]:row_start[c + 1]]).  A neighbour read during the round holds −1 or this round's colour
    (set by a thread of this launch): both mean uncoloured at the start, so the result does not depend on the
    order the threads run in."""
    contact = wp.tid()
    if colour[contact] >= wp.int64(0):
        return
    mine = priority[contact]
    for slot in range(row_start[contact], row_start[contact + 1]):
        other = neighbour[slot]
        state = colour[other]
        if (state < wp.int64(0) or state == wp.int64(round_number)) and priority[other] > mine:
            return
    colour[contact] = wp.int64(round_number)


@wp.kernel
def strand_inverse_blocks(first: int, lower: wp.array2d(dtype=wp.float64), dof_start: wp.array(dtype=wp.int32),
                          dof_end: wp.array(dtype=wp.int32), column_start: wp.array(dtype=wp.int32),
                          column_dof: wp.array(dtype=wp.int32), scratch_start: wp.array(dtype=wp.int32),
                          width: int, scratch: wp.array(dtype=wp.float64), block_rows: wp.array(dtype=wp.float64)):
    """Touched strand s = first + thread: its DOFs [dof_start[s], dof_end[s]) (an independent block of A = L Lᵀ,
    lower band storage lower[d, j] = L[j + d, j]); its touched DOF columns column_dof[column_start[s] ..
    column_start[s + 1]) (3 per touched vertex, by rank).  Writes A⁻¹[column k, column l] to
    block_rows[k · width + (l − column_start[s])] for every pair k, l of the strand's columns; scratch holds the
    strand's columns of L⁻¹ from scratch_start[s] (m rows each, rows above a column's own DOF never read)."""
    strand = first + wp.tid()
    start = dof_start[strand]
    rows = dof_end[strand] - start
    first_column = column_start[strand]
    columns = column_start[strand + 1] - first_column
    base = scratch_start[strand]
    bandwidth = lower.shape[0] - 1
    zero = wp.float64(0.0)
    for k in range(columns):
        top = column_dof[first_column + k] - start
        column = base + k * rows
        scratch[column + top] = wp.float64(1.0) / lower[0, start + top]
        for i in range(top + 1, rows):
            row = start + i
            total = zero
            for d in range(1, wp.min(bandwidth, i - top) + 1):
                total = total + lower[d, row - d] * scratch[column + i - d]
            scratch[column + i] = -total / lower[0, row]
    for k in range(columns):
        top_k = column_dof[first_column + k] - start
        for l in range(k, columns):
            top = wp.max(top_k, column_dof[first_column + l] - start)
            total = zero
            for i in range(top, rows):
                total = total + scratch[base + k * rows + i] * scratch[base + l * rows + i]
            block_rows[(first_column + k) * width + l] = total
            block_rows[(first_column + l) * width + k] = total


@wp.kernel
def pair_blocks(first: int, pair_first: wp.array(dtype=wp.int32), pair_second: wp.array(dtype=wp.int32),
                slot_entry: wp.array2d(dtype=wp.int32), slot_weight: wp.array2d(dtype=wp.float64),
                slot_strand: wp.array2d(dtype=wp.int32), entry_rank: wp.array(dtype=wp.int32),
                block_rows: wp.array(dtype=wp.float64), width: int, frames: wp.array(dtype=wp.mat33d),
                blocks: wp.array(dtype=wp.mat33d), local_blocks: wp.array(dtype=wp.mat33d)):
    """W_cc' = Σ w_a w_b A⁻¹[vertex a of c, vertex b of c'] over the slot pairs (a, b) on one strand, for the pair
    p = first + thread (c = pair_first[p], c' = pair_second[p]), and the same block in the two contacts' frames,
    F_cᵀ W_cc' F_c'.  slot_entry (n, 4): each slot's touched-vertex index (−1: unused slot), with slot_weight and
    slot_strand; block_rows: the touched vertices' rows of A⁻¹ (t, 3, width) flat, column 3 · entry_rank[e] + j the
    coordinate j of touched vertex e; frames (n, 3, 3): columns normal, two tangents."""
    pair = first + wp.tid()
    row_contact = pair_first[pair]
    column_contact = pair_second[pair]
    total = wp.mat33d()
    for a in range(4):
        entry = slot_entry[row_contact, a]
        if entry >= 0:
            for b in range(4):
                other = slot_entry[column_contact, b]
                if other >= 0 and slot_strand[column_contact, b] == slot_strand[row_contact, a]:
                    weight = slot_weight[row_contact, a] * slot_weight[column_contact, b]
                    column = 3 * entry_rank[other]
                    for i in range(3):
                        row = (3 * entry + i) * width + column
                        for j in range(3):
                            total[i, j] = total[i, j] + weight * block_rows[row + j]
    blocks[pair] = total
    local_blocks[pair] = wp.transpose(frames[row_contact]) * total * frames[column_contact]


@wp.kernel
def column_products(first: int, column_start: wp.array(dtype=wp.int32), pair_first: wp.array(dtype=wp.int32),
                    blocks: wp.array(dtype=wp.mat33d), position: wp.array(dtype=wp.int32),
                    values: wp.array(dtype=wp.vec3d), result: wp.array(dtype=wp.vec3d)):
    """(W v) of contact r = first + thread, from the blocks of its column (pairs [column_start[r], column_start[r + 1])
    with row contacts pair_first): W symmetric, so row r is Σ_p W_{pair_first[p], r}ᵀ v[pair_first[p]].  values and
    result are in the order `position` (n,) gives every contact (its sweep order)."""
    contact = first + wp.tid()
    total = wp.vec3d(wp.float64(0.0), wp.float64(0.0), wp.float64(0.0))
    for pair in range(column_start[contact], column_start[contact + 1]):
        total = total + wp.transpose(blocks[pair]) * values[position[pair_first[pair]]]
    result[position[contact]] = total


@wp.kernel
def slot_impulses_to_vertices(vertices: wp.array(dtype=wp.int32, ndim=2), weights: wp.array(dtype=wp.float64, ndim=2),
                              impulse: wp.array(dtype=wp.vec3d), vertex_impulse: wp.array(dtype=wp.vec3d)):
    """Contact c's impulse [N·s] shared out over its four vertex slots: vertex_impulse[vertices[c, k]] += weights[c, k]
    × impulse[c] (atomics: on the CPU contact after contact and slot after slot, the order of numpy's bincount over
    the slots, so the same sums)."""
    c = wp.tid()
    for slot in range(4):
        wp.atomic_add(vertex_impulse, vertices[c, slot], weights[c, slot] * impulse[c])

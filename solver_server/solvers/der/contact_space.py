"""The contact problem of one global step in contact space: exact Delassus operator and projected
Gauss–Seidel over a colouring of the contacts.

With the factorized global matrix A (the matrix the next (quasi-)Newton step solves with) a change Δλ of
the contact impulses changes the velocities by A⁻¹ Jᵀ Δλ, so the relative velocities at the contacts by

    Δu = W Δλ,     W = J A⁻¹ Jᵀ      (contacts × contacts blocks of 3 × 3, [m/s per N·s])

J maps generalized velocities to the relative velocity of each contact (weights of its ≤ 4 vertex slots).
A is block diagonal over strands, so W_{cc'} is non-zero only when contacts c and c' touch a common strand,
and then it is exact, not banded: the entries of A_s⁻¹ between the vertices touched by contacts come from
one multi-right-hand-side solve with the factor (one column per touched vertex coordinate, all strands side
by side).

Seed Algorithm 3 runs ONE local (Jacobi) step per global step; at frame-rate steps in dense hair it then
needs tens of global steps to close the last radii of predicted penetration.  Here the local problem of
every global step is solved to convergence on the linear model u(λ) = u_now + W (λ − λ_applied) by projected
Gauss–Seidel: each contact steps with its exact 3 × 3 block W_cc and the seed's local update (normal impulse
to the target velocity, friction to cancel the sliding, projection onto the Coulomb cone).  On the CPU a
sweep visits the contacts one after the other in one kernel (true Gauss–Seidel, no colours).  The xp loop
(CUDA) updates them colour by colour: contacts of one colour share no strand, so they are independent and
updated at once, vectorized.  The next global step applies the impulses; its velocities show what the linear
model missed (nonlinear elasticity, contacts found later) and the loop repeats.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.sparse
import warp as wp

from ...backend import repeat_each
from ...kernels import launch, warp_device_of, warp_view
from . import contact_kernels

# on the CPU (numpy and the strict backend) the sweeps run contact after contact in one Warp launch
# (contact_kernels.sequential_sweeps, no colouring); off: the xp loop over colours below (CUDA always runs it)
SWEEP_KERNEL = True
# numpy: a colour step's velocity change as one matrix product, CSR or dense (tests of the device path switch
# it off to compare the two backends' arithmetic, which then sums in the same order)
SPARSE_COLOUR_PRODUCTS = True
# a colour's product is dense when its (3r × 3k) matrix has at most 4 × its non-zeros + this many entries:
# scipy's CSR product costs ~8 µs of Python layers before its ~1 ns per non-zero, numpy's dense one ~1 µs +
# ~0.25 ns per entry (a bundle's colour of 8 contacts on 190 coupled rows: 9.8 vs 3.7 µs)
DENSE_COLOUR_EXTRA_ENTRIES = 16384


class DelassusOperator:
    """W = J A⁻¹ Jᵀ of a contact set, stored as blocks of the contact pairs sharing a strand, and its
    projected Gauss–Seidel solver.

    pairs (P,): contact indices pair_first, pair_second (both orders and the diagonal (c, c)) with blocks
    (P, 3, 3) = W_{cc'}; diagonal (n, 3, 3): W_cc; for the xp loop's sweeps colour (n,) of every contact (no
    two contacts of one colour share a strand; None for the CPU kernel's sequential sweeps).  The sweeps work
    in every contact's frame (normal, two tangents): there the local step is a scalar normal update, a 2 × 2
    friction solve and a clamp to the Coulomb disc."""

    def __init__(self, xp, model, factor, vertices, weights, dof_fixed, normal, max_colours: int = 24):
        """factor: BandedCholesky of A; vertices (n, 4) int, weights (n, 4) [-] (zero: unused slot);
        dof_fixed (n_dofs,) bool: kinematic DOFs, which do not respond; normal (n, 3): unit contact normals;
        max_colours: at most this many colours (sequential steps per sweep), see _greedy_colouring."""
        self.xp = xp
        n = vertices.shape[0]
        self.n = n
        contact, slot = xp.nonzero(weights != 0.0)
        vertex = vertices[contact, slot]
        weight = weights[contact, slot]
        strand = model.vertex_strand[vertex]
        inverse_blocks = _strand_inverse_blocks(xp, model, factor, vertex, strand, dof_fixed)
        # entry pairs (e, f) on one strand: sort the entries by strand, pair every entry with its group
        order = xp.argsort(strand, kind="stable")
        contact, vertex, weight, strand = contact[order], vertex[order], weight[order], strand[order]
        entry_block = inverse_blocks.index_of(vertex)
        group_start = xp.searchsorted(strand, strand, side="left")
        group_size = xp.searchsorted(strand, strand, side="right") - group_start
        first = repeat_each(xp, xp.arange(strand.shape[0]), group_size)
        local = xp.arange(first.shape[0]) - repeat_each(xp, xp.cumsum(group_size) - group_size, group_size)
        second = group_start[first] + local
        entry_pair_blocks = (weight[first] * weight[second])[:, None, None] \
            * inverse_blocks.block(entry_block[first], entry_block[second])
        # sum the entry pairs of every contact pair
        keys = contact[first] * n + contact[second]
        unique_keys, slot_of = xp.unique(keys, return_inverse=True)
        slot_of = slot_of.reshape(-1)
        summed = _sum_rows(xp, _entry_slots(xp, slot_of, 9), entry_pair_blocks.reshape(-1, 9), unique_keys.shape[0])
        self.pair_first, self.pair_second = unique_keys // n, unique_keys % n
        self.blocks = summed.reshape(-1, 3, 3)
        on_diagonal = self.pair_first == self.pair_second
        self.diagonal = xp.zeros((n, 3, 3))
        self.diagonal[self.pair_first[on_diagonal]] = self.blocks[on_diagonal]
        # the CPU sweeps contact after contact in one kernel (true Gauss–Seidel, no colours); elsewhere the xp loop
        # sweeps colour by colour
        self.sequential = bool(SWEEP_KERNEL and n and warp_device_of(self.blocks) == "cpu")
        if self.sequential:
            self.colour, self.colours, self.sharing = None, 0, xp.ones(n)
        else:
            self.colour = _greedy_colouring(xp, n, self.pair_first[~on_diagonal], self.pair_second[~on_diagonal],
                                            max_colours)
            self.sharing = _colour_sharing(xp, n, model.n_strands, self.colour, contact, strand)
        self._prepare_sweeps(normal)

    def _prepare_sweeps(self, normal):
        """Contact frames, W in them grouped by the colour of the block's column contact, and the pieces of
        every contact's own block the local step needs."""
        xp, n = self.xp, self.n
        frames = _contact_frames(xp, normal)                                            # (n, 3, 3) columns n, t1, t2
        self.frames = frames
        # two batched 3 × 3 products (a three-operand einsum loops naively: 9 of 12 ms per operator build)
        local_blocks = xp.swapaxes(frames[self.pair_first], 1, 2) @ self.blocks @ frames[self.pair_second]
        # a contact updated at once with others of its colour on a common strand steps with its own block
        # times their number (W ≤ Σ_s m_s W_s for the strands' parts W_s of a positive semi-definite W), so
        # the simultaneous steps cannot overshoot together
        own = self.sharing[:, None, None] * (xp.swapaxes(frames, 1, 2) @ self.diagonal @ frames)
        local_step = _local_step_maps(xp, own)                                          # (n, 3, 3)
        self.sweep_colours = []
        self._kernel_sweeps = None
        if self.sequential:
            # sweep order = contact order; W λ in it is one product over all pairs (_apply_in_sweep_order)
            self.order = self.rank = xp.arange(n)
            self._ordered_pairs = (local_blocks, self.pair_first, self.pair_second)
            self._kernel_sweeps = _SequentialSweeps(xp, n, local_blocks, self.pair_first, self.pair_second,
                                                    local_step)
            return
        colours = int(self.colour.max()) + 1 if n else 0
        # the sweeps work in colour order, where every colour's contacts are one slice (views, not gathers)
        self.order = xp.argsort(self.colour, kind="stable")                            # colour order -> contact
        self.rank = xp.empty(n, dtype=xp.int64)                                         # contact -> colour order
        self.rank[self.order] = xp.arange(n)
        counts = xp.bincount(self.colour, minlength=colours)
        pair_colour = self.colour[self.pair_second]
        self.colours = colours
        start = 0
        for colour in range(colours):
            stop = start + int(counts[colour])
            members = self.order[start:stop]
            pairs = xp.nonzero(pair_colour == colour)[0]
            rows, row_slot = xp.unique(self.rank[self.pair_first[pairs]], return_inverse=True)
            column = self.rank[self.pair_second[pairs]]
            self.sweep_colours.append(_ColourBlocks(xp, slice(start, stop), local_blocks[pairs], column - start,
                                                    rows, row_slot.reshape(-1), local_step[members]))
            start = stop

    def apply(self, impulses):
        """W λ for λ (n, 3) [N·s]: relative velocity change (n, 3) [m/s]."""
        return _pair_product(self.xp, self.blocks, self.pair_first, self.pair_second, impulses, self.n)

    def gauss_seidel(self, relative, impulse, target_normal, mu, sweeps: int, velocity_tolerance: float):
        """Projected Gauss–Seidel on u(λ) = relative + W (λ − impulse): per contact, the normal impulse that
        brings u_N to target_normal (λ_N ≥ 0), then the friction that stops the sliding (with the normal
        change's tangential effect), clamped to ‖λ_T‖ ≤ μ λ_N (seed eqs. 3.1, 3.4, 3.5).

        relative (n, 3) [m/s]: relative velocities that the impulses `impulse` (n, 3) [N·s] produce;
        target_normal (n,) [m/s]; mu (n,).  Sweeps until no contact's relative velocity changes by more than
        its velocity_tolerance (n,) [m/s] in a sweep, at most `sweeps` times.  Returns (impulses (n, 3) inside
        their Coulomb cones, sweeps done, last sweep's largest velocity change relative to the tolerance)."""
        xp, frames, order = self.xp, self.frames, self.order
        # frame components, in sweep order: a colour's contacts are the slice colour.members
        u = xp.einsum("nia,ni->na", frames, relative)[order]
        given = xp.einsum("nia,ni->na", frames, impulse)[order]
        target_normal, mu = target_normal[order], mu[order]
        # a start outside the cone (e.g. a warm start) is projected first, so every iterate is admissible
        lam = _clamp_to_disc(xp, given.copy(), mu)
        u = u + self._apply_in_sweep_order(lam - given)
        inverse_tolerance = 1.0 / velocity_tolerance[order]
        # target relative velocity in the contact frames: the normal target, no sliding
        target = xp.zeros((self.n, 3))
        target[:, 0] = target_normal
        if self._kernel_sweeps is not None:
            done, largest = self._kernel_sweeps.run(sweeps, target, mu, inverse_tolerance, lam, u)
            return xp.einsum("nia,na->ni", frames, lam[self.rank]), done, largest
        steps = [(colour, target[colour.members], mu[colour.members],
                  inverse_tolerance[colour.rows][:, None]) for colour in self.sweep_colours]
        largest = 0.0
        done = 0
        for done in range(1, sweeps + 1):
            # the largest single colour step's change (a net change over the sweep can hide colours that undo
            # each other: stopping on it left the Newton loop at N_max in a dense hairball substep)
            largest_change = xp.zeros(())
            for colour, colour_target, friction, row_inverse_tolerance in steps:
                old = lam[colour.members]
                new = _clamp_to_disc(xp, old + colour.local_step(colour_target - u[colour.members]), friction)
                change = colour.effect(xp, new - old)          # before the slice `old` views is overwritten
                lam[colour.members] = new
                u[colour.rows] += change
                largest_change = xp.maximum(largest_change, (xp.abs(change) * row_inverse_tolerance).max())
            largest = float(largest_change)
            if largest <= 1.0:
                break
        return xp.einsum("nia,na->ni", frames, lam[self.rank]), done, largest

    def _apply_in_sweep_order(self, lam):
        """W λ in the contact frames for λ (n, 3) in the contact frames, both in sweep order (colour order, or
        contact order for the sequential sweeps)."""
        xp = self.xp
        if self._kernel_sweeps is not None:
            blocks, rows, columns = self._ordered_pairs
            return _pair_product(xp, blocks, rows, columns, lam, self.n)
        result = self.xp.zeros((self.n, 3))
        for colour in self.sweep_colours:
            result[colour.rows] += colour.effect(self.xp, lam[colour.members])
        return result


class _SequentialSweeps:
    """DelassusOperator's blocks in the contact frames grouped by their column contact, for
    contact_kernels.sequential_sweeps (every sweep in one launch of one CPU thread, contact after contact).

    column_start (n + 1,): contact c's blocks are [column_start[c], column_start[c + 1]), pair_row (P,) their
    row contact, blocks (P, 3, 3); step_maps (n, 3, 3): the contacts' local step maps (_local_step_maps)."""

    def __init__(self, xp, n: int, local_blocks, pair_first, pair_second, step_maps):
        by_column = xp.argsort(pair_second, kind="stable")
        column_start = xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(xp.bincount(pair_second, minlength=n))])
        self.xp = xp
        self.arrays = {"column_start": xp.ascontiguousarray(column_start.astype(xp.int32)),
                       "pair_row": xp.ascontiguousarray(pair_first[by_column].astype(xp.int32)),
                       "blocks": xp.ascontiguousarray(local_blocks[by_column], dtype=xp.float64),
                       "step_maps": xp.ascontiguousarray(step_maps, dtype=xp.float64)}
        kinds = {"blocks": wp.mat33d, "step_maps": wp.mat33d}
        self.views = [warp_view(self.arrays[name], kinds.get(name, wp.int32))
                      for name in ("column_start", "pair_row", "blocks", "step_maps")]

    def run(self, sweeps: int, target, mu, inverse_tolerance, lam, u):
        """All sweeps in one launch; lam, u (n, 3) (contact frames) updated in place. Returns (sweeps done,
        largest single contact step's velocity change relative to the tolerance) (one read-back)."""
        xp = self.xp
        outcome = xp.zeros(2)
        launch(contact_kernels.sequential_sweeps, 1, [
            int(sweeps), int(lam.shape[0]), *self.views, warp_view(xp.ascontiguousarray(target), wp.vec3d),
            warp_view(xp.ascontiguousarray(mu, dtype=xp.float64), wp.float64),
            warp_view(xp.ascontiguousarray(inverse_tolerance, dtype=xp.float64), wp.float64),
            warp_view(lam, wp.vec3d), warp_view(u, wp.vec3d), warp_view(outcome, wp.float64)], "cpu")
        done, largest = (float(value) for value in outcome)
        return int(done), largest


class _ColourBlocks:
    """The blocks of W (in the contact frames) whose column contact has one colour.

    In the colour order of DelassusOperator (`order`): members, a slice of k contacts, the colour's; blocks
    (p, 3, 3) with their column contact's position in `members` (p,) and their row contact rows[row_slot]
    (rows (r,) unique, row_slot (p,)).  step_maps (k, 3, 3): the members' local step maps
    (_local_step_maps)."""

    def __init__(self, xp, members, blocks, column, rows, row_slot, step_maps):
        self.members, self.column, self.rows = members, column, rows
        self._step_columns = _columns(xp, step_maps)
        self._matrix = None
        if xp is np and SPARSE_COLOUR_PRODUCTS:
            # on numpy one product (3r × 3k) per colour step: 10 µs where the gather, products and bincount
            # below took 40 µs (a dense substep runs ~14 000 colour steps); small colours as a dense array
            self._matrix = _block_matrix(blocks, row_slot, column, rows.shape[0], step_maps.shape[0])
            if self._matrix.shape[0] * self._matrix.shape[1] <= 4 * self._matrix.nnz + DENSE_COLOUR_EXTRA_ENTRIES:
                self._matrix = self._matrix.toarray()
        else:
            # on a device: the blocks' columns (3 of (p, 3)); three broadcast products beat a batched 3 × 3
            # einsum or matmul there
            self._block_columns = _columns(xp, blocks)
            self._slots = _entry_slots(xp, row_slot, 3)

    def local_step(self, shortfall):
        """Unprojected impulse change (k, 3) [N·s] of the members for their velocity shortfall (k, 3) [m/s]
        (target minus current relative velocity, contact frames)."""
        first, second, third = self._step_columns
        return first * shortfall[:, 0:1] + second * shortfall[:, 1:2] + third * shortfall[:, 2:3]

    def effect(self, xp, change):
        """Velocity change (r, 3) [m/s] at the contacts `rows` of the impulse change (k, 3) [N·s] of `members`."""
        if self._matrix is not None:
            return (self._matrix @ change.reshape(-1)).reshape(-1, 3)
        gathered = change[self.column]
        first, second, third = self._block_columns
        per_block = first * gathered[:, 0:1] + second * gathered[:, 1:2] + third * gathered[:, 2:3]
        return _sum_rows(xp, self._slots, per_block, self.rows.shape[0])


def _pair_product(xp, blocks, rows, columns, values, n: int):
    """(n, 3): row r sums blocks[p] @ values[columns[p]] over the pairs p with rows[p] = r; blocks (P, 3, 3)."""
    change = xp.einsum("pij,pj->pi", blocks, values[columns])
    return _sum_rows(xp, _entry_slots(xp, rows, 3), change, n)


def _block_matrix(blocks, row_slot, column, rows: int, columns: int):
    """CSR matrix (3·rows, 3·columns) with the 3 × 3 blocks (p, 3, 3) at block row row_slot (p,) and block
    column column (p,) (numpy; duplicates are summed)."""
    count = blocks.shape[0]
    axis = np.arange(3)
    row_index = np.broadcast_to((3 * row_slot)[:, None, None] + axis[None, :, None], (count, 3, 3))
    column_index = np.broadcast_to((3 * column)[:, None, None] + axis[None, None, :], (count, 3, 3))
    return scipy.sparse.coo_matrix((blocks.reshape(-1), (row_index.reshape(-1), column_index.reshape(-1))),
                                   shape=(3 * rows, 3 * columns)).tocsr()


def _columns(xp, matrices):
    """The three columns (p, 3) of matrices (p, 3, 3), contiguous."""
    return [xp.ascontiguousarray(matrices[:, :, axis]) for axis in range(3)]


def _local_step_maps(xp, own):
    """Seed eqs. 3.1, 3.4 as one linear map per contact (n, 3, 3) from its own block own (n, 3, 3) (contact
    frame: normal, two tangents).  For the shortfall s = target − u: the normal impulse change s_N / W_NN
    that brings u_N to its target, then the friction change that cancels the sliding the contact would
    have with it, u_T + W_TN Δλ_N, i.e. Δλ_T = W_TT⁻¹ (s_T − W_TN s_N / W_NN).  The projection onto the
    cone follows (_clamp_to_disc); when it zeroes the normal impulse it zeroes the friction too, so
    projecting after the whole step equals clamping λ_N before the friction step."""
    normal_compliance = 1.0 / own[:, 0, 0]                                              # (n,) 1 / W_NN
    tangential_inverse = _inverse_2x2(xp, own[:, 1:, 1:])                               # (n, 2, 2) W_TT⁻¹
    maps = xp.zeros_like(own)
    maps[:, 0, 0] = normal_compliance
    maps[:, 1:, 1:] = tangential_inverse
    maps[:, 1:, 0] = -(tangential_inverse @ own[:, 1:, 0:1])[:, :, 0] * normal_compliance[:, None]
    return maps


def _entry_slots(xp, index, width: int):
    """Flat slots (p · width,) of the entries of rows (p, width) sent to rows index (p,) (see _sum_rows)."""
    return (width * index[:, None] + xp.arange(width)).reshape(-1)


def _sum_rows(xp, slots, values, size: int):
    """Sums (size, m) of the rows values (p, m) sent to the rows given by their _entry_slots (one bincount)."""
    m = values.shape[1]
    return xp.bincount(slots, weights=values.reshape(-1), minlength=m * size).reshape(size, m)


def _inverse_2x2(xp, matrices):
    """Inverses (k, 2, 2) of the matrices (k, 2, 2) (closed form; batched LAPACK calls cost more here)."""
    a, b, c, d = matrices[:, 0, 0], matrices[:, 0, 1], matrices[:, 1, 0], matrices[:, 1, 1]
    determinant = a * d - b * c
    return xp.stack((xp.stack((d, -b), axis=1), xp.stack((-c, a), axis=1)), axis=1) / determinant[:, None, None]


def coulomb_scale(xp, normal_part, tangential, mu):
    """Seed eq. 3.5's factor (k,) on the tangential impulse tangential (k, d) that brings it inside the Coulomb
    disc ‖λ_T‖ ≤ μ λ_N, for normal impulses normal_part (k,) ≥ 0 (1 where it is inside already)."""
    # min(1, limit / length): 1 inside the disc; a zero λ_T (length 0) is left at 0 whatever the factor
    length = xp.sqrt((tangential * tangential).sum(axis=1))
    return xp.minimum(mu * normal_part / xp.maximum(length, 1e-300), 1.0)


def _clamp_to_disc(xp, impulse, mu):
    """Impulses (k, 3) in contact frames projected in place: λ_N ≥ 0 (else 0), ‖λ_T‖ ≤ μ λ_N by scaling λ_T
    (seed eq. 3.5).  Returns impulse."""
    normal_part = xp.maximum(impulse[:, 0], 0.0)
    impulse[:, 0] = normal_part
    impulse[:, 1:] *= coulomb_scale(xp, normal_part, impulse[:, 1:], mu)[:, None]
    return impulse


def _contact_frames(xp, normal):
    """Orthonormal frames (n, 3, 3) whose columns are the normal and two tangents."""
    helper = xp.where((xp.abs(normal[:, 0]) < 0.9)[:, None], xp.asarray([1.0, 0.0, 0.0]), xp.asarray([0.0, 1.0, 0.0]))
    first = xp.cross(normal, helper)
    first /= xp.linalg.norm(first, axis=1, keepdims=True)
    second = xp.cross(normal, first)
    return xp.stack((normal, first, second), axis=2)


class _StrandInverseBlocks:
    """3 × 3 blocks of A_s⁻¹ between the coordinates of touched vertices of one strand.

    columns (m, R) : A⁻¹ restricted to the touched vertices' DOF rows (3 per touched vertex, rows in the order
    of `touched`) and the R columns of their strand (3 per touched vertex of that strand, by rank)."""

    def __init__(self, xp, touched, rank, rows):
        self.xp, self.touched, self.rank, self.rows = xp, touched, rank, rows

    def index_of(self, vertices):
        return self.xp.searchsorted(self.touched, vertices)

    def block(self, first, second):
        """(m, 3, 3) blocks A⁻¹[dofs of touched[first], dofs of touched[second]] (same strand)."""
        xp = self.xp
        width = self.rows.shape[2]
        # one flat gather (a three-index fancy gather cost 2-3× more): entry (a, b) of block k sits at
        # rows[first[k], a, 3 rank[second[k]] + b]
        start = (3 * width) * first + 3 * self.rank[second]                          # (m,)
        offsets = (width * xp.arange(3))[:, None] + xp.arange(3)                     # (3, 3)
        return xp.take(self.rows.reshape(-1), start[:, None, None] + offsets)


# strands with (low, high] touched vertices share one multi-RHS solve of width 3 × their largest count (LAPACK
# path): one width for all touched strands solved ~2× more columns than needed in dense hair (mean 4.6
# touched vertices per strand, largest 10)
_WIDTH_GROUPS = ((0, 2), (2, 4), (4, 8), (8, np.iinfo(np.int64).max))


def _unit_columns(xp, size: int, rows, rank, width: int):
    """Right-hand sides (size, width): column 3 rank[k] + a is the unit vector of row rows[k, a] (rows (t, 3):
    a touched vertex's three coordinate rows; rank (t,): its rank among its strand's touched vertices)."""
    rhs = xp.zeros((size, width))
    rhs[rows, 3 * rank[:, None] + xp.arange(3)] = 1.0
    return rhs


def _strand_inverse_blocks(xp, model, factor, vertex, strand, dof_fixed) -> _StrandInverseBlocks:
    """Entries of A⁻¹ among the touched vertices of each strand from multi-RHS solves with `factor`:
    right-hand side column 3k + a of a strand is the unit vector of coordinate a of its k-th touched vertex
    (all strands side by side, as A is block diagonal).  On the LAPACK path only the touched strands' columns
    of the factor are used (one band matrix of their own per _WIDTH_GROUPS group, each solved with the RHS
    width its strands need); the xp path solves all strands with the largest width at once."""
    touched = xp.unique(vertex)
    touched_strand = model.vertex_strand[touched]
    rank = xp.arange(touched.shape[0]) - xp.searchsorted(touched_strand, touched_strand, side="left")
    width = 3 * (int(rank.max()) + 1)
    dofs = model.vertex_dof[touched][:, None] + xp.arange(3)                        # (t, 3) global DOFs
    if factor.on_xp_path:
        block_rows = factor.solve(_unit_columns(xp, model.n_dofs, dofs, rank, width))[dofs]    # (t, 3, R)
    else:   # xp is numpy here: LAPACK on the touched strands' columns, grouped by their RHS width
        block_rows = np.zeros((touched.shape[0], 3, width))
        touched_count = np.bincount(touched_strand, minlength=model.n_strands)
        for low, high in _WIDTH_GROUPS:
            selected = (touched_count > low) & (touched_count <= high)
            if not selected.any():
                continue
            in_group = selected[touched_strand]
            group_width = 3 * int(touched_count[selected].max())
            columns, _ = factor.blocks.columns_of(selected)
            row_of = np.full(model.n_dofs, -1, dtype=np.int64)
            row_of[columns] = np.arange(columns.shape[0])
            group_rows = row_of[dofs[in_group]]                                        # (t_g, 3)
            rhs = _unit_columns(np, columns.shape[0], group_rows, rank[in_group], group_width)
            compressed = np.ascontiguousarray(factor.lower_factor[:, columns])
            block_rows[in_group, :, :group_width] = scipy.linalg.cho_solve_banded(
                (compressed, True), rhs, check_finite=False)[group_rows]
    # kinematic DOFs do not respond: A has identity rows and columns there, so A⁻¹ couples them to nothing
    # and only their own diagonal entry (1) is removed
    block_rows = xp.where(dof_fixed[dofs][:, :, None], 0.0, block_rows)
    return _StrandInverseBlocks(xp, touched, rank, block_rows)


def _greedy_colouring(xp, n, first, second, max_colours: int):
    """Colour (n,) of every contact such that no pair (first[i], second[i]) has one colour, by rounds of
    independent sets (a contact joins the round's set when its priority beats that of every uncoloured
    neighbour).  Priorities are the contact's degree (high first) with the index as tie-break, so cliques of
    contacts on one strand take as few colours as their size.  After max_colours rounds the contacts left
    (a strand with more contacts than that: a strand lying on the ground) are dealt out over the colours in
    turn; they then share a colour with neighbours (see _colour_sharing)."""
    colour = xp.full(n, -1, dtype=xp.int64)
    if n == 0:
        return colour
    degree = xp.bincount(first, minlength=n)
    priority = degree.astype(xp.float64) * (n + 1) + (n - xp.arange(n))
    for round_number in range(max_colours):
        uncoloured = colour < 0
        if not bool(uncoloured.any()):
            return colour
        live = uncoloured[first] & uncoloured[second]
        beaten = xp.bincount(first[live], weights=(priority[second[live]] > priority[first[live]]).astype(xp.float64),
                             minlength=n) > 0.0
        colour[uncoloured & ~beaten] = round_number
    left = xp.nonzero(colour < 0)[0]
    colour[left] = xp.arange(left.shape[0]) % max_colours
    return colour


def _colour_sharing(xp, n, n_strands, colour, contact, strand):
    """For every contact (n,): the largest number of contacts of its colour on one of its strands (1 when
    the colouring separated it from all its neighbours).  contact, strand (E,): the strand of every weighted
    vertex slot of every contact."""
    touching = xp.unique(contact * n_strands + strand)                              # (contact, strand) pairs
    pair_contact, pair_strand = touching // n_strands, touching % n_strands
    _, group, count = xp.unique(colour[pair_contact] * n_strands + pair_strand, return_inverse=True,
                                return_counts=True)
    per_pair = count[group.reshape(-1)].astype(xp.float64)
    # pairs are sorted by contact: a contact's largest count is at one of its (one or two) pairs
    first = xp.searchsorted(pair_contact, xp.arange(n), side="left")
    last = xp.searchsorted(pair_contact, xp.arange(n), side="right") - 1
    return xp.maximum(per_pair[xp.minimum(first, per_pair.shape[0] - 1)], per_pair[xp.maximum(last, 0)])


__all__ = ["DelassusOperator"]

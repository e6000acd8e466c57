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
sweep visits the contacts one after the other in one kernel (true Gauss–Seidel, no colours).  On CUDA the
sweeps go colour by colour: contacts of one colour share no strand, so they are independent and updated at
once, two kernel launches per colour, and a solve's sweeps are one CUDA graph whose while-node stops them on
the device (kernels.contact).  The next global step applies the impulses; its velocities show what the linear
model missed (nonlinear elasticity, contacts found later) and the loop repeats.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import warp as wp

from ...backend import repeat_each
from ...kernels import (capture, cuda_layout_on, device_loops, int32_view, launch, launch_split, repeat_while, replay,
                        warp_device_of, warp_view)
from ...kernels.segments import histogram
from .kernels import contact as contact_kernels

# on the CPU the sweeps run contact after contact in one Warp launch (contact_kernels.sequential_sweeps, no
# colouring); off, and always in CUDA's layout (CUDA, and the emulated device): colour after colour
# (_ColourSweeps: the same kernels on every device)
SEQUENTIAL_ON_CPU = True
# None: the colour sweeps of a solve are one captured graph in CUDA's layout (on the emulated device Warp's recorded
# replay on the CPU), launched one by one on the plain CPU; a bool forces it
COLOUR_SWEEP_GRAPH = None


class DelassusStructure:
    """What a DelassusOperator takes from its contact set alone, not from the factor: the touched vertices' layout
    of the inverse-block solves, the coupled pairs by column, every contact's own pair, the contact frames, the colouring and its
    sweep order (and the colour sweeps' layout once made). A contact round refactors the matrix and builds the
    operator again on the same set: this part is built once per set (its data-sized selections and launch bounds
    are most of an operator's reads of the device)."""

    def __init__(self, xp, model, vertices, weights, normal, max_colours: int):
        n = self.n = vertices.shape[0]
        # the touched vertices and the (contact, strand) pairs of the weighted slots, with one read
        self.touched, incidence, strand_pairs = _touched_and_incidence(xp, model, vertices, weights)
        # pairs by column: column c's blocks W_rc are [column_start[c], column_start[c + 1]) (rows pair_first)
        self.pair_first, self.pair_second = _coupled_pairs(xp, n, model.n_strands, incidence, strand_pairs)
        self.column_start = xp.searchsorted(self.pair_second, xp.arange(n + 1))    # pair_second is sorted
        # the column layout as the kernels read it (the sweeps and every W v)
        self.column_views = (int32_view(xp, self.column_start), int32_view(xp, self.pair_first))
        self.frames = _contact_frames(xp, normal)                               # (n, 3, 3) columns n, t1, t2
        # every contact's own pair (c, c), found by its key in the pairs' order (columns, then rows: no mask, so
        # no data-sized output)
        self.own_pair = xp.searchsorted(self.pair_second * n + self.pair_first, xp.arange(n) * (n + 1))
        # the CPU sweeps contact after contact in one kernel (true Gauss–Seidel, no colours); CUDA colour by colour
        self.sequential = bool(SEQUENTIAL_ON_CPU and n and not cuda_layout_on(warp_device_of(self.frames)))
        self.sweep_layout = None
        if self.sequential:
            self.colour, self.colours, self.sharing = None, 0, xp.ones(n)
            # sweep order = contact order
            self.order = self.rank = xp.arange(n)
            return
        # (the pair set is symmetric: columns first, which are ascending; a contact's own pair among its
        # neighbours never beats it)
        self.colour = _greedy_colouring(xp, n, self.pair_second, self.pair_first, max_colours)
        self.sharing = _colour_sharing(xp, n, model.n_strands, self.colour, incidence)
        # every colour is below max_colours: the sweeps go over all of them (an empty colour launches nothing),
        # and the number in use is not read from the device
        self.colours = max_colours if n else 0
        # the sweeps work in colour order, where every colour's contacts are a contiguous range
        self.order = xp.argsort(self.colour, kind="stable")                        # colour order -> contact
        self.rank = xp.empty(n, dtype=xp.int64)                                     # contact -> colour order
        self.rank[self.order] = xp.arange(n)


class DelassusOperator:
    """W = J A⁻¹ Jᵀ of a contact set, stored as blocks of the contact pairs sharing a strand, and its
    projected Gauss–Seidel solver.

    pairs (P,): contact indices pair_first, pair_second (both orders and the diagonal (c, c)), stored by column
    (pair_second ascending; column c is [column_start[c], column_start[c + 1])), with blocks (P, 3, 3) = W_{cc'};
    diagonal (n, 3, 3): W_cc; for the colour sweeps colour (n,) of every contact (no
    two contacts of one colour share a strand; None for the CPU kernel's sequential sweeps).  The sweeps work
    in every contact's frame (normal, two tangents): there the local step is a scalar normal update, a 2 × 2
    friction solve and a clamp to the Coulomb disc."""

    def __init__(self, xp, model, factor, vertices, weights, dof_fixed, normal, max_colours: int = 24,
                 structure: "DelassusStructure | None" = None):
        """factor: BandedCholesky of A; vertices (n, 4) int, weights (n, 4) [-] (zero: unused slot);
        dof_fixed (n_dofs,) bool: kinematic DOFs, which do not respond; normal (n, 3): unit contact normals;
        max_colours: at most this many colours (sequential steps per sweep), see _greedy_colouring; structure:
        the contact set's DelassusStructure from an operator of the same set on an earlier factor (reused: only
        the blocks depend on the factor), or None."""
        self.xp = xp
        if structure is None:
            structure = DelassusStructure(xp, model, vertices, weights, normal, max_colours)
        self.structure = structure
        self.n = structure.n
        self.pair_first, self.pair_second = structure.pair_first, structure.pair_second
        self.column_start, self._column_views = structure.column_start, structure.column_views
        self.frames, self.sequential = structure.frames, structure.sequential
        self.colour, self.colours, self.sharing = structure.colour, structure.colours, structure.sharing
        inverse_blocks = _strand_inverse_blocks(xp, model, factor, structure.touched, dof_fixed)
        self.blocks, local_blocks = _pair_blocks(xp, self.pair_first, self.pair_second, vertices, weights,
                                                 model.vertex_strand, inverse_blocks, self.frames)
        self.diagonal = self.blocks[structure.own_pair]
        self._prepare_sweeps(local_blocks, structure.own_pair)

    def _prepare_sweeps(self, local_blocks, own_pair):
        """W in the contact frames (local_blocks (P, 3, 3)) in sweep order (_SequentialSweeps or _ColourSweeps),
        and the pieces of every contact's own block (own_pair (n,): its place among the pairs) the local step
        needs."""
        xp = self.xp
        # a contact updated at once with others of its colour on a common strand steps with its own block
        # times their number (W ≤ Σ_s m_s W_s for the strands' parts W_s of a positive semi-definite W), so
        # the simultaneous steps cannot overshoot together
        own = self.sharing[:, None, None] * local_blocks[own_pair]
        local_step = _local_step_maps(xp, own)                                          # (n, 3, 3)
        structure = self.structure
        self.order, self.rank = structure.order, structure.rank
        if self.sequential:
            self._sweeps = _SequentialSweeps(xp, self._column_views, local_blocks, local_step)
        else:
            self._sweeps = _ColourSweeps(xp, self.colour, self.colours, self.rank, local_blocks, self.pair_first,
                                         self.pair_second, local_step[self.order], structure.sweep_layout)
            structure.sweep_layout = self._sweeps.layout
        self._local_blocks = local_blocks

    def apply(self, impulses):
        """W λ for λ (n, 3) [N·s]: relative velocity change (n, 3) [m/s]."""
        return self._product(self.blocks, impulses, self.xp.arange(self.n))

    def gauss_seidel(self, relative, impulse, target_normal, mu, sweeps: int, velocity_tolerance: float):
        """Projected Gauss–Seidel on u(λ) = relative + W (λ − impulse): per contact, the normal impulse that
        brings u_N to target_normal (λ_N ≥ 0), then the friction that stops the sliding (with the normal
        change's tangential effect), clamped to ‖λ_T‖ ≤ μ λ_N (seed eqs. 3.1, 3.4, 3.5).

        relative (n, 3) [m/s]: relative velocities that the impulses `impulse` (n, 3) [N·s] produce;
        target_normal (n,) [m/s]; mu (n,).  Sweeps until no contact's relative velocity changes by more than
        its velocity_tolerance (n,) [m/s] in a sweep, at most `sweeps` times.  Returns (impulses (n, 3) inside
        their Coulomb cones, sweeps done, last sweep's largest velocity change relative to the tolerance; the two
        counts are 0-d device arrays where the sweeps run colour by colour)."""
        xp, frames, order = self.xp, self.frames, self.order
        # frame components, in sweep order (a colour's contacts are a contiguous range of it)
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
        done, largest = self._sweeps.run(sweeps, target, mu, inverse_tolerance, lam, u)
        return xp.einsum("nia,na->ni", frames, lam[self.rank]), done, largest

    def _apply_in_sweep_order(self, lam):
        """W λ in the contact frames for λ (n, 3) in the contact frames, both in sweep order (colour order, or
        contact order for the sequential sweeps)."""
        return self._product(self._local_blocks, lam, self.rank)

    def _product(self, blocks, values, position):
        """W v for the blocks (P, 3, 3) and v (n, 3), both v and the result in the order `position` (n,) puts the
        contacts in (contact_kernels.column_products, a thread per contact)."""
        xp = self.xp
        result = xp.zeros((self.n, 3))
        launch_split(contact_kernels.column_products, self.n, warp_device_of(result), [], [
            *self._column_views, warp_view(xp.ascontiguousarray(blocks), wp.mat33d), int32_view(xp, position),
            warp_view(xp.ascontiguousarray(values, dtype=xp.float64), wp.vec3d), warp_view(result, wp.vec3d)])
        return result


class _SequentialSweeps:
    """DelassusOperator's blocks in the contact frames grouped by their column contact, for
    contact_kernels.sequential_sweeps (every sweep in one launch of one CPU thread, contact after contact).

    column_views: int32 views of column_start (n + 1,) and the row contacts (P,) (contact c's blocks are
    [column_start[c], column_start[c + 1])); blocks (P, 3, 3); step_maps (n, 3, 3): the contacts' local step
    maps (_local_step_maps)."""

    def __init__(self, xp, column_views, local_blocks, step_maps):
        self.xp = xp
        self.views = [*column_views, warp_view(xp.ascontiguousarray(local_blocks, dtype=xp.float64), wp.mat33d),
                      warp_view(xp.ascontiguousarray(step_maps, dtype=xp.float64), wp.mat33d)]

    def run(self, sweeps: int, target, mu, inverse_tolerance, lam, u):
        """All sweeps in one launch; lam, u (n, 3) (contact frames) updated in place. Returns (sweeps done,
        largest single contact step's velocity change relative to the tolerance) as 0-d arrays."""
        xp = self.xp
        outcome = xp.zeros(2)
        launch(contact_kernels.sequential_sweeps, 1, [
            int(sweeps), int(lam.shape[0]), *self.views, warp_view(xp.ascontiguousarray(target), wp.vec3d),
            warp_view(xp.ascontiguousarray(mu, dtype=xp.float64), wp.float64),
            warp_view(xp.ascontiguousarray(inverse_tolerance, dtype=xp.float64), wp.float64),
            warp_view(lam, wp.vec3d), warp_view(u, wp.vec3d), warp_view(outcome, wp.float64)], "cpu")
        return outcome[0], outcome[1]


class _ColourSweeps:
    """DelassusOperator's blocks in the contact frames for the sweeps colour after colour
    (kernels.contact.colour_steps and colour_effects: two launches per colour, the same kernels on every device).

    Everything in sweep (colour) order.  Colour c's contacts are [member_start[c], member_start[c + 1]); the
    contacts its blocks reach are the effect rows [row_start[c], row_start[c + 1]): effect row k adds
    effect_blocks[p] Δλ[effect_column[p]] over p in [effect_start[k], effect_start[k + 1]) to u[effect_row[k]];
    step_maps (n, 3, 3): the contacts' local step maps.  graph: a solve's sweeps as one captured graph whose
    while-node runs them until the stopping test holds (kernels.capture, repeat_while): on CUDA one replay
    instead of two launches per colour and sweep and a synchronization per sweep.

    The layout holds what outlives one operator: the contact set's grouping and launch bounds, and the solves'
    buffers (the blocks and step maps included) with the graph recorded over them. A contact round refactors the
    matrix and builds the operator again on the same set; its blocks are copied into those buffers and the graph
    recorded by the set's first solve serves every later one (one recording per contact set, where there was one
    per factor)."""

    def __init__(self, xp, colour, colours: int, rank, local_blocks, pair_first, pair_second, step_maps,
                 layout: dict | None = None):
        """layout: the ``layout`` of sweeps over the same contact set and colouring (reused), or None."""
        self.xp, self.colours = xp, colours
        self.device = warp_device_of(local_blocks)
        if layout is None:
            layout = self._layout(xp, colour, colours, rank, pair_first, pair_second)
        self.layout = layout
        self.member_start, self.row_start = layout["member_start"], layout["row_start"]
        self.graph = cuda_layout_on(self.device) if COLOUR_SWEEP_GRAPH is None else bool(COLOUR_SWEEP_GRAPH)
        self.graph = self.graph and device_loops(self.device)
        buffers = layout.get("buffers")
        if buffers is None:
            n = step_maps.shape[0]
            buffers = layout["buffers"] = {
                "effect_blocks": xp.zeros((layout["by_key"].shape[0], 3, 3)), "step_maps": xp.zeros((n, 3, 3)),
                "target": xp.zeros((n, 3)), "mu": xp.zeros(n), "inverse_tolerance": xp.zeros(n),
                "lam": xp.zeros((n, 3)), "u": xp.zeros((n, 3)), "delta": xp.zeros((n, 3)), "outcome": xp.zeros(2),
                "running": xp.zeros(1, dtype=xp.int32)}
            kinds = {"effect_blocks": wp.mat33d, "step_maps": wp.mat33d, "target": wp.vec3d, "lam": wp.vec3d,
                     "u": wp.vec3d, "delta": wp.vec3d, "mu": wp.float64, "inverse_tolerance": wp.float64,
                     "outcome": wp.float64, "running": wp.int32}
            layout["views"] = {**{name: warp_view(xp.ascontiguousarray(array), wp.int32)
                                  for name, array in layout["arrays"].items()},
                               **{name: warp_view(buffers[name], kind) for name, kind in kinds.items()}}
            layout["recorded"] = None     # (sweeps, the graph or the launching function) of the set's solves
        buffers["effect_blocks"][...] = local_blocks[layout["by_key"]]
        buffers["step_maps"][...] = step_maps
        self.buffers, self.views = buffers, layout["views"]

    @staticmethod
    def _layout(xp, colour, colours: int, rank, pair_first, pair_second) -> dict:
        """The blocks grouped by (colour, row) and the launch bounds: what depends on the contact set and its
        colouring, not on the blocks' values."""
        n = colour.shape[0]
        # a block (r, c) belongs to the colour of its column contact c; group the blocks by (colour, row)
        key = colour[pair_second] * n + rank[pair_first]
        by_key = xp.argsort(key, kind="stable")
        key = key[by_key]
        starts = _run_starts(xp, key)
        # the (colour, row) groups of each colour: the group starts within the colour's range of the sorted keys
        started = xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(starts)])
        colour_end = xp.searchsorted(key, xp.arange(colours + 1) * n)
        # the launch bounds on the host, with the groups' number: one read-back when the layout is made
        counts = xp.concatenate([histogram(xp, colour, colours), started[colour_end[1:]] - started[colour_end[:-1]]])
        counts = np.asarray(counts.tolist(), dtype=np.int64)
        groups = int(counts[colours:].sum())
        first = _flagged(xp, starts, groups)                      # where each group starts, in order
        effect_key = key[first]
        arrays = {"effect_row": (effect_key % n).astype(xp.int32),
                  "effect_start": xp.concatenate([first, xp.asarray([key.shape[0]])]).astype(xp.int32),
                  "effect_column": rank[pair_second][by_key].astype(xp.int32)}
        return {"by_key": by_key, "arrays": arrays, "member_start": [0, *np.cumsum(counts[:colours]).tolist()],
                "row_start": [0, *np.cumsum(counts[colours:]).tolist()]}

    def run(self, sweeps: int, target, mu, inverse_tolerance, lam, u):
        """The sweeps; lam, u (n, 3) (contact frames, sweep order) updated in place. Returns (sweeps done, last
        sweep's largest single colour step's velocity change relative to the tolerance) as 0-d device arrays (a
        stall is a read of the caller's, where it needs one).  The launches work on the layout's buffers, into
        which the inputs are copied, so that the graph recorded by the contact set's first solve serves the
        later ones (a contact round solves again, on the same operator or on the set's next one)."""
        device, buffers, layout = self.device, self.buffers, self.layout
        for name, value in (("target", target), ("mu", mu), ("inverse_tolerance", inverse_tolerance), ("lam", lam),
                            ("u", u)):
            buffers[name][...] = value
        if layout["recorded"] is None or layout["recorded"][0] != sweeps:
            solve = self._solve_launches(int(sweeps))
            layout["recorded"] = (sweeps, capture(device, solve)[0] if self.graph else solve)
        if self.graph:
            replay(layout["recorded"][1], device)
        else:
            layout["recorded"][1]()
        lam[...] = buffers["lam"]
        u[...] = buffers["u"]
        outcome = buffers["outcome"].copy()
        return outcome[0], outcome[1]

    def _solve_launches(self, sweeps: int):
        """A function making the launches of a solve of at most ``sweeps`` sweeps on the layout's buffers."""
        device, view = self.device, self.views
        step_inputs = [view["step_maps"], view["target"], view["mu"], view["u"], view["lam"], view["delta"]]
        effect_inputs = [view["effect_row"], view["effect_start"], view["effect_column"], view["effect_blocks"],
                         view["delta"], view["inverse_tolerance"], view["u"], view["outcome"]]
        members, rows = self.member_start, self.row_start
        colours = self.colours

        def sweep():
            launch(contact_kernels.sweep_reset, 1, [view["outcome"]], device)
            for colour in range(colours):
                launch(contact_kernels.colour_steps, members[colour + 1] - members[colour],
                       [members[colour], *step_inputs], device)
                launch(contact_kernels.colour_effects, rows[colour + 1] - rows[colour],
                       [rows[colour], *effect_inputs], device)
            launch(contact_kernels.sweep_end, 1, [sweeps, view["outcome"], view["running"]], device)

        def solve():
            launch(contact_kernels.sweep_start, 1, [sweeps, view["outcome"], view["running"]], device)
            repeat_while(view["running"], sweep, device)

        return solve


def _coupled_pairs(xp, n: int, n_strands: int, incidence, strand_pairs: int):
    """The contact pairs (c, c') that touch a common strand, both orders and (c, c), sorted by the column c' then
    c: (pair_first (P,), pair_second (P,)).  incidence (I,): contact × n_strands + strand of every (contact, strand)
    pair, ascending, once each; strand_pairs: the ordered pairs of them on one strand, Σ over strands of their
    count squared (a host int)."""
    by_strand = xp.argsort(incidence % n_strands, kind="stable")
    member, group = incidence[by_strand] // n_strands, incidence[by_strand] % n_strands
    group_start = xp.searchsorted(group, group, side="left")
    group_size = xp.searchsorted(group, group, side="right") - group_start
    first = repeat_each(xp, xp.arange(group.shape[0]), group_size, strand_pairs)
    local = xp.arange(first.shape[0]) - (xp.cumsum(group_size) - group_size)[first]
    keys = xp.unique(member[group_start[first] + local] * n + member[first])  # a pair sharing two strands once
    return keys % n, keys // n


def _pair_blocks(xp, pair_first, pair_second, vertices, weights, vertex_strand, inverse_blocks, frames):
    """W's blocks (P, 3, 3) of the contact pairs and the same in the contacts' frames (P, 3, 3)
    (contact_kernels.pair_blocks, a thread per pair).  vertices, weights (n, 4): the contacts' vertex slots (weight
    0: unused); frames (n, 3, 3)."""
    used = weights != 0.0
    slot_entry = xp.where(used, inverse_blocks.index_of(vertices), -1)
    slot_strand = vertex_strand[vertices]
    blocks = xp.zeros((pair_first.shape[0], 3, 3))
    local_blocks = xp.zeros_like(blocks)
    rows = xp.ascontiguousarray(inverse_blocks.rows, dtype=xp.float64)
    launch_split(contact_kernels.pair_blocks, pair_first.shape[0], warp_device_of(blocks), [], [
        int32_view(xp, pair_first), int32_view(xp, pair_second), int32_view(xp, slot_entry),
        warp_view(xp.ascontiguousarray(weights, dtype=xp.float64), wp.float64),
        int32_view(xp, slot_strand), int32_view(xp, inverse_blocks.rank),
        warp_view(rows.reshape(-1), wp.float64), int(rows.shape[2]),
        warp_view(xp.ascontiguousarray(frames, dtype=xp.float64), wp.mat33d), warp_view(blocks, wp.mat33d),
        warp_view(local_blocks, wp.mat33d)])
    return blocks, local_blocks


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
    """The entries of A_s⁻¹ between the coordinates of touched vertices of one strand.

    rows (t, 3, R): A⁻¹ restricted to the touched vertices' DOF rows (3 per touched vertex, in the order of
    `touched`) and the R columns of their strand (3 per touched vertex of that strand, by rank (t,))."""

    def __init__(self, xp, touched, rank, rows):
        self.xp, self.touched, self.rank, self.rows = xp, touched, rank, rows

    def index_of(self, vertices):
        return self.xp.searchsorted(self.touched, vertices)


def _unit_columns(xp, size: int, rows, rank, width: int):
    """Right-hand sides (size, width): column 3 rank[k] + a is the unit vector of row rows[k, a] (rows (t, 3):
    a touched vertex's three coordinate rows; rank (t,): its rank among its strand's touched vertices)."""
    rhs = xp.zeros((size, width))
    rhs[rows, 3 * rank[:, None] + xp.arange(3)] = 1.0
    return rhs


@dataclass
class _TouchedVertices:
    """The vertices a contact set touches (t,), ascending, their strands (t,), their rank among their strand's
    touched vertices (t,), the widest strand's 3 × count (a host int) and their DOFs (t, 3): the layout of
    _strand_inverse_blocks' solves, which depends on the set alone."""
    touched: Any
    strand: Any
    rank: Any
    width: int
    dofs: Any

    @classmethod
    def of(cls, xp, model, touched, widest: int) -> "_TouchedVertices":
        """touched (t,): the vertices, ascending; widest: the most of them on one strand (a host int)."""
        touched_strand = model.vertex_strand[touched]
        rank = xp.arange(touched.shape[0]) - xp.searchsorted(touched_strand, touched_strand, side="left")
        return cls(touched, touched_strand, rank, 3 * widest, model.vertex_dof[touched][:, None] + xp.arange(3))


def _touched_and_incidence(xp, model, vertices, weights):
    """(the touched vertices of the weighted slots of ``vertices`` / ``weights`` (n, 4) (_TouchedVertices),
    incidence (I,): contact × n_strands + strand of every (contact, strand) pair, ascending, once each, and the
    ordered pairs of those on a common strand, Σ over strands of their count squared), with one read of the device
    for the sizes and the widest strand: runs of sorted keys over all the slots (the unused ones sorted last) instead
    of a nonzero and two uniques, each of which reads the device."""
    n_vertices, n_strands = model.n_vertices, model.n_strands
    used = (weights != 0.0).reshape(-1)
    slot_vertex = xp.where(used, vertices.reshape(-1), n_vertices)
    slot_strand = model.vertex_strand[xp.minimum(slot_vertex, n_vertices - 1)]
    # distinct touched vertices: the starts of runs of the sorted slot vertices (the unused last, not counted)
    vertex_sorted = xp.sort(slot_vertex)
    valid = vertex_sorted < n_vertices
    vertex_start = _run_starts(xp, vertex_sorted, valid)
    # each distinct vertex's rank on its strand (the strands are contiguous vertex ranges, so sorted too)
    strand_sorted = xp.where(valid, model.vertex_strand[xp.minimum(vertex_sorted, n_vertices - 1)], n_strands)
    distinct_before = xp.cumsum(vertex_start) - vertex_start
    rank = distinct_before - distinct_before[xp.searchsorted(strand_sorted, strand_sorted, side="left")]
    # distinct (contact, strand) pairs, the same way
    beyond = vertices.shape[0] * n_strands
    pair_key = xp.where(used, (xp.arange(used.shape[0]) // vertices.shape[1]) * n_strands + slot_strand, beyond)
    pair_sorted = xp.sort(pair_key)
    pair_start = _run_starts(xp, pair_sorted, pair_sorted < beyond)
    on_strand = histogram(xp, xp.where(pair_start, pair_sorted % n_strands, n_strands), n_strands + 1)[:n_strands]
    touched_count, widest, pairs, strand_pairs = (int(value) for value in xp.stack([
        vertex_start.sum(), xp.max(xp.where(vertex_start, rank + 1, 0)), pair_start.sum(),
        (on_strand * on_strand).sum()]).tolist())
    touched = vertex_sorted[_flagged(xp, vertex_start, touched_count)]
    incidence = pair_sorted[_flagged(xp, pair_start, pairs)]
    return _TouchedVertices.of(xp, model, touched, widest), incidence, strand_pairs


def _run_starts(xp, ordered, valid=None):
    """(k,) bool: where a run of equal values of the sorted ``ordered`` (k,) starts; with ``valid`` (k,) bool, only
    among the valid entries (the others, sorted last, start none)."""
    starts = xp.concatenate([xp.ones(min(1, ordered.shape[0]), dtype=bool), ordered[1:] != ordered[:-1]])
    return starts if valid is None else starts & valid


def _flagged(xp, flags, count: int):
    """The indices of the ``count`` (a host int) true entries of ``flags`` (k,) bool, ascending: a stable argsort
    of the flags instead of a nonzero, whose data-sized output reads the device."""
    return xp.argsort(~flags, kind="stable")[:count]


def _strand_inverse_blocks(xp, model, factor, vertices: _TouchedVertices, dof_fixed) -> _StrandInverseBlocks:
    """Entries of A⁻¹ among the touched vertices of each strand from multi-RHS solves with `factor`:
    right-hand side column 3k + a of a strand is the unit vector of coordinate a of its k-th touched vertex
    (all strands side by side, as A is block diagonal), on the kernel path all strands with the largest width at
    once.  On the LAPACK path a kernel takes the touched strands' columns of L⁻¹ and their inner products
    (_inverse_blocks_from_factor)."""
    touched, touched_strand, rank, width, dofs = (vertices.touched, vertices.strand, vertices.rank, vertices.width,
                                                  vertices.dofs)
    if factor.on_kernel_path:
        block_rows = factor.solve(_unit_columns(xp, model.n_dofs, dofs, rank, width))[dofs]    # (t, 3, R)
    else:   # xp is numpy here: the columns of L⁻¹ of the touched DOFs and their inner products, in a kernel
        block_rows = _inverse_blocks_from_factor(factor, touched_strand, dofs, width)
    # kinematic DOFs do not respond: A has identity rows and columns there, so A⁻¹ couples them to nothing
    # and only their own diagonal entry (1) is removed
    block_rows = xp.where(dof_fixed[dofs][:, :, None], 0.0, block_rows)
    return _StrandInverseBlocks(xp, touched, rank, block_rows)


def _inverse_blocks_from_factor(factor, touched_strand, dofs, width: int):
    """(t, 3, width) block rows of A⁻¹ between the touched vertices of each strand from the LAPACK band factor
    (host arrays): row (k, a) holds A⁻¹[dofs[k, a], the DOFs of its strand's touched vertices by rank] (zero
    beyond them).  contact_kernels.strand_inverse_blocks, a thread per touched strand, the strands cut over the
    CPU threads.  touched_strand (t,) ascending; dofs (t, 3) global DOFs."""
    count = touched_strand.shape[0]
    ends = factor.blocks.segment_ends
    first = np.flatnonzero(np.concatenate(([True], touched_strand[1:] != touched_strand[:-1])))
    strand = touched_strand[first]
    dof_end = ends[strand]
    dof_start = np.where(strand > 0, ends[np.maximum(strand - 1, 0)], 0)
    column_start = 3 * np.concatenate((first, [count]))
    scratch_size = (dof_end - dof_start) * np.diff(column_start)
    scratch_start = np.concatenate(([0], np.cumsum(scratch_size)[:-1]))
    scratch = np.empty(int(scratch_size.sum()))
    block_rows = np.zeros((count, 3, width))
    launch_split(contact_kernels.strand_inverse_blocks, strand.shape[0], "cpu", [], [
        warp_view(np.ascontiguousarray(factor.lower_factor), wp.float64), *(int32_view(np, values) for values in (
            dof_start, dof_end, column_start, dofs.reshape(-1), scratch_start)), int(width),
        warp_view(scratch, wp.float64), warp_view(block_rows.reshape(-1), wp.float64)])
    return block_rows


def _greedy_colouring(xp, n, first, second, max_colours: int):
    """Colour (n,) of every contact such that no pair (first[i], second[i]) has one colour, by rounds of
    independent sets (a contact joins the round's set when its priority beats that of every uncoloured
    neighbour; contact_kernels.colour_round, a launch per round).  Priorities are the contact's degree (high
    first) with the index as tie-break, so cliques of contacts on one strand take as few colours as their size.
    After max_colours rounds the contacts left (a strand with more contacts than that: a strand lying on the
    ground) are dealt out over the colours in turn; they then share a colour with neighbours (see
    _colour_sharing).  first, second (P,): both orders of every coupled pair, first ascending (a contact's own
    pair may be among them: it never beats itself, and adds one to every degree).  All rounds run
    (those after the last contact is coloured change nothing): no host synchronization."""
    colour = xp.full(n, -1, dtype=xp.int64)
    if n == 0:
        return colour
    degree = histogram(xp, first, n)
    priority = xp.ascontiguousarray(degree.astype(xp.float64) * (n + 1) + (n - xp.arange(n)))
    row_start = xp.concatenate([xp.zeros(1, dtype=xp.int64), xp.cumsum(degree)]).astype(xp.int32)
    inputs = [warp_view(row_start, wp.int32), int32_view(xp, second), warp_view(priority, wp.float64),
              warp_view(colour, wp.int64)]
    device = warp_device_of(colour)
    for round_number in range(max_colours):
        launch(contact_kernels.colour_round, n, [round_number, *inputs], device)
    left = colour < 0
    dealt = (xp.cumsum(left) - 1) % max_colours
    return xp.where(left, dealt, colour)


def _colour_sharing(xp, n, n_strands, colour, incidence):
    """For every contact (n,): the largest number of contacts of its colour on one of its strands (1 when
    the colouring separated it from all its neighbours).  incidence (I,): contact × n_strands + strand of every
    (contact, strand) pair, ascending, once each."""
    pair_contact, pair_strand = incidence // n_strands, incidence % n_strands
    # how many pairs share each pair's (colour, strand): a sorted search of the keys (no data-sized output)
    key = colour[pair_contact] * n_strands + pair_strand
    ordered = xp.sort(key)
    per_pair = (xp.searchsorted(ordered, key, side="right") - xp.searchsorted(ordered, key, side="left")) \
        .astype(xp.float64)
    # pairs are sorted by contact: a contact's largest count is at one of its (one or two) pairs
    first = xp.searchsorted(pair_contact, xp.arange(n), side="left")
    last = xp.searchsorted(pair_contact, xp.arange(n), side="right") - 1
    return xp.maximum(per_pair[xp.minimum(first, per_pair.shape[0] - 1)], per_pair[xp.maximum(last, 0)])


__all__ = ["DelassusOperator"]

"""Length-preserving search path for the DER Newton iteration.

A Newton direction d of the velocity-form implicit Euler problem is the solution of a linear model.  When
edges turn far within a step (hair falling or swinging at frame-rate steps), following the straight line
v + α d lengthens every turning edge by l(1 − cos φ) — a second-order error that the linear model cannot
see, and that very stiff stretching (E·A ≈ 24 N for 50 µm hair, 4·10³ N/m per 6 mm segment) turns into
a huge energy.  The line search then cuts α to a fraction, and Newton crawls (about 20 iterations per
8 ms step for 12 cm hair).

This module bends the search path instead: the trial point's edges keep the directions of v + α d but
get the lengths the linear model predicts, |e_k| + t_k · (e − e_k) (t_k, e_k: the edges at the current
iterate), and the strand is rebuilt from its root by summing the edges.  The path agrees with the straight
line to first order in α (so Armijo backtracking stays valid and the iteration's fixed points are
unchanged: d = 0 gives the current iterate back), and it only removes the rotation-induced stretching.
The same idea as follow-the-leader inextensibility (Müller et al. 2012), here as a retraction inside a
convergent Newton method instead of a position correction that changes the physics.

Applied only to strands whose kinematic vertices form a prefix of the strand (clamped or pinned roots):
a strand pinned further along would be pulled off its pins by the rebuild.  The caller can also leave out
strands (those that carry contact impulses keep the straight path of seed Algorithm 2).
"""

from __future__ import annotations

import warp as wp

from ...kernels import cuda_layout_on, int32_view, launch_split, warp_device_of, warp_view
from ...kernels.segments import segment_sums
from .kernels import retraction as retraction_kernels
from .frames import row_lengths
from .model import index_view

# the predicted length of an edge is kept at least this fraction of its current length (a very long
# trial step, far outside the linear model, would otherwise ask for a negative length)
SHORTEST_EDGE_FRACTION = 0.5


class LengthPreservingPath:
    """Bends trial velocities of a step with positions q_t + h v onto edge lengths predicted to first order.

    Built once per time step: x_t (N, 3) [m] the start positions, h [s] the step, fixed_dofs (F,) the
    kinematic DOFs of the step."""

    def __init__(self, xp, model, x_t, h: float, fixed_dofs):
        self.xp, self.model, self.x_t, self.h = xp, model, x_t, h
        self.device = warp_device_of(x_t)
        dof_fixed = xp.zeros(model.n_dofs, dtype=bool)
        dof_fixed[fixed_dofs] = True
        vertex_fixed = dof_fixed[model.position_dofs].any(axis=1)
        strand = model.vertex_strand
        first = model.strand_offsets[:-1]
        local = xp.arange(model.n_vertices) - first[strand]
        strand_vertices = index_view(model, "strand_offsets")
        fixed_count = segment_sums(xp, vertex_fixed.astype(x_t.dtype), strand_vertices)
        in_prefix = vertex_fixed & (local < fixed_count[strand])
        prefix_count = segment_sums(xp, in_prefix.astype(x_t.dtype), strand_vertices)
        self.strand_eligible = prefix_count == fixed_count            # (S,)
        self.vertex_fixed = vertex_fixed                                # (N,)
        # an edge between two kinematic vertices keeps its prescribed motion exactly
        self.edge_kinematic = vertex_fixed[model.edge_vertex] & vertex_fixed[model.edge_vertex + 1]
        self._views = {"eligible": int32_view(xp, self.strand_eligible), "vertex_fixed": int32_view(xp, vertex_fixed),
                       "edge_kinematic": int32_view(xp, self.edge_kinematic)}
        self.vertex_fixed_view, self.edge_kinematic_view = self._views["vertex_fixed"], self._views["edge_kinematic"]

    def edges_at(self, v_current):
        """The edges (E, 3) [m] and their lengths (E,) at velocities v_current: the point a line search
        starts from, shared by all of its trials (bend's `current`)."""
        positions = self.x_t + self.h * self.model.gather_positions(v_current)
        edges = positions[self.model.edge_vertex + 1] - positions[self.model.edge_vertex]
        return edges, row_lengths(self.xp, edges)

    def bend(self, v_trial, current, strands=None):
        """Trial velocities (n_dofs,) moved onto the path from the point `current` (edges_at of the search's
        start velocities); strands (S,) bool limits it to those strands (None: every eligible strand).  Twist
        rates and kinematic vertices are returned unchanged. One Warp launch, a thread per strand
        (kernels.retraction.bend_path: the edges summed from each strand's root)."""
        xp, model, h = self.xp, self.model, self.h
        eligible = self.strand_eligible if strands is None else self.strand_eligible & strands
        if not cuda_layout_on(self.device) and not bool(eligible.any()):
            return v_trial      # on a device the launch runs: a strand not eligible keeps its velocities
        current_edges, current_length = current
        out = xp.array(v_trial, dtype=xp.float64, order="C")
        launch_split(retraction_kernels.bend_path, model.n_strands, warp_device_of(out), [], [
            self._views["eligible"] if strands is None else int32_view(xp, eligible), index_view(model, "strand_offsets"),
            index_view(model, "vertex_dof"), self._views["vertex_fixed"], self._views["edge_kinematic"],
            warp_view(xp.ascontiguousarray(self.x_t, dtype=xp.float64), wp.vec3d), float(h),
            warp_view(xp.ascontiguousarray(current_edges, dtype=xp.float64), wp.vec3d),
            warp_view(xp.ascontiguousarray(current_length, dtype=xp.float64), wp.float64),
            SHORTEST_EDGE_FRACTION, warp_view(xp.ascontiguousarray(v_trial, dtype=xp.float64), wp.float64),
            warp_view(out, wp.float64)])
        return out

__all__ = ["LengthPreservingPath", "SHORTEST_EDGE_FRACTION"]

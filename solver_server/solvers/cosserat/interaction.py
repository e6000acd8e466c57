"""Strand–strand interaction with swept spheres (seed 002 §4.3, after Choe et al.).

Every segment is a swept-sphere volume (a capsule) with an inner and an outer radius given per
strand (or per cluster: a guide strand carries its wisp's radii). For two segments of different
strands (or of the same strand more than two segments apart) at closest distance d:

    P_inner = max(0, r_in,i + r_in,j − d),   F_s = K · P_inner · dir            (eq. 4.3)
    P_outer = max(0, r_out,i + r_out,j − d), F_viscous = −D · P_outer · Δv        (eq. 4.4)

dir the unit vector from the other segment's closest point, Δv the relative velocity of the
closest points. The forces are split onto the segment end nodes by the closest-point parameter.
The force pass runs on the backend's arrays (``xp``: numpy or cupy); nothing is copied to the host.
Broad phase: a Warp hash grid over segment midpoints (kernels.pairs: counted, then filled, with
neighbours along a strand skipped inside the query), with a Verlet list: candidate pairs are gathered
with a margin and reused until some node has moved more than half the margin. On the CPU the reuse decision
is read back and a rebuild sizes its list; on a device (CUDA's layout) the list lives in a buffer allocated at
the first step with room to grow, the decision and the count stay on the device (``kernels.pairs.pairs_into``),
and a list that outgrew its buffer is read once per frame (``take_dropped``) and built again, larger, at the
next step. With the segments' lengths given (inextensible strands) the list's reach is fixed; without them it
is read from the positions at each rebuild. Candidate pairs out of reach are not filtered out of the force
pass (that would be a data-sized sync): their forces are exact zeros, and so are those of unused buffer rows.
Segments of one strand closer along it than the interaction reach are never paired (they are neighbours, not a
collision).
Closest points of two segments: Ericson, Real-Time Collision Detection §5.1.9, vectorized.
"""

from __future__ import annotations

import numpy as np

from ...kernels import cuda_layout_on, warp_device_of
from ...kernels.pairs import ChainSpherePairs
from ..strand_geometry import segment_closest_parameters


MIN_CAPACITY = 1024
"""The fewest candidate pairs a device's buffer holds."""


class SweptSphereInteraction:
    """Pairwise swept-sphere forces between the segments of all strands of one object.

    inner_radius, outer_radius: (S,) per strand [m] (or scalars); stiffness K [N/m]; damping D
    [N·s/m²]; segment_valid (S, M) bool (host); xp: the array namespace of the positions (numpy or cupy);
    segment_lengths: (S, M) host [m] when the strands keep their segments' lengths, else None. The Verlet list
    (``verlet_list``, ``restore_verlet_list``) holds arrays of ``xp``.
    """

    def __init__(self, inner_radius, outer_radius, stiffness: float, damping: float, segment_valid, xp=np,
                 segment_lengths=None):
        self.xp = xp
        valid = np.asarray(segment_valid, bool)
        strands, segments = valid.shape
        inner = np.broadcast_to(np.asarray(inner_radius, np.float64), (strands,)).copy()
        outer = np.broadcast_to(np.asarray(outer_radius, np.float64), (strands,)).copy()
        self.stiffness = float(stiffness)
        self.damping = float(damping)
        self.margin = 0.5 * float(outer.max()) + 1e-6
        self.largest_outer = float(outer.max())
        strand_of, segment_of = np.nonzero(valid)
        self.segment_valid = xp.asarray(valid)
        self.inner, self.outer = xp.asarray(inner), xp.asarray(outer)
        self.strand_of, self.segment_of = xp.asarray(strand_of), xp.asarray(segment_of)
        self._pair_finder = ChainSpherePairs(xp.asarray(strand_of), xp.asarray(segment_of), xp)
        self._fixed_reach = None
        if segment_lengths is not None and len(strand_of):
            lengths = np.asarray(segment_lengths, np.float64)[strand_of, segment_of]
            self._fixed_reach = self._reach_and_along(float(lengths.max()), float(lengths.min()))
        self._device = warp_device_of(xp.zeros(1))
        self._pairs = None          # the CPU's list (n, 2) int64, or the device's buffer (capacity, 2) int32
        self._count = None          # the device's list length (0-d), None on the CPU
        self._anchor = None
        self._dropped = None        # the device's count of pairs that did not fit, read once per frame

    @property
    def resident(self) -> bool:
        """Whether the list lives on the device (CUDA's layout, decided when a step runs)."""
        return cuda_layout_on(self._device) and self._fixed_reach is not None

    def _reach_and_along(self, longest: float, shortest: float) -> tuple[float, int]:
        """The list's reach [m] (the longest segment plus both outer radii and the margin) and the neighbours along
        a strand within it (never paired)."""
        reach = longest + 2.0 * self.largest_outer + self.margin
        return reach, int(min(max(2.0, np.ceil(reach / max(shortest, 1e-12))), 2 ** 30))

    def _reach(self, start, end) -> tuple[float, int]:
        if self._fixed_reach is not None:
            return self._fixed_reach
        xp = self.xp
        length = xp.sqrt(xp.sum((end - start) ** 2, axis=1))
        return self._reach_and_along(float(xp.max(length)), float(xp.min(length)))

    def _moved_beyond_margin(self, positions):
        """Whether some node moved more than half the margin since the list was built (a 0-d device bool)."""
        xp = self.xp
        return xp.sqrt(xp.max(xp.sum((positions - self._anchor) ** 2, axis=-1))) >= 0.5 * self.margin

    def _candidates(self, positions, start, end):
        """(candidate segment pairs (n, 2) (indices into the valid segments), (n,) bool: the rows in use, or None
        when all are), refreshed when needed."""
        if self.resident:
            return self._device_candidates(positions, start, end)
        xp = self.xp
        if self._pairs is not None and not bool(self._moved_beyond_margin(positions)):
            return self._pairs, None
        reach, along = self._reach(start, end)
        pairs = self._grid_candidates(xp.ascontiguousarray(0.5 * (start + end)), reach, along)
        self._pairs, self._anchor = pairs, positions.copy()
        return pairs, None

    def _device_candidates(self, positions, start, end):
        """``_candidates`` on a device: the list kept in its buffer or rebuilt into it, decided on the device."""
        xp = self.xp
        if self._count is None:
            # the first step, the first after a restored list, or the first after the list outgrew its buffer: the
            # list sized on the host
            if self._pairs is None:
                reach, along = self._fixed_reach
                self._pairs = self._grid_candidates(xp.ascontiguousarray(0.5 * (start + end)), reach, along)
                self._anchor = positions.copy()
            self._install(self._pairs, self._anchor)
        else:
            reach, along = self._fixed_reach
            rebuild = xp.ascontiguousarray(self._moved_beyond_margin(positions).astype(xp.int32).reshape(1))
            radius = 0.5 * reach
            midpoints = xp.ascontiguousarray(0.5 * (start + end))
            built = self._pair_finder.pairs_into(self._pairs, rebuild, midpoints,
                                                 xp.full(midpoints.shape[0], radius), radius, along)
            taken = rebuild[0] > 0
            capacity = self._pairs.shape[0]
            self._dropped = self._dropped + xp.where(taken, xp.maximum(built - capacity, 0), 0)
            self._count = xp.where(taken, xp.minimum(built, capacity), self._count)
            self._anchor = xp.where(taken, positions, self._anchor)
        return self._pairs, xp.arange(self._pairs.shape[0]) < self._count

    def _install(self, pairs, anchor):
        """The device's buffer with room for twice the list ``pairs`` (n, 2) built at ``anchor`` (S, P, 3) [m]."""
        xp = self.xp
        count = int(pairs.shape[0])
        buffer = xp.zeros((max(2 * count, MIN_CAPACITY), 2), dtype=xp.int32)
        buffer[:count] = pairs
        self._pairs, self._anchor = buffer, anchor
        self._count = xp.asarray(count, dtype=xp.int64)
        self._dropped = xp.zeros((), dtype=xp.int64)

    def take_dropped(self) -> int:
        """Candidate pairs that did not fit the device's buffer since the last call (one read, at a frame's end);
        a list that did not fit is built again, in a larger buffer, at the next step. 0 on the CPU."""
        if self._dropped is None:
            return 0
        dropped = int(self._dropped)
        if dropped:
            self._pairs, self._count = None, None
        else:
            self._dropped = self.xp.zeros((), dtype=self.xp.int64)
        return dropped

    def verlet_list(self):
        """(pairs (n, 2), anchor (S, P, 3) [m]) of the list in use, or None before the first step (a checkpoint's
        copy, read at a frame's end)."""
        if self._pairs is None:
            return None
        if self._count is None:
            return self._pairs, self._anchor
        return self._pairs[:int(self._count)], self._anchor

    def restore_verlet_list(self, pairs, anchor) -> None:
        """The list ``verlet_list`` returned (pairs (n, 2), anchor (S, P, 3) [m], arrays of ``xp``), or none (a
        device's buffer is made from it at the next step)."""
        self._pairs, self._anchor, self._count, self._dropped = pairs, anchor, None, None

    def _grid_candidates(self, midpoints, reach: float, along: int):
        """(n, 2) int64 pairs (i < j, sorted) of valid segments whose midpoints (n, 3) are within ``reach`` [m]
        and that are not neighbours along one strand (``along`` segments or fewer apart): kernels.pairs with
        spheres of radius reach / 2 around the midpoints."""
        xp = self.xp
        radius = 0.5 * reach
        return self._pair_finder.pairs(midpoints, xp.full(midpoints.shape[0], radius), radius, along)

    def forces(self, positions, velocities):
        """Node forces (S, P, 3) [N] and the number of interacting segment pairs (a device scalar).

        positions, velocities: (S, P, 3) arrays of ``xp`` [m], [m/s]."""
        xp = self.xp
        strands, points = positions.shape[:2]
        result = xp.zeros((strands * points, 3))
        strand, segment = self.strand_of, self.segment_of
        start = positions[strand, segment]
        end = positions[strand, segment + 1]
        pairs, in_use = self._candidates(positions, start, end)
        if len(pairs) == 0:
            return result.reshape(strands, points, 3), 0
        i, j = pairs[:, 0], pairs[:, 1]
        s, t = segment_closest_parameters(xp, start[i], end[i], start[j], end[j])
        on_i = start[i] + s[:, None] * (end[i] - start[i])
        on_j = start[j] + t[:, None] * (end[j] - start[j])
        gap = on_i - on_j
        distance = xp.sqrt(xp.sum(gap * gap, axis=1))
        inner = xp.maximum(0.0, self.inner[strand[i]] + self.inner[strand[j]] - distance)
        outer = xp.maximum(0.0, self.outer[strand[i]] + self.outer[strand[j]] - distance)
        active = outer > 0.0 if in_use is None else (outer > 0.0) & in_use
        direction = gap / xp.maximum(distance, 1e-12)[:, None]
        node_i = strand[i] * points + segment[i]
        node_j = strand[j] * points + segment[j]
        flat_velocities = velocities.reshape(-1, 3)
        v_i = (1.0 - s)[:, None] * flat_velocities[node_i] + s[:, None] * flat_velocities[node_i + 1]
        v_j = (1.0 - t)[:, None] * flat_velocities[node_j] + t[:, None] * flat_velocities[node_j + 1]
        force = self.stiffness * inner[:, None] * direction - self.damping * outer[:, None] * (v_i - v_j)
        force = xp.where(active[:, None], force, 0.0)       # out of reach: exactly zero, no data-sized sync
        for nodes, weights, sign in ((node_i, 1.0 - s, 1.0), (node_i + 1, s, 1.0),
                                     (node_j, 1.0 - t, -1.0), (node_j + 1, t, -1.0)):
            xp.add.at(result, nodes, sign * weights[:, None] * force)
        return result.reshape(strands, points, 3), xp.count_nonzero(active)

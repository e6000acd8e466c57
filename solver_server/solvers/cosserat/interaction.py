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
with a margin and reused until some node has moved more than half the margin. Per step the reuse decision
is one scalar read back; a rebuild adds three (the longest/shortest segment, the number of pairs).
Candidate pairs out of reach are not filtered out of the force pass (that would be a data-sized sync):
their forces are exact zeros. Segments of one strand closer along it than the interaction reach are
never paired (they are neighbours, not a collision).
Closest points of two segments: Ericson, Real-Time Collision Detection §5.1.9, vectorized.
"""

from __future__ import annotations

import numpy as np

from ...kernels.pairs import ChainSpherePairs
from ..strand_geometry import segment_closest_parameters


class SweptSphereInteraction:
    """Pairwise swept-sphere forces between the segments of all strands of one object.

    inner_radius, outer_radius: (S,) per strand [m] (or scalars); stiffness K [N/m]; damping D
    [N·s/m²]; segment_valid (S, M) bool (host); xp: the array namespace of the positions (numpy or cupy).
    The Verlet cache (``_pairs`` (n, 2) int64, ``_anchor`` (S, P, 3) [m]) holds arrays of ``xp``.
    """

    def __init__(self, inner_radius, outer_radius, stiffness: float, damping: float, segment_valid, xp=np):
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
        self._pairs = None
        self._anchor = None

    def _candidates(self, positions, start, end):
        """(n, 2) candidate segment pairs (indices into the valid segments), refreshed when needed."""
        xp = self.xp
        if self._pairs is not None:
            moved = float(xp.sqrt(xp.max(xp.sum((positions - self._anchor) ** 2, axis=-1))))
            if moved < 0.5 * self.margin:
                return self._pairs
        length = xp.sqrt(xp.sum((end - start) ** 2, axis=1))
        reach = float(xp.max(length)) + 2.0 * self.largest_outer + self.margin
        along = int(min(max(2.0, np.ceil(reach / max(float(xp.min(length)), 1e-12))), 2 ** 30))
        pairs = self._grid_candidates(xp.ascontiguousarray(0.5 * (start + end)), reach, along)
        self._pairs, self._anchor = pairs, positions.copy()
        return pairs

    def _grid_candidates(self, midpoints, reach: float, along: int):
        """(n, 2) int64 pairs (i < j, sorted) of valid segments whose midpoints (n, 3) are within ``reach`` [m]
        and that are not neighbours along one strand (``along`` segments or fewer apart): kernels.pairs with
        spheres of radius reach / 2 around the midpoints."""
        xp = self.xp
        radius = 0.5 * reach
        return self._pair_finder.pairs(midpoints, xp.full(midpoints.shape[0], radius), radius, along)

    def forces(self, positions, velocities):
        """Node forces (S, P, 3) [N] and the number of interacting segment pairs.

        positions, velocities: (S, P, 3) arrays of ``xp`` [m], [m/s]."""
        xp = self.xp
        strands, points = positions.shape[:2]
        result = xp.zeros((strands * points, 3))
        strand, segment = self.strand_of, self.segment_of
        start = positions[strand, segment]
        end = positions[strand, segment + 1]
        pairs = self._candidates(positions, start, end)
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
        active = outer > 0.0
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
        return result.reshape(strands, points, 3), int(xp.count_nonzero(active))

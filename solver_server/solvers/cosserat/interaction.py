"""Strand–strand interaction with swept spheres (seed 002 §4.3, after Choe et al.).

Every segment is a swept-sphere volume (a capsule) with an inner and an outer radius given per
strand (or per cluster: a guide strand carries its wisp's radii). For two segments of different
strands (or of the same strand more than two segments apart) at closest distance d:

    P_inner = max(0, r_in,i + r_in,j − d),   F_s = K · P_inner · dir            (eq. 4.3)
    P_outer = max(0, r_out,i + r_out,j − d), F_viscous = −D · P_outer · Δv        (eq. 4.4)

dir the unit vector from the other segment's closest point, Δv the relative velocity of the
closest points. The forces are split onto the segment end nodes by the closest-point parameter.
Broad phase: backend.neighbour_pairs over segment midpoints on host arrays (the force pass runs on
the host; a CUDA backend copies positions over),
with a Verlet list: candidate pairs are gathered with a margin and reused until some node has moved
more than half the margin. Segments of one strand closer along it than the interaction reach are
never paired (they are neighbours, not a collision).
Closest points of two segments: Ericson, Real-Time Collision Detection §5.1.9, vectorized.
"""

from __future__ import annotations

import numpy as np

from ...backend import neighbour_pairs


def closest_points_between_segments(p1, q1, p2, q2):
    """Parameters s, t (n,) in [0, 1] of the closest points p1 + s(q1 − p1), p2 + t(q2 − p2)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a = np.sum(d1 * d1, axis=1)
    e = np.sum(d2 * d2, axis=1)
    f = np.sum(d2 * r, axis=1)
    c = np.sum(d1 * r, axis=1)
    b = np.sum(d1 * d2, axis=1)
    denominator = a * e - b * b
    safe_a = np.maximum(a, 1e-300)
    safe_e = np.maximum(e, 1e-300)
    s = np.where(denominator > 1e-12 * np.maximum(a * e, 1e-300),
                 np.clip((b * f - c * e) / np.maximum(denominator, 1e-300), 0.0, 1.0), 0.0)
    t = (b * s + f) / safe_e
    s = np.where(t < 0.0, np.clip(-c / safe_a, 0.0, 1.0), np.where(t > 1.0, np.clip((b - c) / safe_a, 0.0, 1.0), s))
    t = np.clip(t, 0.0, 1.0)
    return s, t


class SweptSphereInteraction:
    """Pairwise swept-sphere forces between the segments of all strands of one object.

    inner_radius, outer_radius: (S,) per strand [m] (or scalars); stiffness K [N/m]; damping D
    [N·s/m²]; segment_valid (S, M) bool.
    """

    def __init__(self, inner_radius, outer_radius, stiffness: float, damping: float, segment_valid):
        self.segment_valid = np.asarray(segment_valid, bool)
        strands, segments = self.segment_valid.shape
        self.inner = np.broadcast_to(np.asarray(inner_radius, np.float64), (strands,)).copy()
        self.outer = np.broadcast_to(np.asarray(outer_radius, np.float64), (strands,)).copy()
        self.stiffness = float(stiffness)
        self.damping = float(damping)
        strand_of, segment_of = np.nonzero(self.segment_valid)
        self.strand_of, self.segment_of = strand_of, segment_of
        self.margin = 0.5 * float(self.outer.max()) + 1e-6
        self._pairs = None
        self._anchor = None

    def _candidates(self, positions, start, end):
        """(n, 2) candidate segment pairs (indices into the valid segments), refreshed when needed."""
        if self._pairs is not None:
            moved = np.linalg.norm(positions - self._anchor, axis=-1).max()
            if moved < 0.5 * self.margin:
                return self._pairs
        length = np.linalg.norm(end - start, axis=1)
        reach = float(length.max()) + 2.0 * float(self.outer.max()) + self.margin
        pairs = neighbour_pairs(np, 0.5 * (start + end), reach)
        strand, segment = self.strand_of, self.segment_of
        if len(pairs):
            i, j = pairs[:, 0], pairs[:, 1]
            along = np.ceil(reach / max(float(length.min()), 1e-12))
            neighbours = (strand[i] == strand[j]) & (np.abs(segment[i] - segment[j]) <= max(2.0, along))
            pairs = pairs[~neighbours]
        self._pairs, self._anchor = pairs, positions.copy()
        return pairs

    def forces(self, positions, velocities):
        """Node forces (S, P, 3) [N] and the number of interacting segment pairs.

        positions, velocities: (S, P, 3) host arrays [m], [m/s]."""
        strands, points = positions.shape[:2]
        result = np.zeros((strands * points, 3))
        strand, segment = self.strand_of, self.segment_of
        start = positions[strand, segment]
        end = positions[strand, segment + 1]
        pairs = self._candidates(positions, start, end)
        if len(pairs) == 0:
            return result.reshape(strands, points, 3), 0
        i, j = pairs[:, 0], pairs[:, 1]
        s, t = closest_points_between_segments(start[i], end[i], start[j], end[j])
        on_i = start[i] + s[:, None] * (end[i] - start[i])
        on_j = start[j] + t[:, None] * (end[j] - start[j])
        gap = on_i - on_j
        distance = np.linalg.norm(gap, axis=1)
        inner = np.maximum(0.0, self.inner[strand[i]] + self.inner[strand[j]] - distance)
        outer = np.maximum(0.0, self.outer[strand[i]] + self.outer[strand[j]] - distance)
        active = outer > 0.0
        if not np.any(active):
            return result.reshape(strands, points, 3), 0
        i, j, s, t, gap, distance, inner, outer = (a[active] for a in (i, j, s, t, gap, distance, inner, outer))
        direction = gap / np.maximum(distance, 1e-12)[:, None]
        node_i = strand[i] * points + segment[i]
        node_j = strand[j] * points + segment[j]
        v_i = (1.0 - s)[:, None] * velocities.reshape(-1, 3)[node_i] + s[:, None] * velocities.reshape(-1, 3)[node_i + 1]
        v_j = (1.0 - t)[:, None] * velocities.reshape(-1, 3)[node_j] + t[:, None] * velocities.reshape(-1, 3)[node_j + 1]
        force = self.stiffness * inner[:, None] * direction - self.damping * outer[:, None] * (v_i - v_j)
        for nodes, weights, sign in ((node_i, 1.0 - s, 1.0), (node_i + 1, s, 1.0),
                                     (node_j, 1.0 - t, -1.0), (node_j + 1, t, -1.0)):
            np.add.at(result, nodes, sign * weights[:, None] * force)
        return result.reshape(strands, points, 3), int(len(i))

"""Child strands from simulated guides (seed 002 §4.2), root-relative and vectorized.

For child point j at arc-length fraction t_j and its two guides g (weights w_g, eq. 4.2):

    x_j = root_now + Σ_g w_g [ (g(t_j) − g_root)_now + R (c_rel,j − (g(t_j) − g_root)_rest) ]

with c_rel,j = x_j,rest − root_rest and R the rotation of the child's root frame (object rotation or
emitter triangle frame). At t = 0 both bracketed terms vanish, so a child root stays exactly on its
own root point; at rest (guides at rest, R = I) every child is its own rest shape.
"""

from __future__ import annotations

import numpy as np

from .layout import StrandLayout
from .selection import GuideAssignment, arc_length_samples


# an interpolated child's segments stay within this ratio of their rest length (either way)
CHILD_LENGTH_RATIO = 1.1


class GuideInterpolator:
    """Interpolates all strands of an object from its guide strands.

    rest: (S, P, 3) padded rest strands; layout; assignment: GuideAssignment (guide strand indices,
    (S, 2) guide slots and weights).
    """

    def __init__(self, rest, layout: StrandLayout, assignment: GuideAssignment, xp=np):
        self.xp = xp
        self.layout = layout
        self.assignment = assignment
        rest = np.asarray(rest, np.float64)
        guide_rest = rest[assignment.guides]
        guide_layout = StrandLayout(offsets=np.zeros(1, np.int64), gather=layout.gather[assignment.guides],
                                    valid=layout.valid[assignment.guides])
        # arc-length fraction of every child point, then where it falls on each of its two guides
        segment = np.linalg.norm(np.diff(rest, axis=1), axis=-1) * layout.segment_valid
        cumulative = np.concatenate([np.zeros((len(rest), 1)), np.cumsum(segment, axis=1)], axis=1)
        fractions = cumulative / np.maximum(cumulative[:, -1:], 1e-300)                      # (S, P)
        index = np.empty((len(rest), 2, rest.shape[1]), np.int64)
        fraction = np.empty(index.shape)
        for k in range(2):                                # the two guide slots of each child
            slots = assignment.pairs[:, k]
            sub = StrandLayout(offsets=guide_layout.offsets, gather=guide_layout.gather[slots],
                               valid=guide_layout.valid[slots])
            index[:, k], fraction[:, k] = arc_length_samples(guide_rest[slots], sub, fractions)
        guide_points = rest.shape[1]
        self.flat_index = xp.asarray(assignment.pairs[:, :, None] * guide_points + index)      # (S, 2, P)
        self.fraction = xp.asarray(fraction)
        self.weights = xp.asarray(assignment.weights)
        guide_relative_rest = self._sample(xp.asarray(guide_rest))                           # (S, 2, P, 3)
        child_relative = xp.asarray(rest - rest[:, :1])
        self.rest_difference = child_relative[:, None] - guide_relative_rest               # (S, 2, P, 3)
        self.rest_lengths = xp.asarray(np.linalg.norm(np.diff(rest, axis=1), axis=-1))      # (S, P − 1) [m]

    def _sample(self, guide_points):
        """Root-relative guide points at the children's fractions: (S, 2, P, 3)."""
        relative = (guide_points - guide_points[:, :1]).reshape(-1, 3)                     # (K·Pg, 3)
        a = relative[self.flat_index]
        b = relative[self.flat_index + 1]
        return a + self.fraction[..., None] * (b - a)

    def interpolate(self, guide_points, child_roots, rotations=None):
        """All strands (S, P, 3) [m] from guide strands (K, Pg, 3), child roots (S, 3) and optional
        root-frame rotations (S, 3, 3) (identity when None).

        Each child is the weighted blend of its two guides' root-relative shapes (plus its own rest offset
        from them), and then keeps its own segment lengths: where the two guides part (one each side of an
        ear, one falling forward and one back) the plain blend of their points is shorter than either, down
        to a fraction of the rest length; every blended segment is brought back within CHILD_LENGTH_RATIO of
        the child's rest length and the strand rebuilt from its root (follow the leader): where the guides
        agree the blend is kept as it is, where they part only the directions are blended."""
        xp = self.xp
        difference = self.rest_difference
        if rotations is not None:
            difference = xp.einsum("sij,skpj->skpi", xp.asarray(rotations), difference)
        shaped = self._sample(guide_points) + difference
        blended = xp.asarray(child_roots)[:, None, :] + xp.einsum("sk,skpd->spd", self.weights, shaped)
        return self.with_rest_lengths(blended)

    def with_rest_lengths(self, strands):
        """Strands (S, P, 3) [m] rebuilt from their first point with every segment's direction kept and its
        length brought within [1 / CHILD_LENGTH_RATIO, CHILD_LENGTH_RATIO] × its rest length (a zero-length
        segment stays zero)."""
        xp = self.xp
        segments = strands[:, 1:] - strands[:, :-1]
        length = xp.sqrt(xp.sum(segments * segments, axis=-1))
        wanted = xp.clip(length, self.rest_lengths / CHILD_LENGTH_RATIO, self.rest_lengths * CHILD_LENGTH_RATIO)
        scale = xp.where(length > 1e-15, wanted / xp.maximum(length, 1e-15), 0.0)
        rebuilt = strands[:, :1] + xp.cumsum(segments * scale[..., None], axis=1)
        return xp.concatenate((strands[:, :1], rebuilt), axis=1)

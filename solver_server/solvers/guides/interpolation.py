"""Child strands from simulated guides (seed 002 §4.2), root-relative and vectorized.

For child point j at arc-length fraction t_j and its two guides g (weights w_g, eq. 4.2):

    x_j = root_now + R_c Σ_g w_g [ Q_g R_gᵀ (g(t_j) − g_root)_now + (c_rel,j − Q_g (g(t_j) − g_root)_rest) ]

with c_rel,j = x_j,rest − root_rest, R_c and R_g the rotations of the child's and the guide's root frames since
rest (object rotation or emitter triangle frame), and Q_g the shortest rotation that turns the guide's rest
root direction (its first segment, which leaves the scalp) onto the child's. The guide's shape is carried to
the child's own patch of scalp: a guide that lies down over the side of a head lays its child down over the
child's part of the head, not along the guide's direction through it. At t = 0 both bracketed terms vanish, so
a child root stays exactly on its own root point; at rest (guides at rest, R = I) every child is its own rest
shape; a rigid motion of head and hair (R_c = R_g = R, guides carried by R) carries every child by R.
"""

from __future__ import annotations

import numpy as np

from .layout import StrandLayout
from .selection import GuideAssignment, arc_length_samples


PARTING_SHARE = 0.5   # a blended child segment shorter than this share of its length leans to its heavier guide


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
        # the shortest rotation from each guide's rest root direction onto its child's (S, 2, 3, 3)
        direction = _root_directions(rest, layout)
        self.guide_strands = xp.asarray(assignment.guides[assignment.pairs])                 # (S, 2)
        self.transfer = xp.asarray(_shortest_rotations(direction[assignment.guides[assignment.pairs]],
                                                       direction[:, None, :]))
        guide_samples_rest = self._sample(xp.asarray(guide_rest))                              # (S, 2, P, 3)
        self.guide_chords_rest = _chords(xp, guide_samples_rest)                               # (S, 2, P − 1)
        guide_relative_rest = xp.einsum("skij,skpj->skpi", self.transfer, guide_samples_rest)
        child_relative = xp.asarray(rest - rest[:, :1])
        self.rest_difference = child_relative[:, None] - guide_relative_rest               # (S, 2, P, 3)
        self.rest_lengths = xp.asarray(np.linalg.norm(np.diff(rest, axis=1), axis=-1))      # (S, P − 1) [m]
        self.heavier = xp.asarray(np.argmax(assignment.weights, axis=1))                    # (S,) guide slot

    def _sample(self, guide_points):
        """Root-relative guide points at the children's fractions: (S, 2, P, 3)."""
        relative = (guide_points - guide_points[:, :1]).reshape(-1, 3)                     # (K·Pg, 3)
        a = relative[self.flat_index]
        b = relative[self.flat_index + 1]
        return a + self.fraction[..., None] * (b - a)

    def interpolate(self, guide_points, child_roots, rotations=None):
        """All strands (S, P, 3) [m] from guide strands (K, Pg, 3), child roots (S, 3) and optional root-frame
        rotations (S, 3, 3) of every strand since rest (identity when None): ``shapes``' strands."""
        return self.shapes(guide_points, child_roots, rotations)[0]

    def shapes(self, guide_points, child_roots, rotations=None):
        """(strands (S, P, 3) [m], mean (S, P, 3) [m]) from guide strands (K, Pg, 3), child roots (S, 3) and
        optional root-frame rotations (S, 3, 3) of every strand since rest (identity when None). ``mean`` is the
        weighted mean of the two guides' shapes carried to the child (the blend before its parting lean and its
        lengths): it moves no farther in a frame than the farther of them.

        Each child is the weighted blend of its two guides' root-relative shapes carried to its own root
        (module docstring; plus its own rest offset from them), and then stretches as its guides do: where
        the two guides part (one each side of an ear, one falling forward and one back) the plain blend of
        their points is shorter than either, down to a fraction of the rest length; every blended segment
        keeps its direction and takes its rest length times its guides' blended stretch over the same stretch
        of arc length (``with_lengths``), the strand rebuilt from its root (follow the leader): only the
        directions are blended."""
        xp = self.xp
        sampled = self._sample(guide_points)                                                 # (S, 2, P, 3)
        if rotations is not None:
            rotations = xp.asarray(rotations)
            sampled = xp.einsum("skji,skpj->skpi", rotations[self.guide_strands], sampled)     # R_gᵀ
        shaped = xp.einsum("skij,skpj->skpi", self.transfer, sampled) + self.rest_difference
        stretch = _chords(xp, sampled) / xp.maximum(self.guide_chords_rest, 1e-300)
        stretch = xp.where(self.guide_chords_rest > 0.0, stretch, 1.0)                        # (S, 2, P − 1)
        lengths = self.rest_lengths * xp.einsum("sk,skp->sp", self.weights, stretch)
        mean = xp.einsum("sk,skpd->spd", self.weights, shaped)
        local = self._leaning(mean, shaped, lengths)
        if rotations is not None:
            local = xp.einsum("sij,spj->spi", rotations, local)
            mean = xp.einsum("sij,spj->spi", rotations, mean)
        roots = xp.asarray(child_roots)[:, None, :]
        return self.with_lengths(roots + local, lengths), roots + mean

    def _leaning(self, local, shaped, lengths):
        """Blended root-relative strands (S, P, 3) [m] whose segments shorter than PARTING_SHARE of their
        ``lengths`` (S, P − 1) [m] lean towards the heavier guide's segment (``shaped`` (S, 2, P, 3): both guides'
        shapes carried to the child), all the way where the blend vanishes. Where the two guides part (one falls
        forward over an ear, the other back), the blend of their segments is the small difference of two
        opposite vectors: its direction, set to full length, would swing with every millimetre the guides
        move, and the child's tip with it. The heavier guide is fixed per child, so the lean is the same from
        frame to frame; a blend of half its length or more is left as it is."""
        xp = self.xp
        segments = local[:, 1:] - local[:, :-1]
        heavy = shaped[xp.arange(shaped.shape[0]), self.heavier]
        heavy_segments = heavy[:, 1:] - heavy[:, :-1]
        heavy_length = xp.sqrt(xp.sum(heavy_segments * heavy_segments, axis=-1))
        blend_length = xp.sqrt(xp.sum(segments * segments, axis=-1))
        share = xp.clip(1.0 - blend_length / xp.maximum(PARTING_SHARE * lengths, 1e-300), 0.0, 1.0)
        lean = (share * lengths / xp.maximum(heavy_length, 1e-300))[..., None] * heavy_segments
        return xp.concatenate((local[:, :1], local[:, :1] + xp.cumsum(segments + lean, axis=1)), axis=1)

    def with_lengths(self, strands, lengths):
        """Strands (S, P, 3) [m] rebuilt from their first point with every segment's direction kept and its
        length set to ``lengths`` (S, P − 1) [m] (a zero-length segment stays zero)."""
        xp = self.xp
        segments = strands[:, 1:] - strands[:, :-1]
        length = xp.sqrt(xp.sum(segments * segments, axis=-1))
        scale = xp.where(length > 1e-15, lengths / xp.maximum(length, 1e-15), 0.0)
        rebuilt = strands[:, :1] + xp.cumsum(segments * scale[..., None], axis=1)
        return xp.concatenate((strands[:, :1], rebuilt), axis=1)


def _chords(xp, samples):
    """Lengths (..., P − 1) [m] between consecutive points of ``samples`` (..., P, 3)."""
    chords = samples[..., 1:, :] - samples[..., :-1, :]
    return xp.sqrt(xp.sum(chords * chords, axis=-1))


def _root_directions(rest, layout: StrandLayout):
    """Unit direction (S, 3) of every strand's first segment at rest (+z for a strand without one)."""
    first = rest[:, 1] - rest[:, 0]
    length = np.linalg.norm(first, axis=-1)
    usable = layout.segment_valid[:, 0] & (length > 1e-15)
    return np.where(usable[:, None], first / np.maximum(length, 1e-300)[:, None], [0.0, 0.0, 1.0])


def _shortest_rotations(source, target):
    """Rotation matrices (..., 3, 3) turning unit vectors ``source`` onto ``target`` (..., 3) about their common
    normal (Rodrigues); the identity for equal directions, a half turn about a perpendicular for opposite ones."""
    source, target = np.broadcast_arrays(np.asarray(source, np.float64), np.asarray(target, np.float64))
    axis = np.cross(source, target)
    sine = np.linalg.norm(axis, axis=-1)
    cosine = np.sum(source * target, axis=-1)
    opposite = (sine < 1e-12) & (cosine < 0.0)
    # opposite directions: any axis perpendicular to the source
    helper = np.where((np.abs(source[..., :1]) < 0.9), [1.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    perpendicular = np.cross(source, helper)
    perpendicular /= np.maximum(np.linalg.norm(perpendicular, axis=-1, keepdims=True), 1e-300)
    unit = np.where(opposite[..., None], perpendicular, axis / np.maximum(sine, 1e-300)[..., None])
    angle = np.arctan2(sine, cosine)
    angle = np.where(opposite, np.pi, angle)
    k = np.zeros(unit.shape[:-1] + (3, 3))
    k[..., 0, 1], k[..., 0, 2], k[..., 1, 2] = -unit[..., 2], unit[..., 1], -unit[..., 0]
    k[..., 1, 0], k[..., 2, 0], k[..., 2, 1] = unit[..., 2], -unit[..., 1], unit[..., 0]
    eye = np.broadcast_to(np.eye(3), k.shape)
    turn = eye + np.sin(angle)[..., None, None] * k + (1.0 - np.cos(angle))[..., None, None] * (k @ k)
    return np.where(((sine < 1e-12) & ~opposite)[..., None, None], eye, turn)

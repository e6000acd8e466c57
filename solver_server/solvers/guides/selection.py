"""Guide hair selection (seed 002 §4.1): k-means over strands with the strand distance of eq. 4.1,
and the two-guide weights of eq. 4.2.

E(g, h) = (1/N) Σ_i minDis(g, v_i): the mean over the N points v_i of strand h of the distance to
the polyline of guide g. Strands are compared after resampling to the same number of points
along their arc length. To keep the cost linear in the number of strands, E is evaluated only
against the ``candidates`` guides whose roots are nearest (scipy cKDTree); the two guides that
weight a child are picked among them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

from .layout import StrandLayout


def resample(padded, layout: StrandLayout, count: int):
    """(S, count, 3) points at equal arc-length fractions t = 0 .. 1 of each strand (S, P, 3)."""
    index, fraction = arc_length_samples(padded, layout, np.linspace(0.0, 1.0, count))
    return _gather(padded, index, fraction)


def arc_length_samples(padded, layout: StrandLayout, fractions):
    """Segment index (S, T) and in-segment fraction (S, T) of arc-length fractions (S, T) or (T,)."""
    segment = np.linalg.norm(np.diff(padded, axis=1), axis=-1) * layout.segment_valid       # (S, P-1)
    cumulative = np.concatenate([np.zeros((len(padded), 1)), np.cumsum(segment, axis=1)], axis=1)
    total = np.maximum(cumulative[:, -1:], 1e-300)
    u = cumulative / total                                                                  # (S, P)
    t = np.broadcast_to(np.asarray(fractions, np.float64), (len(padded), np.shape(fractions)[-1]))
    last = layout.valid.sum(axis=1) - 2                                                     # last segment index
    index = np.minimum((u[:, None, :] <= t[:, :, None]).sum(axis=2) - 1, last[:, None])
    index = np.maximum(index, 0)
    start = np.take_along_axis(u, index, axis=1)
    length = np.take_along_axis(u, index + 1, axis=1) - start
    fraction = np.clip((t - start) / np.where(length > 0, length, 1.0), 0.0, 1.0)
    return index, fraction


def _gather(padded, index, fraction):
    rows = np.arange(len(padded))[:, None]
    a = padded[rows, index]
    b = padded[rows, index + 1]
    return a + fraction[..., None] * (b - a)


def strand_distance(strands, guides):
    """E(g, h) of eq. 4.1 for pairs: strands (..., N, 3) points, guides (..., Q, 3) polylines -> (...)."""
    a = guides[..., None, :-1, :]
    b = guides[..., None, 1:, :]
    p = strands[..., :, None, :]
    ab = b - a
    t = np.clip(np.sum((p - a) * ab, axis=-1) / np.maximum(np.sum(ab * ab, axis=-1), 1e-300), 0.0, 1.0)
    closest = a + t[..., None] * ab
    distance = np.sqrt(np.sum((p - closest) ** 2, axis=-1)).min(axis=-1)                  # (..., N)
    return distance.mean(axis=-1)


@dataclass
class GuideAssignment:
    """guides: (K,) strand indices simulated as guides; pairs: (S, 2) guide *slots* (0..K-1) of every
    strand; weights: (S, 2) eq. 4.2 weights (sum 1; a guide itself gets weight 1 on its own slot)."""

    guides: np.ndarray
    pairs: np.ndarray
    weights: np.ndarray


def _distances_to_candidates(shapes, roots, guide_ids, candidates, chunk=512):
    """(S, C) E to the C root-nearest guides and the guide slots (S, C)."""
    tree = cKDTree(roots[guide_ids])
    count = min(candidates, len(guide_ids))
    _, slots = tree.query(roots, k=count)
    slots = slots.reshape(len(roots), count)
    distance = np.empty(slots.shape)
    guide_shapes = shapes[guide_ids]
    for start in range(0, len(roots), chunk):
        stop = min(start + chunk, len(roots))
        distance[start:stop] = strand_distance(shapes[start:stop, None], guide_shapes[slots[start:stop]])
    return distance, slots


def select_guides(padded, layout: StrandLayout, count: int, iterations: int = 5, samples: int = 12,
                  candidates: int = 8, seed: int = 0) -> np.ndarray:
    """k-means (seed 002 §4.1) of the strands with the distance E: returns (count,) guide strand indices.

    Initial guides: farthest-point sampling of the roots. Each iteration assigns every strand to its
    nearest guide by E and replaces each guide by the member closest (E) to its cluster's mean shape.
    """
    strands = len(padded)
    if not 1 <= count <= strands:
        raise ValueError(f"guide count {count} must be in 1..{strands}")
    shapes = resample(padded, layout, samples)
    roots = shapes[:, 0]
    rng = np.random.default_rng(seed)
    chosen = [int(rng.integers(strands))]
    nearest = np.linalg.norm(roots - roots[chosen[0]], axis=1)
    for _ in range(count - 1):
        chosen.append(int(np.argmax(nearest)))
        nearest = np.minimum(nearest, np.linalg.norm(roots - roots[chosen[-1]], axis=1))
    guides = np.asarray(chosen)
    for _ in range(iterations):
        distance, slots = _distances_to_candidates(shapes, roots, guides, candidates)
        cluster = slots[np.arange(strands), np.argmin(distance, axis=1)]
        sizes = np.bincount(cluster, minlength=count).astype(np.float64)
        mean = np.zeros((count,) + shapes.shape[1:])
        np.add.at(mean, cluster, shapes)
        mean /= np.maximum(sizes, 1.0)[:, None, None]
        to_mean = np.sqrt(np.sum((shapes - mean[cluster]) ** 2, axis=-1)).mean(axis=-1)
        best = np.full(count, np.inf)
        np.minimum.at(best, cluster, to_mean)
        winner = (to_mean == best[cluster])
        updated = guides.copy()
        updated[cluster[winner]] = np.nonzero(winner)[0]
        if np.array_equal(updated, guides):
            break
        guides = updated
    return np.sort(guides)


def assign_guides(padded, layout: StrandLayout, guides, samples: int = 12, candidates: int = 8) -> GuideAssignment:
    """Two guides per strand (the two nearest by E among the root-nearest candidates) with the
    inverse-distance weights of eq. 4.2, w_g = (1/E_g) / Σ_g' (1/E_g')."""
    guides = np.asarray(guides, np.int64)
    shapes = resample(padded, layout, samples)
    distance, slots = _distances_to_candidates(shapes, shapes[:, 0], guides, max(2, candidates))
    if distance.shape[1] == 1:
        return GuideAssignment(guides, np.repeat(slots, 2, axis=1), np.tile([1.0, 0.0], (len(padded), 1)))
    order = np.argsort(distance, axis=1)[:, :2]
    pairs = np.take_along_axis(slots, order, axis=1)
    nearest = np.take_along_axis(distance, order, axis=1)
    exact = nearest[:, 0] <= 1e-12
    inverse = 1.0 / np.maximum(nearest, 1e-300)
    weights = inverse / inverse.sum(axis=1, keepdims=True)
    weights = np.where(exact[:, None], np.array([1.0, 0.0]), weights)
    is_guide = np.zeros(len(padded), bool)
    is_guide[guides] = True
    own = np.full(len(padded), -1)
    own[guides] = np.arange(len(guides))
    pairs[is_guide, 0] = own[is_guide]
    weights[is_guide] = [1.0, 0.0]
    return GuideAssignment(guides, pairs, weights)

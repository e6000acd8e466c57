"""What a hair object on guides drew at a frame, and how the next frame's children carry it over.

**A child moves no farther than its guides.** A child is the blend of its two guides' shapes carried to its own
root, with the parting lean and the lengths of ``GuideInterpolator.shapes``. Where the guides part (one falls
forward over an ear, the other back) their blended segments are short and each, set to its full length, turns with
every millimetre the guides move: a child's tip moved up to 2.5 times as far in a frame as the farther of its
guides. The weighted mean of the carried shapes itself moves no farther than they do, so a child's motion beyond
its mean's motion is kept to BLEND_CHANGE_PER_FRAME of its rest segment length at every point a frame
(``bounded_blend``); a child that fell behind catches up at that rate.

**A laid child is carried from frame to frame.** A child is then laid out of the closed mesh shells
(``StrandObject.laid_outside``). Where its blend lies on the skin, two layings can be about equally good (folded
down along an ear, or running free over its top), and a laying chosen afresh each frame flips with millimetres of
the blend: the child would hop between them, 15 cm in one frame with the head at rest. A child is therefore laid
afresh only where nothing was drawn before. Otherwise its deviation from its blend at the last frame (where it
was drawn less where it was blended) is carried over, turned with its root frame since then (``carried_deviation``;
a head that turns carries a child folded along its ear with it), and shortened by at most
DEVIATION_RELAX_PER_FRAME of its rest segment length at every point, so that a child whose obstacle has gone
returns to its blend slowly (``carried_layings``). Where the shortened deviation would take the child into a
shell it keeps the whole one. What still enters a shell (the blend itself moved into the skin) is laid out from
there, towards where it was drawn before: the correction is as small as the penetration, so a child moves about
as far as its blend does and settles when its guides settle.

A child within the blend's bound, or without a deviation, is drawn exactly as blended. Each strand is rebuilt from
its root at the segment lengths it would have had (``_rebuilt``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..registry_types import checked_state_array

# how far [rest segment lengths] a laid child's deviation from its blend shrinks at any of its points in one frame
DEVIATION_RELAX_PER_FRAME = 0.05
# how far [rest segment lengths] a child's blend moves at any of its points in one frame beyond its guides' mean
BLEND_CHANGE_PER_FRAME = 1.0


@dataclass
class DrawnStrands:
    """One frame's drawing of a hair object on guides, each (S, P, 3) [m]: points, every strand as drawn (children
    laid out of the colliders); blend, every strand as blended from its guides (``bounded_blend``); mean, the
    weighted mean of its guides' carried shapes (``GuideInterpolator.shapes``; None where a checkpoint lacks it);
    rotations (S, 3, 3), every strand's root-frame rotation since rest at that frame (None where a checkpoint
    lacks it). The guides are drawn as simulated in points, blend and mean. All are checkpointed: a resumed bake
    draws the next frame as the uninterrupted one does."""

    points: Any
    blend: Any
    mean: Any = None
    rotations: Any = None


def bounded_blend(xp, blend, mean, previous: DrawnStrands, step, pinned: int):
    """Children's blends (S, P, 3) [m] whose motion since ``previous``, beyond the motion of their guides' ``mean``
    (S, P, 3) [m], is at most ``step`` (S,) [m] at every point, rebuilt from their ``pinned`` root points at the
    lengths of ``blend``; strands within the bound (or without a previous mean) are returned exactly as blended."""
    if previous.mean is None:
        return blend
    excess = (blend - previous.blend) - (mean - previous.mean)
    _, scale = _step_scale(xp, excess, step)
    bounded = _rebuilt(xp, blend - (1.0 - scale)[..., None] * excess, blend, pinned)
    return xp.where(xp.all(scale == 1.0, axis=1)[:, None, None], blend, bounded)


def carried_deviation(xp, rotations, previous: DrawnStrands):
    """Every strand's deviation (S, P, 3) [m] from its blend as drawn at ``previous``, turned with its root frame
    from then to now (``rotations`` (S, 3, 3): the root frames' rotations since rest now); not turned where the
    previous drawing has no rotations (a checkpoint without them)."""
    deviation = previous.points - previous.blend
    if previous.rotations is None:
        return deviation
    turn = xp.einsum("sij,skj->sik", rotations, previous.rotations)          # R_now R_beforeᵀ
    return xp.einsum("sij,spj->spi", turn, deviation)


def carried_layings(xp, blend, deviation, step, pinned: int):
    """(carried, relaxed), children (S, P, 3) [m]: ``blend`` (S, P, 3) [m] plus their ``deviation`` (S, P, 3) [m],
    and plus the deviation shortened by at most ``step`` (S,) [m] at every point, each rebuilt from its ``pinned``
    root points along its own directions at the blend's segment lengths. A strand without a deviation is its blend
    exactly in both."""
    size, scale = _step_scale(xp, deviation, step)
    kept = 1.0 - scale
    deviates = xp.any(size > 0.0, axis=1)[:, None, None]
    carried = xp.where(deviates, _rebuilt(xp, blend + deviation, blend, pinned), blend)
    relaxed = xp.where(deviates, _rebuilt(xp, blend + kept[..., None] * deviation, blend, pinned), blend)
    return carried, relaxed


def _step_scale(xp, change, step):
    """(size (S, P) [m], scale (S, P)) of per-point changes ``change`` (S, P, 3) [m]: each point's length, and the
    factor (≤ 1) that keeps it within its strand's ``step`` (S,) [m]."""
    size = xp.sqrt(xp.sum(change * change, axis=-1))
    return size, xp.minimum(1.0, step[:, None] / xp.maximum(size, 1e-300))


def _rebuilt(xp, shape, like, pinned: int):
    """Strands (S, P, 3) [m] of ``shape`` rebuilt from the ``pinned`` root points of ``like`` (S, P, 3) [m] along
    their own segment directions at the segment lengths of ``like`` (a zero-length segment stays zero)."""
    segments = shape[:, pinned:] - shape[:, pinned - 1:-1]
    length = xp.sqrt(xp.sum(segments * segments, axis=-1))[..., None]
    like_length = xp.sqrt(xp.sum((like[:, pinned:] - like[:, pinned - 1:-1]) ** 2, axis=-1))[..., None]
    directions = xp.where(length > 0.0, segments / xp.maximum(length, 1e-300), 0.0)
    tail = shape[:, pinned - 1:pinned] + xp.cumsum(directions * like_length, axis=1)
    return xp.concatenate([like[:, :pinned], tail], axis=1)


def drawing_arrays(prefix: str, drawing: DrawnStrands, to_host) -> dict[str, np.ndarray]:
    """Checkpoint arrays of a drawing: ``<prefix>_drawn`` (its points), ``<prefix>_blend``, ``<prefix>_mean`` and
    ``<prefix>_rotations``, float64 host."""
    arrays = {f"{prefix}_drawn": np.array(to_host(drawing.points), np.float64),
              f"{prefix}_blend": np.array(to_host(drawing.blend), np.float64)}
    for name in ("mean", "rotations"):
        if getattr(drawing, name) is not None:
            arrays[f"{prefix}_{name}"] = np.array(to_host(getattr(drawing, name)), np.float64)
    return arrays


def checked_drawing(arrays: dict, prefix: str, shape: tuple, object_id: str, xp) -> DrawnStrands | None:
    """The drawing of ``drawing_arrays`` on ``xp``'s device, each array checked for ``shape`` (S, P, 3) (the
    rotations for (S, 3, 3)), or None where the checkpoint holds none (before the first frame was drawn). A
    checkpoint with the points only takes them as the blend too (no laying to carry over), one without the mean
    bounds nothing at the next frame, and one without the rotations carries the laying unturned."""
    if f"{prefix}_drawn" not in arrays:
        return None

    def read(name, expected=shape):
        if f"{prefix}_{name}" not in arrays:
            return None
        return xp.asarray(checked_state_array(arrays, f"{prefix}_{name}", expected, np.float64, object_id))

    points = read("drawn")
    blend = read("blend")
    return DrawnStrands(points, points if blend is None else blend, read("mean"), read("rotations", shape[:1] + (3, 3)))

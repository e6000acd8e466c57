"""What a hair object on guides drew at a frame, and how the next frame's children carry it over.

**A child moves no farther than its guides.** A child is the blend of its two guides' shapes carried to its own
root, with the parting lean and the lengths of ``GuideInterpolator.shapes``. Where the guides part (one falls
forward over an ear, the other back) their blended segments are short and each, set to its full length, turns with
every millimetre the guides move: a child's tip moved up to 2.5 times as far in a frame as the farther of its
guides. The weighted mean of the carried shapes itself moves no farther than they do, so a child's motion beyond
its mean's motion is kept to BLEND_CHANGE_PER_FRAME of its rest segment length at every point a frame
(``bounded_blend``); a child that fell behind catches up at that rate.

**A child glides between layings.** A child is then laid out of the closed mesh shells
(``StrandObject.laid_outside``). Where its blend lies on the skin, two layings can be about equally good (folded
down along an ear, or running free over its top) and the laying's choice flips with millimetres of the blend: the
child would hop between them, 15 cm in one frame with the head at rest. Its deviation from the blend (where it is
drawn less where it is blended) is kept from frame to frame instead and moves towards the new laying's by at most
LAYING_CHANGE_PER_FRAME of its rest segment length at every point (``eased_laying``), so it glides from one laying
to the other over a few frames. Where the glide enters a shell (the way from one side of an ear to the other passes
through the ear) the child keeps the laying it was drawn with, carried by its blend, while that is outside, else
the glide is laid out of the shell (``StrandObject._glided``): no point is drawn inside.

A child within both bounds is drawn exactly as before them. Each strand is rebuilt from its root at the segment
lengths it would have had (``_rebuilt``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..registry_types import checked_state_array

# how far [rest segment lengths] a child's laying moves at any of its points in one frame, beyond its blend's motion
LAYING_CHANGE_PER_FRAME = 1.0
# how far [rest segment lengths] a child's blend moves at any of its points in one frame beyond its guides' mean
BLEND_CHANGE_PER_FRAME = 1.0


@dataclass
class DrawnStrands:
    """One frame's drawing of a hair object on guides, each (S, P, 3) [m]: points, every strand as drawn (children
    laid out of the colliders); blend, every strand as blended from its guides (``bounded_blend``); mean, the
    weighted mean of its guides' carried shapes (``GuideInterpolator.shapes``; None where a checkpoint lacks it).
    The guides are drawn as simulated in all three. All are checkpointed: a resumed bake draws the next frame as
    the uninterrupted one does."""

    points: Any
    blend: Any
    mean: Any = None

    def rows(self, rows) -> "DrawnStrands":
        """The drawing of the strands ``rows`` (an index array) only."""
        return DrawnStrands(self.points[rows], self.blend[rows], None if self.mean is None else self.mean[rows])


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


def eased_laying(xp, blend, laid, previous: DrawnStrands, step, pinned: int):
    """Children (S, P, 3) [m] between their drawing at the last frame and their new laying ``laid`` (S, P, 3) [m]
    of ``blend`` (S, P, 3) [m]: each point's deviation from the blend moves from the one drawn (``previous``)
    towards the laying's by at most ``step`` (S,) [m] of its strand, then the strand is rebuilt from its ``pinned``
    root points along its own directions at the laying's segment lengths. Strands whose deviation was zero and
    stays zero are returned exactly as laid."""
    before = previous.points - previous.blend
    change = (laid - blend) - before
    size, scale = _step_scale(xp, change, step)
    eased = _rebuilt(xp, blend + before + scale[..., None] * change, laid, pinned)
    untouched = ~xp.any(xp.sum(before * before, axis=-1) + size > 0.0, axis=1)
    return xp.where(untouched[:, None, None], laid, eased)


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
    """Checkpoint arrays of a drawing: ``<prefix>_drawn`` (its points), ``<prefix>_blend`` and ``<prefix>_mean``,
    float64 host."""
    arrays = {f"{prefix}_drawn": np.array(to_host(drawing.points), np.float64),
              f"{prefix}_blend": np.array(to_host(drawing.blend), np.float64)}
    if drawing.mean is not None:
        arrays[f"{prefix}_mean"] = np.array(to_host(drawing.mean), np.float64)
    return arrays


def checked_drawing(arrays: dict, prefix: str, shape: tuple, object_id: str, xp) -> DrawnStrands | None:
    """The drawing of ``drawing_arrays`` on ``xp``'s device, each array checked for ``shape``, or None where the
    checkpoint holds none (before the first frame was drawn). A checkpoint with the points only takes them as the
    blend too (no laying to carry over), and one without the mean bounds nothing at the next frame."""
    if f"{prefix}_drawn" not in arrays:
        return None

    def read(name):
        return xp.asarray(checked_state_array(arrays, f"{prefix}_{name}", shape, np.float64, object_id))

    points = read("drawn")
    return DrawnStrands(points, read("blend") if f"{prefix}_blend" in arrays else points,
                        read("mean") if f"{prefix}_mean" in arrays else None)

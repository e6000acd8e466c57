"""What a hair object on guides drew at a frame, and how its children's laying out of the colliders carries over to
the next frame.

A child is its guides' blend laid out of the closed mesh shells (``StrandObject.laid_outside``). Where the blend
lies on the skin, two layings can be about equally good (a child folded down along an ear, or running free over
its top) and the laying's choice flips with millimetres of the blend: the child would hop between them, 15 cm in
one frame with the head at rest. Its deviation from the blend (where it is drawn less where it is blended) is kept
from frame to frame instead and moves towards the new laying's by at most LAYING_CHANGE_PER_FRAME of the strand's
rest segment length at every point, so a child glides from one laying to the other over a few frames; its
segments then take the laying's lengths again. Where the glide enters a shell (the way from one side of an ear to
the other passes through the ear) the child keeps the laying it was drawn with, carried by its blend, while that is
outside, else the glide is laid out of the shell (``StrandObject._glided``): no point is drawn inside. A child whose
blend and drawing agree (never laid) is drawn exactly as blended."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..registry_types import checked_state_array

# how far [rest segment lengths] a child's laying moves at any of its points in one frame, beyond its guides' motion
LAYING_CHANGE_PER_FRAME = 1.0


@dataclass
class DrawnStrands:
    """One frame's drawing of a hair object on guides: points (S, P, 3) [m], every strand as drawn (children laid
    out of the colliders), and blend (S, P, 3) [m], every strand as blended from its guides (the guides as
    simulated). Both are checkpointed: a resumed bake draws the next frame as the uninterrupted one does."""

    points: Any
    blend: Any


def eased_laying(xp, blend, laid, previous: DrawnStrands, step, pinned: int):
    """Children (S, P, 3) [m] between their drawing at the last frame and their new laying ``laid`` (S, P, 3) [m]
    of ``blend`` (S, P, 3) [m]: each point's deviation from the blend moves from the one drawn (``previous``)
    towards the laying's by at most ``step`` (S,) [m] of its strand, then the strand is rebuilt from its ``pinned``
    root points along its own directions at the laying's segment lengths. Strands whose deviation was zero and
    stays zero are returned exactly as laid."""
    before = previous.points - previous.blend
    change = (laid - blend) - before
    size = xp.sqrt(xp.sum(change * change, axis=-1))                         # (S, P)
    scale = xp.minimum(1.0, step[:, None] / xp.maximum(size, 1e-300))
    shape = blend + before + scale[..., None] * change
    segments = shape[:, pinned:] - shape[:, pinned - 1:-1]
    length = xp.sqrt(xp.sum(segments * segments, axis=-1))[..., None]
    laid_length = xp.sqrt(xp.sum((laid[:, pinned:] - laid[:, pinned - 1:-1]) ** 2, axis=-1))[..., None]
    directions = xp.where(length > 0.0, segments / xp.maximum(length, 1e-300), 0.0)
    tail = shape[:, pinned - 1:pinned] + xp.cumsum(directions * laid_length, axis=1)
    eased = xp.concatenate([laid[:, :pinned], tail], axis=1)
    untouched = ~xp.any(xp.sum(before * before, axis=-1) + size > 0.0, axis=1)
    return xp.where(untouched[:, None, None], laid, eased)


def drawing_arrays(prefix: str, drawing: DrawnStrands, to_host) -> dict[str, np.ndarray]:
    """Checkpoint arrays of a drawing: ``<prefix>_drawn`` (its points) and ``<prefix>_blend``, float64 host."""
    return {f"{prefix}_drawn": np.array(to_host(drawing.points), np.float64),
            f"{prefix}_blend": np.array(to_host(drawing.blend), np.float64)}


def checked_drawing(arrays: dict, prefix: str, shape: tuple, object_id: str, xp) -> DrawnStrands | None:
    """The drawing of ``drawing_arrays`` on ``xp``'s device, each array checked for ``shape``, or None where the
    checkpoint holds none (before the first frame was drawn). A checkpoint with the points only takes them as the
    blend too (no laying to carry over)."""
    if f"{prefix}_drawn" not in arrays:
        return None
    points = xp.asarray(checked_state_array(arrays, f"{prefix}_drawn", shape, np.float64, object_id))
    blend = points if f"{prefix}_blend" not in arrays else \
        xp.asarray(checked_state_array(arrays, f"{prefix}_blend", shape, np.float64, object_id))
    return DrawnStrands(points, blend)

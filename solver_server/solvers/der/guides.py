"""DER hair on guide strands: a hair object whose ``guide_count`` (or its ``guides``, artist-chosen strand indices)
asks for it simulates only its guide strands with Discrete Elastic Rods, and every strand is drawn from them as
the fast models draw theirs (``guides.strand_object.StrandObject``: a child is interpolated from its two guides,
carried to its own patch of scalp, and laid out of the colliders' closed mesh shells)."""

from __future__ import annotations

import numpy as np

from ...sim.errors import SceneError
from ..guides.drawing import DrawnStrands
from ..guides.strand_object import StrandObject


class DerGuides:
    """The guide strands of one DER hair object.

    strands: the object's StrandObject (layout, root binding, interpolator); point_index (n,) int64: the guides'
    points among the object's, strand after strand; offsets (G + 1,) int64: the guides' strand offsets into those
    points; rows (G,) int64: the guide strands among the object's."""

    def __init__(self, strands: StrandObject, xp):
        self.strands = strands
        layout = strands.layout
        self.rows = np.asarray(strands.interpolator.assignment.guides, np.int64)
        counts = np.diff(layout.offsets)[self.rows]
        self.point_index = layout.gather[self.rows][layout.valid[self.rows]]     # the guides' real points, in order
        self.offsets = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
        # (G, P) the guides' own points padded to the object's width by repeating each tip (the interpolator's layout)
        slot = np.arange(layout.max_points)[None, :]
        self._padding = xp.asarray(self.offsets[:-1, None] + np.minimum(slot, counts[:, None] - 1))

    @classmethod
    def of(cls, spec, scene, xp) -> "DerGuides | None":
        """The guides of a DER hair object spec, or None when every strand is simulated (no guide_count, or one
        at least the strand count, and no ``guides``). Guides need clamped roots: with ``pins`` a SceneError
        naming the object."""
        raw = spec.raw if isinstance(spec.raw, dict) else {}
        strand_count = len(raw.get("strand_offsets", [0, 0])) - 1
        chosen = raw.get("guides")
        asked = 0 < int(spec.params.get("guide_count", 0) or 0) < strand_count \
            or (chosen is not None and len(chosen) > 0)
        if not asked:
            return None
        if raw.get("pins") is not None:
            raise SceneError("guide strands (guide_count or guides) need clamped roots for der hair: remove the "
                             "pins, or simulate every strand (guide_count 0)", object=spec.id)
        strands = StrandObject.from_spec(spec, scene, "der", xp)
        return None if strands.interpolator is None else cls(strands, xp)

    def draw(self, simulated, poses, xp, colliders, radius: float,
             previous: DrawnStrands | None = None) -> DrawnStrands:
        """Every strand (S, P, 3) [m] drawn from the guides' simulated points (n, 3) [m] at the instant of ``poses``:
        children interpolated and laid out of the closed mesh shells of ``colliders`` (or None), carrying over the
        drawing of the frame before, ``previous`` (or None) (``StrandObject.draw``); the guides as simulated."""
        return self.strands.draw(simulated[self._padding], poses, xp, colliders, radius, previous)

    def unpadded(self, strands, xp):
        """(N, 3) the object's points from every strand (S, P, 3)."""
        return self.strands.layout.unpad(strands, xp)

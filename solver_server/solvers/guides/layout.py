"""Strand layout: flat points + ``strand_offsets`` <-> padded (strands, points) arrays.

Every fast-hair solver works on padded arrays of shape (S, P, ...) so that all strands are
processed by the same vectorized array operations. Strands shorter than P are padded by
repeating their tip point; ``valid`` marks the real points and ``segment_valid`` the real
segments (a padded segment has zero length and carries no mass).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solver_server.sim.errors import SceneError


@dataclass(frozen=True)
class StrandLayout:
    """Index maps of one hair object (host numpy arrays).

    offsets: (S+1,) int64, strand s owns flat points offsets[s]:offsets[s+1].
    gather: (S, P) int64 flat point index of each padded slot (pads repeat the tip).
    valid: (S, P) bool, True for real points.
    """

    offsets: np.ndarray
    gather: np.ndarray
    valid: np.ndarray

    @property
    def strand_count(self) -> int:
        return int(self.gather.shape[0])

    @property
    def max_points(self) -> int:
        return int(self.gather.shape[1])

    @property
    def point_count(self) -> int:
        return int(self.offsets[-1])

    @property
    def segment_valid(self) -> np.ndarray:
        """(S, P-1) bool: segment k joins real points k and k+1."""
        return self.valid[:, 1:]

    @classmethod
    def from_offsets(cls, offsets, point_count: int, object_id: str | None = None,
                     min_points: int = 2) -> "StrandLayout":
        """Validate ``strand_offsets`` (S+1,) against ``point_count`` points.

        Raises SceneError naming the object when offsets are not increasing from 0 to
        point_count or a strand has fewer than ``min_points`` points.
        """
        offsets = np.asarray(offsets)
        if offsets.ndim != 1 or offsets.size < 2 or offsets.dtype.kind not in "iu":
            raise SceneError("strand_offsets must be a 1-D integer array of length S+1 ≥ 2", object=object_id)
        offsets = offsets.astype(np.int64)
        if offsets[0] != 0 or offsets[-1] != point_count:
            raise SceneError(
                f"strand_offsets must start at 0 and end at the point count {point_count}, "
                f"got {int(offsets[0])} .. {int(offsets[-1])}", object=object_id)
        counts = np.diff(offsets)
        if np.any(counts < min_points):
            bad = int(np.argmax(counts < min_points))
            raise SceneError(f"strand {bad} has {int(counts[bad])} points; at least {min_points} are needed",
                             object=object_id)
        max_points = int(counts.max())
        slot = np.arange(max_points)[None, :]
        valid = slot < counts[:, None]
        gather = offsets[:-1, None] + np.minimum(slot, counts[:, None] - 1)
        return cls(offsets=offsets, gather=gather, valid=valid)

    @classmethod
    def uniform(cls, strand_count: int, points_per_strand: int) -> "StrandLayout":
        """Layout of S strands with the same number of points each."""
        offsets = np.arange(strand_count + 1, dtype=np.int64) * points_per_strand
        return cls.from_offsets(offsets, int(offsets[-1]))

    def pad(self, flat, xp=np):
        """(N, ...) flat per-point array -> (S, P, ...) padded array on the same device."""
        return flat[xp.asarray(self.gather)]

    def unpad(self, padded, xp=np):
        """(S, P, ...) padded array -> (N, ...) flat array of the real points."""
        return padded[xp.asarray(self.valid)]

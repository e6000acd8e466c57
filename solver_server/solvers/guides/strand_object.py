"""A hair object prepared for the fast strand models: layout, padded rest points, pinned root
count and root binding. Shared by the particle and Cosserat solver groups."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solver_server.sim.errors import SceneError

from .layout import StrandLayout
from .roots import RootBinding


@dataclass
class StrandObject:
    """id; layout; rest (S, P, 3) padded rest points [m]; pinned: root points per strand that
    follow the root kinematically (1 or 2); binding: RootBinding; params: resolved hair params."""

    id: str
    layout: StrandLayout
    rest: np.ndarray
    pinned: int
    binding: RootBinding
    params: dict

    @classmethod
    def from_spec(cls, spec, scene, model: str) -> "StrandObject":
        offsets = np.asarray(spec.raw.get("strand_offsets", [0, len(spec.vertices)]))
        layout = StrandLayout.from_offsets(offsets, len(spec.vertices), spec.id)
        rest = layout.pad(spec.vertices)
        pinned = cls._pinned_root_points(spec, layout, model)
        binding = RootBinding(spec, scene, rest[:, 0])
        return cls(spec.id, layout, rest, pinned, binding, dict(spec.params))

    @staticmethod
    def _pinned_root_points(spec, layout: StrandLayout, model: str) -> int:
        """1 or 2: how many points at the root of every strand are pinned.

        No ``pins`` key: 2 (clamped root, DESIGN §2). Otherwise the pins must be exactly the first
        K points of every strand with weight 1 — the fast models support root pins only."""
        if "pins" not in spec.raw or spec.raw.get("pins") is None:
            return 2
        indices = np.sort(spec.pin_indices)
        for count in (2, 1):
            expected = np.sort((layout.offsets[:-1, None] + np.arange(count)[None]).ravel())
            if np.array_equal(indices, expected) and np.all(spec.pin_weights == 1.0):
                if model == "cosserat" and count == 1:
                    raise SceneError("the cosserat hair model needs clamped roots (the first two points of "
                                     "every strand pinned, or no 'pins'); got the root point only", object=spec.id)
                return count
        raise SceneError(f"the {model} hair model supports root pins only (the first 1 or 2 points of every "
                         "strand with weight 1, or no 'pins' for clamped roots); free strands and other pins "
                         "need model 'der'", object=spec.id)

    def root_frames(self, poses):
        """(roots (S, 3), rotations (S, 3, 3)) at the instant of ``poses``."""
        return self.binding.frames(poses)

    def root_targets(self, poses) -> np.ndarray:
        """(S, pinned, 3) world positions of the pinned root points at the instant of ``poses``."""
        roots, rotations = self.root_frames(poses)
        local = self.rest[:, :self.pinned] - self.rest[:, :1]
        return roots[:, None, :] + np.einsum("sij,skj->ski", rotations, local)

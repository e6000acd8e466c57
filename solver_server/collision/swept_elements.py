"""Mesh elements (triangles or edges) on a device with a ``wp.Bvh`` over their boxes swept over a substep, and
the candidate lists that hold, per element of a query, the elements its tree query met."""

from __future__ import annotations

import numpy as np
import warp as wp

from ..kernels import launch, on_device_stream, warp_device_of, warp_view
from ..kernels.bounds import element_bounds

FLOAT32_PAD = 1e-6   # [m] added to every float32 box around float64 geometry
CANDIDATE_CAPACITY = 16   # candidates kept per element of a CandidateList at first; it grows when one finds more


def unique_edges(triangles: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(edges (E, 2) sorted vertex pairs, index (E,) of one triangle holding each) of triangles (T, 3)."""
    pairs = np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]])
    owner = np.tile(np.arange(len(triangles)), 3)
    edges, first = np.unique(np.sort(pairs, axis=1), axis=0, return_index=True)
    return edges, owner[first]


class SweptElements:
    """elements (k, c) int vertex indices (c = 3 triangles, 2 edges), owner (k,) int (object slot, or 0),
    rest_view: wp.vec3d view of the vertices (n, 3) [m] in their rest pose.

    The BVH's tree is built once over the elements' rest boxes; :meth:`refit` sets every element's box to
    cover its corners at the start and the end of the substep, grown by ``pad``, and refits the tree's
    boxes; ``bvh.id`` goes to kernels. A tree built from the rest pose is the same however the job got to
    its current pose, so queries visit candidates in the same order after a resume from a checkpoint as in
    the uninterrupted bake (a tree built from the first queried pose would not be: results summed over
    candidates would differ in their last bits and drift apart)."""

    def __init__(self, xp, elements: np.ndarray, rest_view, owner: np.ndarray | None = None):
        self.count = len(elements)
        self.indices = xp.asarray(np.ascontiguousarray(elements, np.int32))
        self.owner = xp.asarray(np.ascontiguousarray(np.zeros(self.count) if owner is None else owner, np.int32))
        self.lowers = xp.zeros((self.count, 3), dtype=xp.float32)
        self.uppers = xp.zeros((self.count, 3), dtype=xp.float32)
        self.device = warp_device_of(self.indices)
        self.index_view = warp_view(self.indices, wp.int32)
        self.owner_view = warp_view(self.owner, wp.int32)
        self.bvh = None              # no tree over no elements: callers skip their queries
        if self.count == 0:
            return
        self.refit_boxes(rest_view, rest_view, 0.0)
        with on_device_stream(self.device):
            self.bvh = wp.Bvh(warp_view(self.lowers, wp.vec3f), warp_view(self.uppers, wp.vec3f))

    def refit_boxes(self, start_view, current_view, pad: float) -> None:
        """The elements' boxes over start → current, grown by ``pad`` [m] (the tree is not refitted)."""
        launch(element_bounds, self.count, device=self.device,
                  inputs=[start_view, current_view, self.index_view, float(pad) + FLOAT32_PAD,
                          warp_view(self.lowers, wp.vec3f), warp_view(self.uppers, wp.vec3f)])

    def refit(self, start_view, current_view, pad: float) -> None:
        """start_view, current_view: wp.vec3d views of the vertices (n, 3) [m]; pad [m]."""
        if self.bvh is None:
            return
        self.refit_boxes(start_view, current_view, pad)
        with on_device_stream(self.device):
            self.bvh.refit()


class CandidateList:
    """For each of ``count`` elements, the indices of the elements it may touch: rows of ``found`` (count,
    capacity) int32, the first ``counts[e]`` of row e used (device arrays)."""

    def __init__(self, xp, count: int):
        self.xp = xp
        self.found = xp.zeros((count, CANDIDATE_CAPACITY), dtype=xp.int32)
        self.counts = xp.zeros(count, dtype=xp.int32)

    def fill(self, launch_search) -> None:
        """Run ``launch_search(found view, counts view)`` (a kernel that writes at most found.shape[1] indices
        per element and counts all it finds), again with rows wide enough when some element found more."""
        xp = self.xp
        while True:
            launch_search(warp_view(self.found, wp.int32), warp_view(self.counts, wp.int32))
            widest = int(self.counts.max()) if self.counts.shape[0] else 0
            if widest <= self.found.shape[1]:
                return
            width = self.found.shape[1]
            while width < widest:
                width *= 2
            self.found = xp.zeros((self.found.shape[0], width), dtype=xp.int32)

    def views(self) -> list:
        return [warp_view(self.found, wp.int32), warp_view(self.counts, wp.int32)]

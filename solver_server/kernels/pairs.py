"""Candidate pairs of overlapping spheres along chains (strands), found in a ``wp.HashGrid``.

Items are spheres (centre (n, 3) [m], radius (n,) [m]) that belong to chains (strands) in an order along
them. A pair (i, j), i < j, is a candidate when the spheres overlap (|c_i − c_j| ≤ r_i + r_j) and they are
not neighbours along one chain (same chain and at most ``along`` apart in order). ``is_candidate`` can also ask
for overlapping axis-aligned boxes: DER's edge-contact kernels (``solvers/der/kernels/ccd.py``, which query the
grid of ``ChainSpherePairs.grid`` themselves) give each swept edge the box of its four end positions, which for
long thin edges drops most of the pairs their bounding spheres admit (a dense hairball step: 515 000 sphere
pairs, ~4 000 contacts). Neighbours along a strand
are often most of what lies within reach (a 5 mm reach over 0.5 mm segments holds ~20 of them per segment),
so they are skipped inside the grid query instead of being listed and masked out afterwards.

Two passes over the items: count each item's candidates, then fill them at the counts' exclusive prefix
sums, each item's partners sorted, so the list is ordered by (i, j) like a sorted k-d tree result and the
same on every device and thread split. Used by the Cosserat strand interaction; the DER strand–strand contacts
query the same grid.

``pairs`` reads the number of pairs back to size its output. ``pairs_into`` fills a buffer allocated once, with
the count kept on the device: both passes skip their work when a device flag says the list is kept, the fill
writes no further than the buffer's capacity, and a list that did not fit is flagged on the device for the
caller to grow the buffer between frames (a substep on a device reads nothing back).
"""

from __future__ import annotations

import warp as wp

from .interop import int32_view, launch_split, on_device_stream, warp_device_of, warp_view

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken

GRID_CELLS = 64
"""Cells per axis of the hash grid (items hash into it modulo this)."""
CELL_PER_REACH = 2.0
"""Cell width / the largest query radius: a query then visits 2 × 2 × 2 cells (the Cosserat interaction on a
100 × 1000 head of hair: 19 ms per pass at 2×, 26 ms at 1×, 88 ms at ½×)."""


@wp.func
def is_candidate(i: int, j: int, centres: wp.array(dtype=wp.vec3d), radii: wp.array(dtype=wp.float64),
                 chain_of: wp.array(dtype=wp.int32), order_of: wp.array(dtype=wp.int32), along: int,
                 lower: wp.array(dtype=wp.vec3d), upper: wp.array(dtype=wp.vec3d), boxed: int) -> bool:
    if j <= i:
        return False
    if chain_of[i] == chain_of[j] and wp.abs(order_of[i] - order_of[j]) <= along:
        return False
    if wp.length(centres[j] - centres[i]) > radii[i] + radii[j]:
        return False
    if boxed != 0:
        for axis in range(3):
            if lower[i][axis] > upper[j][axis] or lower[j][axis] > upper[i][axis]:
                return False
    return True


@wp.kernel
def count_candidates(first: int, grid: wp.uint64, centres: wp.array(dtype=wp.vec3d),
                     radii: wp.array(dtype=wp.float64), largest_radius: wp.float64,
                     chain_of: wp.array(dtype=wp.int32), order_of: wp.array(dtype=wp.int32), along: int,
                     lower: wp.array(dtype=wp.vec3d), upper: wp.array(dtype=wp.vec3d), boxed: int,
                     active: wp.array(dtype=wp.int32), counts: wp.array(dtype=wp.int32)):
    """counts[i] = the number of candidates (i, j > i) of item i (nothing is done while ``active[0]`` is 0)."""
    if active[0] == 0:
        return
    i = wp.tid() + first
    found = int(0)
    j = int(0)
    query = wp.hash_grid_query(grid, centres[i], radii[i] + largest_radius)
    while wp.hash_grid_query_next(query, j):
        if is_candidate(i, j, centres, radii, chain_of, order_of, along, lower, upper, boxed):
            found += 1
    counts[i] = found


@wp.kernel
def fill_candidates(first: int, grid: wp.uint64, centres: wp.array(dtype=wp.vec3d),
                    radii: wp.array(dtype=wp.float64), largest_radius: wp.float64,
                    chain_of: wp.array(dtype=wp.int32), order_of: wp.array(dtype=wp.int32), along: int,
                    lower: wp.array(dtype=wp.vec3d), upper: wp.array(dtype=wp.vec3d), boxed: int,
                    active: wp.array(dtype=wp.int32), offsets: wp.array(dtype=wp.int32),
                    pairs: wp.array2d(dtype=wp.int32)):
    """pairs[offsets[i] + k] = (i, j_k) for item i's candidates, j_k ascending (insertion sort of the few), as far
    as the buffer holds them (nothing is done while ``active[0]`` is 0)."""
    if active[0] == 0:
        return
    i = wp.tid() + first
    begin = offsets[i]
    slot = begin
    capacity = pairs.shape[0]
    j = int(0)
    query = wp.hash_grid_query(grid, centres[i], radii[i] + largest_radius)
    while wp.hash_grid_query_next(query, j):
        if slot >= capacity:
            break
        if is_candidate(i, j, centres, radii, chain_of, order_of, along, lower, upper, boxed):
            pairs[slot, 0] = i
            position = slot
            while position > begin and pairs[position - 1, 1] > j:
                pairs[position, 1] = pairs[position - 1, 1]
                position -= 1
            pairs[position, 1] = j
            slot += 1


class ChainSpherePairs:
    """The broad phase of one set of items: chain_of, order_of (n,) integer arrays of ``xp`` (which chain an
    item is on and its place along it). Holds the hash grid between calls."""

    def __init__(self, chain_of, order_of, xp):
        self.xp = xp
        self._chain_view = int32_view(xp, chain_of)
        self._order_view = int32_view(xp, order_of)
        self._grid = None
        self._always_flag = None

    def pairs(self, centres, radii, largest_radius: float, along: int):
        """(c, 2) int64 candidate pairs sorted by (i, j) (see the module docstring). centres (n, 3), radii
        (n,) float64 arrays of ``xp``; largest_radius: radii.max() [m] (the caller usually knows it; passing
        it saves a read-back); along: chain neighbours this close in order are never paired. One read-back: the
        number of pairs."""
        xp = self.xp
        count = centres.shape[0]
        if count == 0:
            return xp.zeros((0, 2), dtype=xp.int64)
        shared, device = self._query(centres, radii, largest_radius, along)
        active = self._always(device)
        counts = xp.zeros(count, dtype=xp.int32)
        launch_split(count_candidates, count, device, [], [*shared, active, warp_view(counts, wp.int32)])
        offsets = xp.ascontiguousarray(xp.cumsum(counts, dtype=xp.int32) - counts)
        total = int(offsets[-1] + counts[-1])
        pairs = xp.zeros((total, 2), dtype=xp.int32)
        if total:
            launch_split(fill_candidates, count, device, [], [*shared, active, warp_view(offsets, wp.int32),
                                                                warp_view(pairs, wp.int32)])
        return pairs.astype(xp.int64)

    def pairs_into(self, buffer, rebuild, centres, radii, largest_radius: float, along: int):
        """Where the device flag ``rebuild`` ((1,) int32) is set, the candidate pairs (as ``pairs``) written into
        ``buffer`` (capacity, 2) int32 as far as it holds them; elsewhere the buffer is kept. Returns the number of
        pairs of the list built (a 0-d device array, larger than the capacity when the list did not fit; 0 where
        nothing was built). Reads nothing back. centres (n, 3), radii (n,) float64 arrays of ``xp`` (n > 0)."""
        xp = self.xp
        count = centres.shape[0]
        shared, device = self._query(centres, radii, largest_radius, along)
        flag = warp_view(rebuild, wp.int32)
        counts = xp.zeros(count, dtype=xp.int32)
        launch_split(count_candidates, count, device, [], [*shared, flag, warp_view(counts, wp.int32)])
        ends = xp.cumsum(counts, dtype=xp.int32)
        offsets = xp.ascontiguousarray(ends - counts)
        launch_split(fill_candidates, count, device, [], [*shared, flag, warp_view(offsets, wp.int32),
                                                            warp_view(buffer, wp.int32)])
        return ends[-1]

    def grid(self, centres, largest_radius: float):
        """The hash grid built over ``centres`` (n, 3) float64 (a contiguous array of ``xp``) for queries of radius at
        most 2 × ``largest_radius`` [m], and the items' chain and order views: (grid id, chain_of view, order_of
        view), for kernels that query it themselves (DER's edge contacts)."""
        device = warp_device_of(centres)
        with on_device_stream(device):
            if self._grid is None:
                self._grid = wp.HashGrid(GRID_CELLS, GRID_CELLS, GRID_CELLS, device=device, dtype=wp.float64)
            self._grid.build(warp_view(centres, wp.vec3d), CELL_PER_REACH * 2.0 * max(float(largest_radius), 1e-12))
        return self._grid.id, self._chain_view, self._order_view

    def _query(self, centres, radii, largest_radius: float, along: int):
        """The grid built over ``centres`` and the kernels' shared arguments (no boxes): (arguments, device)."""
        xp = self.xp
        centres = xp.ascontiguousarray(centres, dtype=xp.float64)
        radii = xp.ascontiguousarray(radii, dtype=xp.float64)
        device = warp_device_of(centres)
        grid, chain_view, order_view = self.grid(centres, largest_radius)
        no_box = warp_view(xp.zeros((1, 3)), wp.vec3d)
        shared = [grid, warp_view(centres, wp.vec3d), warp_view(radii, wp.float64), float(largest_radius),
                  chain_view, order_view, int(along), no_box, no_box, 0]
        return shared, device

    def _always(self, device):
        """A device flag that is always set (the passes of ``pairs`` always run)."""
        if self._always_flag is None:
            self._always_flag = self.xp.ones(1, dtype=self.xp.int32)
        return warp_view(self._always_flag, wp.int32)

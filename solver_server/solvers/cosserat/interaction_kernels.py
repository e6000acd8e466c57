"""Warp kernels of the strand–strand interaction's broad phase (interaction.py): the Verlet candidate
pairs of segment midpoints within reach, found in a ``wp.HashGrid`` and filtered in the same pass.

A pair (i, j), i < j, of valid segments is a candidate when their midpoints are at most ``reach`` apart and
they are not neighbours along one strand (same strand, at most ``along`` segments apart). Neighbours along
a strand are the bulk of what lies within reach (a 5 mm reach over 0.5 mm segments holds ~20 of them per
segment), so they are skipped inside the query instead of being listed and masked out. Two passes: count
per segment, then fill at the counts' exclusive prefix sums; the pairs of segment i come in the grid's order.
"""

from __future__ import annotations

import warp as wp

wp.set_module_options({"enable_backward": False})   # forward only: no gradients are taken


@wp.func
def is_candidate(i: int, j: int, midpoints: wp.array(dtype=wp.vec3d), reach: wp.float64,
                 strand_of: wp.array(dtype=wp.int32), segment_of: wp.array(dtype=wp.int32), along: int) -> bool:
    if j <= i:
        return False
    if strand_of[i] == strand_of[j] and wp.abs(segment_of[i] - segment_of[j]) <= along:
        return False
    return wp.length(midpoints[j] - midpoints[i]) <= reach


@wp.kernel
def count_candidates(first: int, grid: wp.uint64, midpoints: wp.array(dtype=wp.vec3d), reach: wp.float64,
                     strand_of: wp.array(dtype=wp.int32), segment_of: wp.array(dtype=wp.int32), along: int,
                     counts: wp.array(dtype=wp.int32)):
    """counts[i] = the number of candidates (i, j > i) of segment i."""
    i = wp.tid() + first
    found = int(0)
    j = int(0)
    query = wp.hash_grid_query(grid, midpoints[i], reach)
    while wp.hash_grid_query_next(query, j):
        if is_candidate(i, j, midpoints, reach, strand_of, segment_of, along):
            found += 1
    counts[i] = found


@wp.kernel
def fill_candidates(first: int, grid: wp.uint64, midpoints: wp.array(dtype=wp.vec3d), reach: wp.float64,
                    strand_of: wp.array(dtype=wp.int32), segment_of: wp.array(dtype=wp.int32), along: int,
                    offsets: wp.array(dtype=wp.int32), pairs: wp.array2d(dtype=wp.int32)):
    """pairs[offsets[i] + k] = (i, j) for segment i's k-th candidate (in count_candidates' order)."""
    i = wp.tid() + first
    slot = offsets[i]
    j = int(0)
    query = wp.hash_grid_query(grid, midpoints[i], reach)
    while wp.hash_grid_query_next(query, j):
        if is_candidate(i, j, midpoints, reach, strand_of, segment_of, along):
            pairs[slot, 0] = i
            pairs[slot, 1] = j
            slot += 1

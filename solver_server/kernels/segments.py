"""Sums and scans over contiguous segments of an array: per-strand sums, the strands' vertices, edges and degrees of
freedom lying in contiguous ranges.

One thread per segment adds its values in order from zero: the numbers numpy's ``bincount`` gives for sorted keys
(it adds in input order too), with no atomics, and, unlike CuPy's ``bincount``, no host synchronization (CuPy reads
whether any key is negative and the largest key back to the host to size its result).
"""

from __future__ import annotations

import warp as wp

from .interop import int32_view, launch, warp_device_of, warp_view


@wp.kernel
def sum_segments(offsets: wp.array(dtype=wp.int32), values: wp.array(dtype=wp.float64),
                 sums: wp.array(dtype=wp.float64)):
    """sums[s] = Σ values[offsets[s]:offsets[s + 1]], added in order, for segment s = the thread."""
    segment = wp.tid()
    total = wp.float64(0.0)
    for k in range(offsets[segment], offsets[segment + 1]):
        total += values[k]
    sums[segment] = total


def segment_sums(xp, values, offsets):
    """(S,) float64 sums of ``values`` (n,) over the S segments [offsets[s], offsets[s + 1]) of ``offsets``, a Warp
    int32 view of S + 1 nondecreasing indices from 0 to n, on the device of ``values``."""
    count = offsets.shape[0] - 1
    sums = xp.empty(count, dtype=xp.float64)
    values = xp.ascontiguousarray(values, dtype=xp.float64)
    launch(sum_segments, count, inputs=[offsets, warp_view(values, wp.float64), warp_view(sums, wp.float64)],
           device=warp_device_of(values))
    return sums


@wp.kernel
def nearest_marked_in_segments(offsets: wp.array(dtype=wp.int32), marked: wp.array(dtype=wp.int32),
                               before: wp.array(dtype=wp.int64), after: wp.array(dtype=wp.int64)):
    """For segment s = the thread, every index k in it: the largest marked index ≤ k in the segment (−1 if none) and
    the smallest marked index ≥ k in it (the array's length if none)."""
    segment = wp.tid()
    first = offsets[segment]
    end = offsets[segment + 1]
    last = wp.int64(-1)
    for k in range(first, end):
        if marked[k] != 0:
            last = wp.int64(k)
        before[k] = last
    following = wp.int64(marked.shape[0])
    for step in range(end - first):
        k = end - 1 - step
        if marked[k] != 0:
            following = wp.int64(k)
        after[k] = following


def nearest_marked(xp, marked, offsets):
    """(before, after) (n,) int64: for every index of the bool array ``marked`` (n,), the nearest marked index at
    or before it and at or after it within its segment of ``offsets`` (a Warp int32 view of S + 1 indices from 0 to
    n), −1 and n where its segment has none; one launch, no host read."""
    n = marked.shape[0]
    before = xp.empty(n, dtype=xp.int64)
    after = xp.empty(n, dtype=xp.int64)
    launch(nearest_marked_in_segments, offsets.shape[0] - 1,
           inputs=[offsets, int32_view(xp, marked),
                   warp_view(before, wp.int64), warp_view(after, wp.int64)], device=warp_device_of(before))
    return before, after


@wp.kernel
def count_values(values: wp.array(dtype=wp.int32), counts: wp.array(dtype=wp.int32)):
    """counts[v] += 1 for the value v of every item (integer atomics: the same counts in any order)."""
    wp.atomic_add(counts, values[wp.tid()], 1)


def histogram(xp, values, size: int):
    """(size,) int64: how many of the integers ``values`` (m,), each in [0, size), equal each index; numpy's
    ``bincount(values, minlength=size)``, without CuPy's two reads back of the smallest and largest value."""
    counts = xp.zeros(size, dtype=xp.int32)
    if values.shape[0]:
        launch(count_values, values.shape[0], inputs=[int32_view(xp, values), warp_view(counts, wp.int32)],
               device=warp_device_of(counts))
    return counts.astype(xp.int64)

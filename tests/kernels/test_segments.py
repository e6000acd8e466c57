"""Per-segment sums and nearest-marked scans in kernels (kernels/segments.py) and the DER contact impulses' scatter onto
vertices: the numbers numpy's bincount gives, bit for bit, on the CPU."""

from __future__ import annotations

import numpy as np
import warp as wp

from solver_server.kernels import int32_view, launch, warp_view
from solver_server.kernels.segments import histogram, nearest_marked, segment_sums
from solver_server.solvers.der.kernels import contact as contact_kernels


def test_segment_sums_equal_bincount_of_sorted_keys_bit_for_bit():
    """Segments of 0 to 40 values spanning 12 orders of magnitude (so the order of the additions shows in the
    last bits): every sum equals numpy's bincount over the sorted segment keys exactly; empty segments give 0."""
    rng = np.random.default_rng(7)
    sizes = rng.integers(0, 41, size=300)
    sizes[[0, 17, 299]] = 0
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    values = rng.normal(size=offsets[-1]) * 10.0 ** rng.integers(-6, 6, size=offsets[-1])
    keys = np.repeat(np.arange(len(sizes)), sizes)
    sums = segment_sums(np, values, int32_view(np, offsets))
    np.testing.assert_array_equal(sums, np.bincount(keys, weights=values, minlength=len(sizes)))
    assert sums[0] == 0.0 and sums[299] == 0.0


def test_nearest_marked_index_within_each_segment():
    """Segments of 0 to 12 indices, about a third marked: at every index the nearest marked index at or before it and
    at or after it inside its own segment, −1 and n where the segment has none (a marked index of a neighbouring
    segment never counts)."""
    rng = np.random.default_rng(11)
    sizes = rng.integers(0, 13, size=200)
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    n = int(offsets[-1])
    marked = rng.random(n) < 0.3
    before, after = nearest_marked(np, marked, int32_view(np, offsets))
    expected_before, expected_after = np.full(n, -1), np.full(n, n)
    for first, end in zip(offsets[:-1], offsets[1:]):
        for k in range(first, end):
            inside = np.flatnonzero(marked[first:end]) + first
            if (inside <= k).any():
                expected_before[k] = inside[inside <= k].max()
            if (inside >= k).any():
                expected_after[k] = inside[inside >= k].min()
    np.testing.assert_array_equal(before, expected_before)
    np.testing.assert_array_equal(after, expected_after)
    assert before.dtype == np.int64 and (before == -1).any() and (after == n).any() and (before >= 0).any()


def test_histogram_equals_bincount_with_its_length():
    rng = np.random.default_rng(5)
    values = rng.integers(0, 37, size=2000)
    counts = histogram(np, values, 40)
    np.testing.assert_array_equal(counts, np.bincount(values, minlength=40))
    assert counts.dtype == np.int64 and counts[37:].sum() == 0
    np.testing.assert_array_equal(histogram(np, np.zeros(0, np.int64), 3), np.zeros(3))


def test_contact_impulses_reach_the_vertices_as_the_slot_bincount_sums():
    """Contacts with four weighted vertex slots (some unused, weight 0; vertices shared between contacts): the
    kernel's vertex impulses equal the per-axis bincount of weight × impulse over the slots, bit for bit."""
    rng = np.random.default_rng(8)
    contacts, vertices = 500, 120
    slots = rng.integers(0, vertices, size=(contacts, 4))
    weights = rng.uniform(-1.0, 1.0, size=(contacts, 4))
    weights[rng.random((contacts, 4)) < 0.3] = 0.0
    impulse = rng.normal(size=(contacts, 3)) * 10.0 ** rng.integers(-8, 2, size=(contacts, 1))
    out = np.zeros((vertices, 3))
    launch(contact_kernels.slot_impulses_to_vertices, contacts, device="cpu",
           inputs=[int32_view(np, slots), warp_view(weights, wp.float64), warp_view(impulse, wp.vec3d),
                   warp_view(out, wp.vec3d)])
    per_slot = weights[:, :, None] * impulse[:, None, :]
    expected = np.stack([np.bincount(slots.ravel(), weights=per_slot[:, :, axis].ravel(), minlength=vertices)
                         for axis in range(3)], axis=1)
    np.testing.assert_array_equal(out, expected)

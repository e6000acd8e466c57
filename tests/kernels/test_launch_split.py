"""launch_split's CPU policy: a launch is cut into ranges only as far as each carries SPLIT_RANGE_SECONDS of work,
by the kernel's timed one-thread launches; a configured thread count cuts every launch; the cut gives the numbers
one launch gives."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from solver_server.kernels import interop, launch_split, warp_view


@wp.kernel
def _squares(first: int, values: wp.array(dtype=wp.float64)):
    i = first + wp.tid()
    values[i] = wp.float64(i) * wp.float64(i)


@pytest.fixture
def fresh_timings(monkeypatch):
    """The policy's timings of this test alone (the module keeps them per process)."""
    monkeypatch.setattr(interop, "_item_seconds", {})
    monkeypatch.delenv("TANGLE_KERNEL_THREADS", raising=False)
    return interop._item_seconds


def test_a_kernel_runs_on_one_thread_until_it_is_timed_then_as_its_work_asks(fresh_timings, monkeypatch):
    values = np.zeros(1000)
    for _ in range(interop.SPLIT_SAMPLES):
        assert interop._worth_splitting(_squares, 1000, 4) == 1                 # not yet timed: one thread
        launch_split(_squares, 1000, "cpu", [], [warp_view(values, wp.float64)], threads=4)
    np.testing.assert_array_equal(values, np.arange(1000.0) ** 2)
    assert len(fresh_timings[_squares.key]) == interop.SPLIT_SAMPLES
    # the work per item decides: ranges of at least SPLIT_RANGE_SECONDS each, at most the threads asked for
    fresh_timings[_squares.key] = [1e-6, 5e-7, 2e-6]                             # the fastest counts
    assert interop._worth_splitting(_squares, 200, 4) == 1                      # 0.1 ms in all
    assert interop._worth_splitting(_squares, 1000, 4) == int(5e-4 / interop.SPLIT_RANGE_SECONDS)
    assert interop._worth_splitting(_squares, 100000, 4) == 4
    assert interop._worth_splitting(_squares, 100000, 1) == 1


def test_a_configured_thread_count_cuts_every_launch_and_the_cut_changes_no_number(fresh_timings, monkeypatch):
    monkeypatch.setenv("TANGLE_KERNEL_THREADS", "3")
    assert interop._worth_splitting(_squares, 10, 3) == 3                       # untimed and tiny: cut anyway
    values = np.zeros(1001)
    launch_split(_squares, 1001, "cpu", [], [warp_view(values, wp.float64)])
    np.testing.assert_array_equal(values, np.arange(1001.0) ** 2)
    assert _squares.key not in fresh_timings                                    # a cut launch is not timed


def test_a_timing_leaves_out_the_launch_overhead(fresh_timings, monkeypatch):
    clock = iter([10.0, 10.0 + interop.LAUNCH_SECONDS + 1e-3, 20.0, 20.0 + 1e-6])
    monkeypatch.setattr(interop.time, "perf_counter", lambda: next(clock))
    interop._timed(_squares, 500, True, lambda: None)
    interop._timed(_squares, 500, True, lambda: None)                            # faster than the overhead: 0
    np.testing.assert_allclose(fresh_timings[_squares.key], [1e-3 / 500, 0.0])
    interop._timed(_squares, 500, False, lambda: None)                           # not splittable: not timed
    assert len(fresh_timings[_squares.key]) == 2

"""The CPU launch path without wp.launch's per-call packing (solver_server/kernels/cpu_launch.py): the same results bit
for bit, the same refusals, and wp.launch where it must run (graph recording, an observer of wp.launch)."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from solver_server.kernels import capture, launch, replay, warp_view
from solver_server.kernels import cpu_launch


@wp.struct
class _Scales:
    factor: wp.float64
    offset: wp.vec3d


@wp.kernel
def _every_kind(points: wp.array(dtype=wp.vec3d), weights: wp.array(dtype=wp.float64),
                index: wp.array(dtype=wp.int32, ndim=2), scale: wp.float64, count: int, seed: wp.uint64,
                shift: wp.vec3d, scales: _Scales, out: wp.array(dtype=wp.vec3d), total: wp.array(dtype=wp.float64)):
    i = wp.tid()
    j = index[i, 0] + index[i, 1] * count
    value = scales.factor * (scale * weights[i] * points[j] + shift) + scales.offset
    out[i] = value + wp.vec3d(wp.float64(seed % wp.uint64(7)), wp.float64(0.0), wp.float64(0.0))
    wp.atomic_add(total, 0, wp.length(value))


def _inputs(rng):
    points = rng.standard_normal((20, 3))
    weights = rng.standard_normal(10)
    index = np.stack([rng.integers(0, 4, 10), rng.integers(0, 4, 10)], axis=1).astype(np.int32)
    scales = _Scales()
    scales.factor = 0.75
    scales.offset = wp.vec3d(0.1, -0.2, 0.3)
    out, total = np.zeros((10, 3)), np.zeros(1)
    inputs = [warp_view(points, wp.vec3d), warp_view(weights, wp.float64), warp_view(index, wp.int32),
              np.float64(1.25), 4, 123456789012, wp.vec3d(1.0, 2.0, 3.0), scales, warp_view(out, wp.vec3d),
              warp_view(total, wp.float64)]
    return inputs, out, total


def test_the_lean_cpu_launch_gives_wp_launch_s_results_bit_for_bit():
    lean_inputs, lean_out, lean_total = _inputs(np.random.default_rng(3))
    warp_inputs, warp_out, warp_total = _inputs(np.random.default_rng(3))
    for dim in (10, 7, 10):                           # sizes come and go: each keeps its own launch bounds
        lean_out[:] = lean_total[:] = warp_out[:] = warp_total[:] = 0.0
        assert cpu_launch.lean_launch(_every_kind, dim, lean_inputs)
        wp.launch(_every_kind, dim=dim, inputs=warp_inputs, device="cpu")
        np.testing.assert_array_equal(lean_out, warp_out)
        np.testing.assert_array_equal(lean_total, warp_total)
        assert np.all(lean_out[dim:] == 0.0) and np.all(lean_out[:dim] != 0.0)


@pytest.mark.parametrize("position, wrong", [(0, lambda: warp_view(np.zeros(20), wp.float64)),
                                             (2, lambda: warp_view(np.zeros(20, np.int32), wp.int32))])
def test_an_array_of_another_dtype_or_dimension_count_is_refused_naming_the_argument(position, wrong):
    inputs, _, _ = _inputs(np.random.default_rng(0))
    cpu_launch.lean_launch(_every_kind, 10, inputs)          # the kernel's launcher is built with good arguments
    inputs[position] = wrong()
    with pytest.raises(TypeError, match=("points" if position == 0 else "index")):
        cpu_launch.lean_launch(_every_kind, 10, inputs)


def test_an_observer_of_wp_launch_sees_every_launch(monkeypatch):
    seen = []
    original = wp.launch

    def observed(kernel, *args, **kwargs):
        seen.append(kernel.key)
        return original(kernel, *args, **kwargs)

    monkeypatch.setattr(wp, "launch", observed)
    inputs, out, _ = _inputs(np.random.default_rng(1))
    launch(_every_kind, 10, inputs, "cpu")
    assert seen == [_every_kind.key] and np.all(out != 0.0)


def test_a_cpu_graph_records_launches_and_replays_them():
    """Inside ``capture`` the launches go through wp.launch, which records them: nothing runs until the replay."""
    inputs, out, total = _inputs(np.random.default_rng(2))
    graph, _ = capture("cpu", lambda: launch(_every_kind, 10, inputs, "cpu"))
    assert np.all(out == 0.0)
    replay(graph, "cpu")
    first = out.copy()
    assert np.all(first != 0.0)
    replay(graph, "cpu")
    np.testing.assert_array_equal(out, first)
    assert total[0] > 0.0

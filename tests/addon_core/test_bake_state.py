"""blender_addon.core.bake_state: shape-key naming, keyframe layout, topology hash, progress."""

import numpy as np
import pytest

from blender_addon.core import bake_state


def test_shape_key_names_round_trip():
    assert bake_state.shape_key_name(1) == "tangle_f0001"
    assert bake_state.shape_key_name(12345) == "tangle_f12345"
    for frame in (-3, 0, 1, 250, 10000):
        assert bake_state.frame_of_shape_key(bake_state.shape_key_name(frame)) == frame
    assert bake_state.frame_of_shape_key("Basis") is None
    assert bake_state.frame_of_shape_key("tangle_fabc") is None


def _evaluate_linear(keys, frame):
    """Value of a LINEAR fcurve with the given (frame, value) keys; constant extrapolation."""
    frames, values = np.array(keys, dtype=float).T
    return float(np.interp(frame, frames, values))


def test_keyframed_shape_keys_play_back_exactly_and_linearly_in_between():
    """Blend relative shape keys the way Blender does (basis + Σ w_k (key_k − basis)) with the
    keyframe layout of shape_key_weights: exact at integer frames, linear between, holds outside."""
    first, last = 3, 8
    rng = np.random.default_rng(0)
    basis = rng.normal(size=(5, 3))
    baked = {frame: rng.normal(size=(5, 3)) for frame in range(first, last + 1)}
    curves = {frame: bake_state.shape_key_weights(frame, first, last) for frame in baked}

    def pose(time):
        return basis + sum(_evaluate_linear(curves[f], time) * (baked[f] - basis) for f in baked)

    for frame in baked:
        np.testing.assert_allclose(pose(frame), baked[frame], atol=1e-12)
    np.testing.assert_allclose(pose(5.25), 0.75 * baked[5] + 0.25 * baked[6], atol=1e-12)
    np.testing.assert_allclose(pose(first - 4), baked[first], atol=1e-12)
    np.testing.assert_allclose(pose(last + 4), baked[last], atol=1e-12)


def test_topology_hash_ignores_positions_but_not_connectivity():
    triangles = np.array([[0, 1, 2], [0, 2, 3]])
    reference = bake_state.topology_hash(4, triangles)
    assert bake_state.topology_hash(4, triangles.astype(np.int64)) == reference
    assert bake_state.topology_hash(5, triangles) != reference
    assert bake_state.topology_hash(4, triangles[:, ::-1]) != reference


def test_progress_counts_eta_and_last_good_frame():
    progress = bake_state.BakeProgress(10, 19, started_at=100.0)
    assert progress.frames_total == 10 and progress.last_good_frame is None
    assert progress.eta_seconds(now=101.0) is None
    for frame, arrived in zip((10, 11, 12, 14, 15), (101.0, 105.0, 106.0, 107.0, 108.0)):
        progress.record(frame, {"iterations": 3}, now=arrived)
    assert progress.frames_done == 5 and progress.fraction == pytest.approx(0.5)
    assert progress.last_good_frame == 12
    # the start-up and the first solved frame (4 s) do not count: 1 s per frame, 5 left, 0.5 s into the next
    assert progress.eta_seconds(now=108.5) == pytest.approx(4.5)
    assert progress.last_stats == {"iterations": 3}
    assert "5/10" in progress.status_line(now=108.5) and "ETA 4 s" in progress.status_line(now=108.5)
    with pytest.raises(ValueError, match="outside the bake range"):
        progress.record(20)


def test_eta_says_estimating_until_frames_are_timed():
    progress = bake_state.BakeProgress(1, 40, started_at=0.0)
    for frame, arrived in ((1, 0.5), (2, 9.0), (3, 10.0), (4, 11.0)):
        progress.record(frame, now=arrived)
        assert progress.eta_seconds(now=arrived) is None
        assert "estimating" in progress.status_line(now=arrived)
    progress.record(5, now=12.0)
    assert progress.eta_seconds(now=12.0) == pytest.approx(35.0)


def test_eta_at_a_quarter_of_a_bake_whose_frames_slow_down_when_contact_begins():
    """A bake's first frame waits for the solver, the next frames fall freely (fast), then contact makes
    every frame slower: the estimate at 25 % follows the latest frames, not the mean since the start."""
    durations = [3.0] + [0.2] * 8 + [0.8 + 0.01 * k for k in range(39)]      # 48 frames [s]
    arrivals = np.cumsum(durations)
    progress = bake_state.BakeProgress(1, 48, started_at=0.0)
    for frame in range(1, 13):
        progress.record(frame, now=float(arrivals[frame - 1]))
    truth = float(arrivals[-1] - arrivals[11])
    estimate = progress.eta_seconds(now=float(arrivals[11]))
    naive = float(arrivals[11]) / 12 * 36
    assert abs(naive - truth) / truth > 0.3, "the mean since the start would be far off here"
    assert abs(estimate - truth) / truth < 0.3, (estimate, truth)


def test_stats_and_server_lines_for_the_panel():
    assert bake_state.stats_line({"iterations": 40, "contacts": 12, "step_ms": 3.456, "substeps": 4}) == \
        "40 iterations · 12 contacts · 3.5 ms/substep"
    assert bake_state.stats_line({}) == ""
    welcome = {"server": "tangle-solver 0.1.0", "backend": "cuda",
               "device": {"name": "NVIDIA H100", "memory_bytes": 80 * 2**30}}
    assert bake_state.server_line(welcome) == "tangle-solver 0.1.0 · cuda · NVIDIA H100 (80.0 GiB)"
    assert bake_state.server_line({"server": "x", "backend": "cpu", "device": {}}) == "x · cpu · unknown device"


# ---- status lines that say what happened --------------------------------------

def test_status_lines_name_the_frames_baked_replaced_stored_and_missing():
    from blender_addon.core.bake_state import BakeRecord, outcome_status, stored_text

    def record(last):
        return BakeRecord(1, 16, "SHAPE_KEYS", {}, last)

    assert stored_text(None) == "nothing stored"
    assert stored_text(record(None)) == "nothing stored of frames 1–16"
    assert stored_text(record(16)) == "frames 1–16 stored (complete)"
    assert stored_text(record(1)) == "frame 1 stored, 2–16 missing (Resume continues)"
    # cancelled at 10 of 16, then the resume, then a re-bake from frame 9 (the lines the issue found false)
    assert outcome_status("cancelled", (1, 10), 0, 3.14, record(10)) == \
        "Cancelled: frames 1–10 baked in 3.1 s · frames 1–10 stored, 11–16 missing (Resume continues)"
    assert outcome_status("finished", (11, 16), 0, 2.0, record(16)) == \
        "Baked: frames 11–16 baked in 2.0 s · frames 1–16 stored (complete)"
    assert outcome_status("finished", (9, 16), 8, 2.5, record(16)) == \
        "Baked: frames 9–16 baked (8 replaced) in 2.5 s · frames 1–16 stored (complete)"
    assert outcome_status("failed", None, 0, 0.2, record(16)) == \
        "Failed: no frame baked in 0.2 s · frames 1–16 stored (complete)"

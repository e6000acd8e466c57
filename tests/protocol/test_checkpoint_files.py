"""protocol.checkpoint_files: npz bytes round-trip bit-exactly and never unpickle; the checkpoint
directory keeps the newest files per job under safe folder names."""

from __future__ import annotations

import io

import numpy as np
import pytest

from protocol.checkpoint_files import CheckpointDirectory, CheckpointError, decode_checkpoint, encode_checkpoint


def _checkpoint(frame=7):
    rng = np.random.default_rng(3)
    return {"frame": frame, "groups": {"cloth": {"positions": rng.standard_normal((5, 3)),
                                                 "global_fallback": np.array(True)},
                                       "hair:der": {"object0_theta": rng.standard_normal(4).astype(np.float32),
                                                    "object0_pairs": np.arange(6, dtype=np.int64).reshape(3, 2)}}}


def test_round_trip_is_bit_exact_with_dtypes_and_shapes():
    original = _checkpoint()
    back = decode_checkpoint(encode_checkpoint(original))
    assert back["frame"] == 7 and set(back["groups"]) == {"cloth", "hair:der"}
    for key, group in original["groups"].items():
        for name, array in group.items():
            restored = back["groups"][key][name]
            assert restored.dtype == array.dtype and restored.shape == array.shape
            np.testing.assert_array_equal(restored, array)
            assert restored.flags.writeable


@pytest.mark.parametrize("bad, fragment", [
    ({"groups": {}}, "integer 'frame'"),
    ({"frame": 1, "groups": {"g": {"x": np.array(["a"])}}}, "dtype"),
    ({"frame": 1, "groups": {"g": {"x": np.array([object()], dtype=object)}}}, "dtype"),
    ({"frame": 1, "groups": {"g/h": {"x": np.zeros(1)}}}, "'/'"),
    ({"frame": 1, "groups": [1, 2]}, "groups"),
])
def test_encode_refuses_what_is_not_a_checkpoint(bad, fragment):
    with pytest.raises(CheckpointError, match=fragment):
        encode_checkpoint(bad)


def test_decode_never_unpickles_and_reports_corruption():
    buffer = io.BytesIO()
    np.save(buffer, np.array([{"evil": 1}], dtype=object), allow_pickle=True)
    pickled = io.BytesIO()
    np.savez(pickled, frame=np.array(1), **{"groups/g/x": np.array([{"evil": 1}], dtype=object)})
    with pytest.raises(CheckpointError, match="cannot be read"):
        decode_checkpoint(pickled.getvalue())
    with pytest.raises(CheckpointError, match="cannot be read"):
        decode_checkpoint(b"not a zip at all")
    with pytest.raises(CheckpointError, match="cannot be read"):
        decode_checkpoint(encode_checkpoint(_checkpoint())[:100])


def test_directory_keeps_the_newest_and_sanitises_job_ids(tmp_path):
    store = CheckpointDirectory(tmp_path / "ckpt", keep=2)
    for frame in (3, 6, 9):
        store.write("a1b2", _checkpoint(frame))
    assert store.frames("a1b2") == [6, 9]
    assert store.latest("a1b2")["frame"] == 9
    assert store.latest("never-submitted") is None
    hostile = "../../etc/passwd"
    path = store.write(hostile, _checkpoint(1))
    assert path.parent.parent == tmp_path / "ckpt" and path.parent.name.startswith("job-")
    assert store.latest(hostile)["frame"] == 1
    with pytest.raises(ValueError):
        CheckpointDirectory(tmp_path, keep=0)

"""Blender-free parts of the bake workflow: connection settings, checkpoint blobs, bake records and
continuation plans (resume / re-bake from a frame), PC2 files, live stats, interpreter check."""

import os
import stat
import sys

import numpy as np
import pytest

from blender_addon.core import bake_state, checkpoints, pc2
from blender_addon.core.bake_state import (BakeRecord, BakeRefused, bake_route, describe_route, plan_continuation,
                                           split_route)
from blender_addon.core.connection import ConnectionSettingsError, ServerConnection
from blender_addon.core.local_server import LocalServerError, check_interpreter

# ---- connection -------------------------------------------------------------------------------


def test_plain_connection_has_no_client_options():
    connection = ServerConnection("tcp://127.0.0.1:5555")
    assert connection.client_options() == {}
    assert connection.describe() == "tcp://127.0.0.1:5555"


def test_curve_connection_passes_the_key_files(tmp_path):
    server_key, client_key = tmp_path / "server.key", tmp_path / "alice.key_secret"
    server_key.write_text("x")
    client_key.write_text("y")
    connection = ServerConnection("tcp://gpu:5555", str(server_key), str(client_key), profile="GPU box")
    assert connection.client_options() == {"server_public_key": str(server_key),
                                           "client_secret_key_file": str(client_key)}
    assert connection.describe() == "tcp://gpu:5555 (profile 'GPU box', CURVE)"


@pytest.mark.parametrize("connection, words", [
    (ServerConnection("", profile="Farm"), ["'Farm'", "empty"]),
    (ServerConnection("127.0.0.1:5555"), ["scene", "no transport"]),
    (ServerConnection("tcp://h:1", "", "/tmp/c.key_secret", profile="P"), ["'P'", "server public key"]),
    (ServerConnection("tcp://h:1", "/nonexistent/server.key", profile="P"), ["'P'", "/nonexistent/server.key"]),
])
def test_unusable_connection_settings_are_named(connection, words):
    with pytest.raises(ConnectionSettingsError) as error:
        connection.client_options()
    for word in words:
        assert word in str(error.value)


# ---- checkpoints ------------------------------------------------------------------------------


def sample_checkpoint(frame=7):
    rng = np.random.default_rng(frame)
    return {"frame": frame, "groups": {
        "pd": {"positions": rng.normal(size=(5, 3)), "velocities": rng.normal(size=(5, 3))},
        "hair:der": {"twist": rng.normal(size=4), "frames": rng.normal(size=(4, 2, 3)).astype(np.float32),
                     "counter": np.arange(3, dtype=np.int64), "flags": np.array([True, False])}}}


def test_checkpoint_blob_round_trips_bit_exactly():
    original = sample_checkpoint()
    restored = checkpoints.decode_checkpoint(checkpoints.encode_checkpoint(original))
    assert restored["frame"] == 7 and restored["groups"].keys() == original["groups"].keys()
    for key, group in original["groups"].items():
        assert restored["groups"][key].keys() == group.keys()
        for name, array in group.items():
            back = restored["groups"][key][name]
            assert back.dtype == array.dtype and back.shape == array.shape
            assert back.tobytes() == array.tobytes()  # bit-identical
            assert back.flags.writeable


def test_checkpoint_keeps_empty_groups():
    checkpoint = {"frame": 3, "groups": {"cloth": {"x": np.ones(2)}, "kinematic": {}}}
    restored = checkpoints.decode_checkpoint(checkpoints.encode_checkpoint(checkpoint))
    assert restored["groups"].keys() == {"cloth", "kinematic"} and restored["groups"]["kinematic"] == {}
    assert restored["groups"]["cloth"].keys() == {"x"}


def test_checkpoint_refuses_objects_and_corrupted_blobs():
    with pytest.raises(checkpoints.CheckpointError, match="pd/names"):
        checkpoints.encode_checkpoint({"frame": 1, "groups": {"pd": {"names": np.array(["a"], dtype=object)}}})
    with pytest.raises(checkpoints.CheckpointError, match="frame"):
        checkpoints.encode_checkpoint({"groups": {}})
    blob = checkpoints.encode_checkpoint(sample_checkpoint())
    with pytest.raises(checkpoints.CheckpointError, match="cannot be read"):
        checkpoints.decode_checkpoint(blob[: len(blob) // 2])


def test_checkpoint_choice_is_the_latest_before_the_first_new_frame():
    frames = [5, 10, 15, 20]
    assert checkpoints.checkpoint_to_resume_from(frames, 1, 16) == 15
    assert checkpoints.checkpoint_to_resume_from(frames, 1, 15) == 10  # state at end of 10 yields 11 next
    assert checkpoints.checkpoint_to_resume_from(frames, 1, 21) == 20
    assert checkpoints.checkpoint_to_resume_from(frames, 1, 5) is None
    assert checkpoints.checkpoint_to_resume_from(frames, 12, 14) is None  # from another range


# ---- bake record and continuation -------------------------------------------------------------


def record(last_frame=20, route="SHAPE_KEYS"):
    return BakeRecord(1, 48, route, {"Sheet": "abc", "Shirt": "def"}, last_frame,
                      {5: b"five", 10: b"ten", 15: b"fifteen", 20: b"twenty"})


def test_bake_record_round_trips_through_property_values():
    original = record()
    values = original.to_properties()
    assert all(isinstance(key, str) for key in values["checkpoints"])
    assert BakeRecord.from_properties(values) == original
    empty = BakeRecord(1, 10, "PC2", {"Sheet": "abc"})
    assert BakeRecord.from_properties(empty.to_properties()) == empty


TOPOLOGY = {"Sheet": "abc", "Shirt": "def"}


def test_resume_continues_after_the_last_baked_frame_from_the_latest_checkpoint():
    plan = plan_continuation(record(last_frame=23), 24, 1, 48, "SHAPE_KEYS", TOPOLOGY)
    assert plan == bake_state.Continuation(first_new_frame=24, resume_frame=20)


def test_rebake_from_an_early_frame_without_checkpoint_simulates_from_the_start():
    assert plan_continuation(record(), 4, 1, 48, "SHAPE_KEYS", TOPOLOGY).resume_frame is None
    assert plan_continuation(record(), 6, 1, 48, "SHAPE_KEYS", TOPOLOGY).resume_frame == 5


def test_extending_the_range_resumes_a_complete_bake():
    assert plan_continuation(record(last_frame=48), 49, 1, 60, "SHAPE_KEYS", TOPOLOGY).resume_frame == 20


@pytest.mark.parametrize("change, words", [
    (dict(topologies={"Sheet": "CHANGED", "Shirt": "def"}), ["'Sheet'", "topology changed"]),
    (dict(topologies={"Sheet": "abc"}), ["'Shirt'", "no longer simulated"]),
    (dict(topologies={**TOPOLOGY, "Cape": "x"}), ["'Cape'", "not part of the bake"]),
    (dict(route="PC2"), ["written as shape keys", "now a PC2 cache"]),
    (dict(route="SHAPE_KEYS+GEOMETRY_NODES"), ["keyframed hair", "now shape keys and hair in a Geometry Nodes bake"]),
    (dict(frame_start=2), ["starts at frame 1", "2"]),
    (dict(first_new_frame=22), ["frame 22", "1..20"]),
    (dict(first_new_frame=1), ["frame 1"]),
    (dict(first_new_frame=21, frame_end=20), ["all baked"]),
])
def test_continuation_refusals_name_the_problem(change, words):
    arguments = dict(first_new_frame=21, frame_start=1, frame_end=48, route="SHAPE_KEYS", topologies=TOPOLOGY)
    arguments.update(change)
    with pytest.raises(BakeRefused) as error:
        plan_continuation(record(), **arguments)
    for word in words:
        assert word in str(error.value)


def test_nothing_to_continue_without_a_bake():
    with pytest.raises(BakeRefused, match="no Tangle bake"):
        plan_continuation(None, 5, 1, 48, "SHAPE_KEYS", TOPOLOGY)
    with pytest.raises(BakeRefused, match="no Tangle bake"):
        plan_continuation(BakeRecord(1, 48, "SHAPE_KEYS", TOPOLOGY), 5, 1, 48, "SHAPE_KEYS", TOPOLOGY)


# ---- PC2 ---------------------------------------------------------------------------------------


def test_pc2_writer_appends_and_truncation_keeps_earlier_bytes(tmp_path):
    path = tmp_path / "cache" / "Sheet.pc2"
    rng = np.random.default_rng(1)
    samples = rng.normal(size=(6, 4, 3)).astype(np.float32)
    writer = pc2.Pc2Writer(path, 4, start_frame=3)
    for index, positions in enumerate(samples):
        writer.append(3 + index, positions)
    start, rate, read = pc2.read_pc2(path)
    assert (start, rate) == (3.0, 1.0) and read.tobytes() == samples.tobytes()
    assert path.stat().st_size == 32 + 6 * 4 * 12
    before = path.read_bytes()[32: 32 + 3 * 4 * 12]
    writer = pc2.Pc2Writer(path, 4, start_frame=3, keep_samples=3)  # continue from frame 6
    assert writer.next_frame == 6
    assert pc2.read_header(path) == (4, 3.0, 1.0, 3)
    writer.append(6, samples[3] + 1)
    _, _, read = pc2.read_pc2(path)
    assert read.shape == (4, 4, 3) and path.read_bytes()[32: 32 + 3 * 4 * 12] == before
    np.testing.assert_array_equal(read[3], samples[3] + 1)


def test_pc2_writer_refuses_gaps_wrong_shapes_and_mismatched_files(tmp_path):
    path = tmp_path / "Sheet.pc2"
    writer = pc2.Pc2Writer(path, 4, start_frame=1)
    with pytest.raises(pc2.Pc2Error, match="frame 2 arrived, the next sample is frame 1"):
        writer.append(2, np.zeros((4, 3)))
    with pytest.raises(pc2.Pc2Error, match=r"\(5, 3\)"):
        writer.append(1, np.zeros((5, 3)))
    writer.append(1, np.zeros((4, 3)))
    with pytest.raises(pc2.Pc2Error, match="5 points"):
        pc2.Pc2Writer(path, 5, start_frame=1, keep_samples=1)
    with pytest.raises(pc2.Pc2Error, match="holds 1 frames, 2"):
        pc2.Pc2Writer(path, 4, start_frame=1, keep_samples=2)
    (tmp_path / "bad.pc2").write_bytes(b"NOTAPC2" * 10)
    with pytest.raises(pc2.Pc2Error, match="not a PC2"):
        pc2.read_header(tmp_path / "bad.pc2")


# ---- live stats --------------------------------------------------------------------------------


def test_stats_line_shows_the_solvers_residual():
    line = bake_state.stats_line({"iterations": 40, "contacts": 3, "global_residual": 3.2e-7, "step_ms": 2.0})
    assert line == "40 iterations · 3 contacts · residual 3.2e-07 · 2.0 ms/substep"
    assert "FB residual 0.0012" in bake_state.stats_line({"fischer_burmeister": 0.0012, "mean_dv": 1.0})
    assert "residual" not in bake_state.stats_line({"iterations": 4, "global_fallback": "cholesky"})


# ---- local server interpreter check ------------------------------------------------------------


def test_interpreter_check_accepts_this_python():
    check_interpreter(sys.executable)


def test_interpreter_check_names_what_is_missing(tmp_path):
    isolated = tmp_path / "python-without-packages"
    isolated.write_text(f"#!/bin/sh\nexec '{sys.executable}' -I -S \"$@\"\n")
    isolated.chmod(isolated.stat().st_mode | stat.S_IXUSR)
    with pytest.raises(LocalServerError) as error:
        check_interpreter(str(isolated))
    message = str(error.value)
    assert str(isolated) in message and "solver_server" in message and "numpy" in message
    assert "Server Python" in message
    with pytest.raises(LocalServerError, match="cannot run"):
        check_interpreter(os.path.join(tmp_path, "no-such-python"))


def test_stats_line_says_what_contact_left_unresolved():
    line = bake_state.stats_line({"iterations": 40, "contacts": 3, "self_contacts_left": 4, "recovered_inside": 12,
                                  "teleported_colliders": ["Head"], "self_contacts_left_objects": ["Shirt"],
                                  "collider_edges_left": 2, "unreachable_contacts": 15,
                                  "stretch_beyond_limit": 37, "stretch_beyond_limit_objects": ["Hammock"],
                                  "stretch_worst": 1.1462})
    assert "4 self-contacts unresolved (Shirt)" in line and "12 points moved out of a collider" in line
    assert "2 edges through a collider" in line and "15 hair points rooted inside a collider" in line
    assert "37 cloth edges stretched past their limit (Hammock), up to 1.15× their length" in line
    assert "teleported: Head" in line
    assert "unresolved" not in bake_state.stats_line({"iterations": 40, "self_contacts_left": 0})


def test_the_local_address_names_no_port_and_is_described_as_local():
    from blender_addon.core.connection import LOCAL, is_local

    assert LOCAL == "local" and is_local("local") and is_local(" Local ") and not is_local("tcp://127.0.0.1:5555")
    connection = ServerConnection("tcp://127.0.0.1:40123", local=True)
    connection.validate()
    assert connection.describe() == "tcp://127.0.0.1:40123 (local solver)"


def test_bake_routes_carry_the_hair_cache_and_old_records_read_as_keyframes():
    assert bake_route("PC2") == "PC2" and bake_route("PC2", "KEYFRAMES") == "PC2"
    assert bake_route("SHAPE_KEYS", "GEOMETRY_NODES") == "SHAPE_KEYS+GEOMETRY_NODES"
    assert split_route("SHAPE_KEYS+GEOMETRY_NODES") == ("SHAPE_KEYS", "GEOMETRY_NODES")
    assert split_route("PC2") == ("PC2", "KEYFRAMES")
    assert describe_route("PC2+GEOMETRY_NODES") == "a PC2 cache and hair in a Geometry Nodes bake"

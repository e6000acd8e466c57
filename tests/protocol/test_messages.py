"""Message table (protocol/messages.py): every type survives the wire and validates; bad
bodies are rejected naming the key."""

from __future__ import annotations

import numpy as np
import pytest

from protocol import messages as m
from protocol.errors import ProtocolError
from protocol.wire import Message, decode, encode


def roundtrip(message: Message) -> Message:
    return decode([bytes(frame) for frame in encode(message)])


SCENE = {
    "gravity": [0.0, 0.0, -9.81],
    "time": {"fps": 24, "frame_start": 1, "frame_end": 5, "substeps": 4},
    "objects": [
        {
            "id": "Cloth",
            "kind": "cloth",
            "vertices": np.random.default_rng(0).random((25, 3)),
            "triangles": np.arange(96, dtype="<i4").reshape(32, 3) % 25,
            "pins": {"indices": np.array([0, 4], "<i4"), "weights": np.ones(2)},
            "params": {"density": 0.2},
        }
    ],
}

ALL_MESSAGES = {
    "hello": (m.hello("test"), "c2s"),
    "welcome": (m.welcome("tangle-solver 0.1.0", "cpu", {"name": "x", "memory_bytes": 1}, 1 << 30, 1.0), "s2c"),
    "submit": (m.submit(SCENE, job="j1"), "c2s"),
    "accepted": (m.accepted("j1", 1, 5, ["Collider"]), "s2c"),
    "drive": (m.drive("j1", 2, {"Collider": {"matrix_world": np.eye(4), "vertices": np.zeros((3, 3))}}), "c2s"),
    "progress": (m.progress("j1", 2, 2, 5, 0.5, 1.5), "s2c"),
    "frame": (m.frame("j1", 2, {"Cloth": np.ones((25, 3), np.float32)}, {"iterations": 10}), "s2c"),
    "done": (m.done("j1", 5, 5, False, 2.0), "s2c"),
    "cancel": (m.cancel("j1"), "c2s"),
    "resume": (m.resume("j1", 3), "c2s"),
    "ping": (m.ping(), "c2s"),
    "pong": (m.pong("j1", frames_sent=3, ended=False), "s2c"),
    "error": (m.error("frames_unavailable", "gone", job="j1", object="Cloth", frame=3), "s2c"),
}


def test_table_covers_every_type():
    assert set(ALL_MESSAGES) == set(m.SPECS)


@pytest.mark.parametrize("name", sorted(ALL_MESSAGES))
def test_every_message_type_round_trips_and_validates(name):
    message, direction = ALL_MESSAGES[name]
    out = m.validate(roundtrip(message), direction)
    assert out.type == name and out.job == message.job
    assert set(out.body) == set(message.body)


def test_array_payloads_survive_exactly():
    out = roundtrip(ALL_MESSAGES["submit"][0]).body["scene"]["objects"][0]
    source = SCENE["objects"][0]
    np.testing.assert_array_equal(out["vertices"], source["vertices"])
    np.testing.assert_array_equal(out["triangles"], source["triangles"])
    np.testing.assert_array_equal(out["pins"]["indices"], source["pins"]["indices"])
    positions = roundtrip(ALL_MESSAGES["frame"][0]).body["objects"]["Cloth"]["positions"]
    assert positions.dtype == np.float32 and positions.shape == (25, 3)


def test_direction_is_enforced():
    with pytest.raises(ProtocolError, match="unknown message type 'welcome' from a client"):
        m.validate(roundtrip(ALL_MESSAGES["welcome"][0]), "c2s")
    with pytest.raises(ProtocolError, match="unknown message type 'submit' from a server"):
        m.validate(roundtrip(ALL_MESSAGES["submit"][0]), "s2c")
    with pytest.raises(ProtocolError, match="'teleport'"):
        m.validate(Message("teleport"), "c2s")


@pytest.mark.parametrize(
    "message, fragment",
    [
        (Message("hello", body={"client": "x"}), "missing the key 'protocol'"),
        (Message("hello", body={"client": "x", "protocol": 1, "extra": 2}), "unknown key 'extra'"),
        (Message("hello", body={"client": 5, "protocol": 1}), "'client' must be str"),
        (Message("hello", body={"client": "x", "protocol": True}), "'protocol' must be int"),
        (Message("drive", body={"frame": 1, "objects": {}}), "needs the header 'job'"),
        (Message("drive", job="j", body={"frame": 1.5, "objects": {}}), "'frame' must be int"),
        (Message("submit", job="j", body={"scene": {}}), "must not carry"),
        (Message("cancel", job="j" * 200), "longer than"),
    ],
)
def test_bad_bodies_are_rejected_naming_the_key(message, fragment):
    with pytest.raises(ProtocolError) as info:
        m.validate(message, "c2s")
    assert info.value.code == "bad_message"
    assert fragment in str(info.value)


def test_error_builder_refuses_unknown_codes():
    with pytest.raises(ValueError, match="unknown error code"):
        m.error("oops", "x")

"""Random input thrown at decode(): only ProtocolError may come out, and anything accepted
must re-encode to an equivalent message."""

from __future__ import annotations

import msgpack
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.errors import ProtocolError
from protocol.wire import ALLOWED_DTYPES, VERSION_FRAME, Message, decode, encode

FUZZ = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

plain_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=20,
)


def placeholders(max_index: int = 3):
    return st.fixed_dictionaries(
        {
            "$nd": st.integers(-1, max_index) | st.booleans() | st.text(max_size=2),
            "dtype": st.sampled_from([*ALLOWED_DTYPES, "|O", "<U4", ">f4", "<c8", ""]) | st.integers(-5, 5),
            "shape": st.lists(st.integers(-2, 8) | st.floats(), max_size=4) | st.integers(-5, 5),
        }
    )


header_like = st.fixed_dictionaries(
    {
        "type": st.text(max_size=8) | st.integers(-5, 5),
        "seq": st.integers(-3, 2**64 - 1) | st.booleans() | st.none(),
        "job": st.none() | st.text(max_size=4) | st.integers(-5, 5),
        "body": st.dictionaries(st.text(max_size=4), plain_values | placeholders(), max_size=4) | plain_values,
    }
)


def check_decode(frames) -> None:
    try:
        message = decode(frames)
    except ProtocolError:
        return
    again = decode([bytes(f) for f in encode(message)])  # whatever decodes must re-encode
    assert (again.type, again.seq, again.job) == (message.type, message.seq, message.job)


@FUZZ
@given(st.lists(st.binary(max_size=64), max_size=6))
def test_random_frames(frames):
    check_decode(frames)


@FUZZ
@given(header_like, st.lists(st.binary(max_size=48), max_size=4), st.sampled_from([VERSION_FRAME, b"TANGLE/9", b"x"]))
def test_structured_headers_with_random_data_frames(header, data, version):
    check_decode([version, msgpack.packb(header, use_bin_type=True), *data])


@FUZZ
@given(st.data())
def test_mutated_valid_messages(data):
    array = np.arange(12, dtype="<f4").reshape(4, 3)
    frames = [bytearray(f) for f in encode(Message("frame", 3, "j", {"frame": 3, "objects": {"A": {"positions": array}}}))]
    index = data.draw(st.integers(0, len(frames) - 1))
    frame = frames[index]
    for _ in range(data.draw(st.integers(1, 4))):
        if frame and data.draw(st.booleans()):
            frame[data.draw(st.integers(0, len(frame) - 1))] = data.draw(st.integers(0, 255))
        else:
            cut = data.draw(st.integers(0, len(frame)))
            del frame[cut:]
    check_decode([bytes(f) for f in frames])

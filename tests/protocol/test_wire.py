"""Wire format v1: round trips and rejection of malformed input (protocol/wire.py)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from protocol.errors import ProtocolError
from protocol.wire import (
    ALLOWED_DTYPES,
    MAX_ARRAYS,
    MAX_HEADER_BYTES,
    MAX_NESTING,
    VERSION_FRAME,
    Message,
    decode,
    encode,
)


def roundtrip(message: Message) -> Message:
    return decode([bytes(frame) for frame in encode(message)])


def header(type_="ping", seq=1, job=None, body=None) -> bytes:
    return msgpack.packb({"type": type_, "seq": seq, "job": job, "body": body or {}}, use_bin_type=True)


def placeholder(index=0, dtype="<f4", shape=(2, 3)) -> dict:
    return {"$nd": index, "dtype": dtype, "shape": list(shape)}


def expect_error(frames, code: str, fragment: str) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        decode(frames)
    assert info.value.code == code, info.value
    assert fragment in str(info.value), info.value
    return info.value


# -- round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ALLOWED_DTYPES)
def test_every_allowed_dtype_round_trips_bit_exact(dtype):
    rng = np.random.default_rng(1)
    if dtype == "|b1":
        array = rng.random((5, 3)) > 0.5
    else:
        array = (rng.random((5, 3)) * 100).astype(dtype)
    out = roundtrip(Message("frame", 7, "job-1", {"a": array})).body["a"]
    assert out.dtype.str == dtype
    assert out.shape == (5, 3)
    np.testing.assert_array_equal(out, array)


def test_header_fields_and_plain_values_round_trip():
    body = {"s": "héllo", "i": -(2**63), "u": 2**64 - 1, "f": 1.5, "b": True, "n": None, "raw": b"\x00\xff", "l": [1, "x"]}
    out = roundtrip(Message("progress", 42, "j", body))
    assert (out.type, out.seq, out.job) == ("progress", 42, "j")
    assert out.body == body


def test_nested_arrays_in_dicts_and_lists():
    a, b, c = np.arange(6, dtype="<f8").reshape(2, 3), np.arange(4, dtype="<i4"), np.ones((1, 1, 2), "|u1")
    out = roundtrip(Message("x", body={"objects": {"A": {"v": a, "list": [b, {"deep": c}]}}})).body
    np.testing.assert_array_equal(out["objects"]["A"]["v"], a)
    np.testing.assert_array_equal(out["objects"]["A"]["list"][0], b)
    np.testing.assert_array_equal(out["objects"]["A"]["list"][1]["deep"], c)


def test_zero_dimensional_and_empty_arrays():
    scalar, empty, empty3 = np.array(2.5, "<f8"), np.zeros(0, "<i4"), np.zeros((0, 3), "<f4")
    out = roundtrip(Message("x", body={"s": scalar, "e": empty, "e3": empty3})).body
    assert out["s"].shape == () and out["s"] == 2.5
    assert out["e"].shape == (0,) and out["e"].dtype.str == "<i4"
    assert out["e3"].shape == (0, 3)


def test_non_contiguous_and_big_endian_inputs_are_encoded_as_little_endian_c_order():
    base = np.arange(24, dtype=">f8").reshape(4, 6)
    strided = base[::2, 1::2]  # non-contiguous AND big-endian
    fortran = np.asfortranarray(np.arange(6, dtype="<i4").reshape(2, 3))
    frames = encode(Message("x", body={"s": strided, "f": fortran}))
    assert bytes(frames[2]) == np.ascontiguousarray(strided, dtype="<f8").tobytes()
    assert bytes(frames[3]) == np.array([[0, 1, 2], [3, 4, 5]], "<i4").tobytes()
    out = decode([bytes(f) for f in frames]).body
    assert out["s"].dtype.str == "<f8"
    np.testing.assert_array_equal(out["s"], strided)
    np.testing.assert_array_equal(out["f"], fortran)


def test_numpy_scalars_become_plain_values():
    out = roundtrip(Message("x", body={"i": np.int64(3), "f": np.float32(0.5), "b": np.bool_(True)})).body
    assert out == {"i": 3, "f": 0.5, "b": True}
    assert type(out["i"]) is int and type(out["b"]) is bool


def test_decoded_arrays_are_read_only_views():
    out = roundtrip(Message("x", body={"a": np.zeros(3, "<f4")})).body["a"]
    assert not out.flags.writeable
    with pytest.raises(ValueError):
        out[0] = 1.0


def test_zmq_frames_decode_without_copy():
    zmq = pytest.importorskip("zmq")
    frames = [zmq.Frame(bytes(f)) for f in encode(Message("x", body={"a": np.arange(3, dtype="<f4")}))]
    np.testing.assert_array_equal(decode(frames).body["a"], [0, 1, 2])


# -- encode-side refusals ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, fragment",
    [
        (np.array([1 + 2j]), "'<c16' is not allowed"),
        (np.array(["ab"]), "is not allowed"),
        (np.array([object()], dtype=object), "is not allowed"),
        (np.zeros(2, "<f2"), "is not allowed"),
        ({1: 2}, "not a string"),
        ({"$nd": 0}, "reserved"),
        ({1, 2}, "type set"),
        (2**64, "64 bits"),
    ],
)
def test_encode_refuses_what_the_wire_cannot_carry(value, fragment):
    with pytest.raises(ProtocolError) as info:
        encode(Message("x", body={"v": value}))
    assert fragment in str(info.value)
    assert "body.v" in str(info.value)


def test_encode_refuses_bad_header_fields():
    with pytest.raises(ProtocolError, match="seq"):
        encode(Message("x", seq=-1))
    with pytest.raises(ProtocolError, match="type"):
        encode(Message(""))
    with pytest.raises(ProtocolError, match="job"):
        encode(Message("x", job=5))


# -- decode-side refusals -----------------------------------------------------------------------


def test_bad_version_frames():
    expect_error([b"TANGLE/2", header()], "version_mismatch", "TANGLE/2")
    expect_error([b"HTTP/1.1", header()], "malformed", "frame 0")
    expect_error([b"", header()], "malformed", "frame 0")


def test_truncated_messages():
    expect_error([], "malformed", "0 frame(s)")
    expect_error([VERSION_FRAME], "malformed", "1 frame(s)")
    full = header(body={"a": placeholder()})
    expect_error([VERSION_FRAME, full[:-3]], "malformed", "truncated")
    expect_error([VERSION_FRAME, full], "malformed", "does not name one of the 0 data frames")
    expect_error([VERSION_FRAME, full, b"\x00" * 20], "malformed", "needs 24 bytes but data frame 2 has 20")


def test_extra_and_doubly_referenced_frames():
    expect_error([VERSION_FRAME, header(), b"\x00" * 4], "malformed", "not referenced")
    body = {"a": placeholder(0, "<f4", [1]), "b": placeholder(0, "<f4", [1])}
    expect_error([VERSION_FRAME, header(body=body), b"\x00" * 4], "malformed", "referenced twice")
    expect_error([VERSION_FRAME, header() + b"\x01"], "malformed", "trailing bytes")


@pytest.mark.parametrize(
    "shape, fragment",
    [
        ([2, 2], "needs 16 bytes but data frame 2 has 24"),  # shape product mismatch
        ([-2, -3], "invalid extent"),
        ([2.0, 3], "invalid extent"),
        ([True, 6], "invalid extent"),
        ("23", "shape must be a list"),
        ([1] * 33, "shape must be a list"),
        ([2**40, 2**40], "exceeds"),  # huge declared size
    ],
)
def test_wrong_shapes(shape, fragment):
    body = {"a": {"$nd": 0, "dtype": "<f4", "shape": shape}}
    expect_error([VERSION_FRAME, header(body=body), b"\x00" * 24], "malformed", fragment)


@pytest.mark.parametrize("dtype", ["|O", "<U4", ">f4", "<f2", "<c8", "V8", "float32", 5])
def test_disallowed_dtypes(dtype):
    body = {"a": {"$nd": 0, "dtype": dtype, "shape": [1]}}
    expect_error([VERSION_FRAME, header(body=body), b"\x00" * 8], "malformed", "is not allowed")


def test_placeholder_must_be_exact_and_index_valid():
    expect_error([VERSION_FRAME, header(body={"a": {"$nd": 0, "dtype": "<f4", "shape": [1], "x": 1}}), b"\0" * 4],
                 "malformed", "exactly the keys")
    expect_error([VERSION_FRAME, header(body={"a": placeholder(-1, "<f4", [1])}), b"\0" * 4],
                 "malformed", "does not name")
    expect_error([VERSION_FRAME, header(body={"a": placeholder(True, "<f4", [1])}), b"\0" * 4],
                 "malformed", "does not name")


def test_boolean_arrays_only_hold_zero_and_one():
    body = {"a": placeholder(0, "|b1", [3])}
    expect_error([VERSION_FRAME, header(body=body), b"\x00\x02\x01"], "malformed", "other than 0 and 1")


@pytest.mark.parametrize("value", [[1, 2], "text", 5, None, b"bytes"])
def test_header_must_be_a_map(value):
    expect_error([VERSION_FRAME, msgpack.packb(value)], "malformed", "must be a msgpack map")


def test_header_keys_and_types():
    expect_error([VERSION_FRAME, msgpack.packb({"type": "ping", "seq": 1, "body": {}})], "malformed", "missing ['job']")
    extra = {"type": "ping", "seq": 1, "job": None, "body": {}, "evil": 1}
    expect_error([VERSION_FRAME, msgpack.packb(extra)], "malformed", "unexpected ['evil']")
    expect_error([VERSION_FRAME, header(seq=-5)], "bad_message", "seq")
    expect_error([VERSION_FRAME, header(seq=True)], "bad_message", "seq")
    expect_error([VERSION_FRAME, header(type_=3)], "bad_message", "type")
    expect_error([VERSION_FRAME, header(job=7)], "bad_message", "job")
    bad_body = msgpack.packb({"type": "ping", "seq": 1, "job": None, "body": [1]})
    expect_error([VERSION_FRAME, bad_body], "bad_message", "body")
    int_keys = msgpack.packb({"type": "x", "seq": 1, "job": None, "body": {1: 2}})
    expect_error([VERSION_FRAME, int_keys], "malformed", "not valid msgpack")


def test_msgpack_ext_types_and_timestamps_are_refused():
    ext = msgpack.packb({"type": "ping", "seq": 1, "job": None, "body": {"x": msgpack.ExtType(5, b"abc")}})
    expect_error([VERSION_FRAME, ext], "malformed", "extension type 5")
    stamp = msgpack.packb({"type": "ping", "seq": 1, "job": None, "body": {"t": msgpack.Timestamp(1, 0)}})
    expect_error([VERSION_FRAME, stamp], "malformed", "Timestamp")


def test_garbage_bytes():
    expect_error([VERSION_FRAME, b"\xc1\xc1\xc1"], "malformed", "not valid msgpack")
    expect_error([VERSION_FRAME, b""], "malformed", "truncated")
    expect_error([VERSION_FRAME, b"\xdf\xff\xff\xff\xff"], "malformed", "")  # map declaring 4G entries


def test_nesting_limit():
    body: dict = {}
    node = body
    for _ in range(MAX_NESTING + 2):
        node["n"] = {}
        node = node["n"]
    raw = msgpack.packb({"type": "x", "seq": 1, "job": None, "body": body})
    expect_error([VERSION_FRAME, raw], "malformed", "nested deeper")
    with pytest.raises(ProtocolError, match="nested deeper"):
        encode(Message("x", body=body))


def test_size_limits():
    expect_error([VERSION_FRAME, b"\x00" * (MAX_HEADER_BYTES + 1)], "malformed", "header frame is")
    too_many = [VERSION_FRAME, header()] + [b""] * (MAX_ARRAYS + 1)
    expect_error(too_many, "malformed", "data frames, more than")
    with pytest.raises(ProtocolError, match="more than"):
        encode(Message("x", body={"s": "x" * (MAX_HEADER_BYTES + 1)}))


def test_frames_must_be_a_list_of_buffers():
    expect_error(b"TANGLE/1", "malformed", "list of frames")
    expect_error([VERSION_FRAME, 12345], "malformed", "not a byte buffer")

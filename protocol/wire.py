"""Tangle wire format v1: one multipart ZeroMQ message per protocol message.

Frame 0 is ``VERSION_FRAME``; frame 1 is a msgpack map ``{"type", "seq", "job", "body"}`` in
which every numpy array found in ``body`` (at any depth, inside dicts and lists) is replaced by a
placeholder ``{"$nd": i, "dtype": "<f4", "shape": [n, 3]}``; frame ``2 + i`` holds that array's
raw C-contiguous little-endian bytes.

:func:`decode` treats its input as untrusted: every limit below is checked and every violation
raises :class:`~protocol.errors.ProtocolError`; nothing is ever unpickled and msgpack extension
types are refused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import msgpack
import numpy as np

from .errors import ProtocolError

VERSION_FRAME = b"TANGLE/1"
PROTOCOL_VERSION = 1
VERSION_PREFIX = b"TANGLE/"

ALLOWED_DTYPES = ("<f4", "<f8", "<i4", "<u4", "<i8", "|u1", "|b1")
MAX_MESSAGE_BYTES = 1 << 30
MAX_HEADER_BYTES = 16 * 1024 * 1024
MAX_ARRAYS = 4096
MAX_NESTING = 32
MAX_NDIM = 32

ARRAY_KEY = "$nd"
_PLACEHOLDER_KEYS = frozenset((ARRAY_KEY, "dtype", "shape"))
_HEADER_KEYS = ("type", "seq", "job", "body")
_MAX_SEQ = (1 << 63) - 1


@dataclass
class Message:
    """One protocol message. ``body`` may hold numpy arrays at any depth."""

    type: str
    seq: int = 0
    job: str | None = None
    body: dict = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# encode
# --------------------------------------------------------------------------------------------


def _wire_array(array: np.ndarray, path: str) -> np.ndarray:
    """Return ``array`` as a C-contiguous little-endian array with an allowed dtype."""
    dtype = array.dtype
    if dtype.byteorder == ">" or (dtype.byteorder == "=" and not np.little_endian):
        dtype = dtype.newbyteorder("<")
    if dtype.str not in ALLOWED_DTYPES:
        raise ProtocolError(
            "bad_message",
            f"{path}: array dtype {array.dtype.str!r} is not allowed on the wire "
            f"(allowed: {', '.join(ALLOWED_DTYPES)})",
        )
    if dtype != array.dtype:
        array = array.astype(dtype)
    if not array.flags.c_contiguous:
        array = array.copy(order="C")
    return array


def _encode_value(value: Any, path: str, depth: int, buffers: list) -> Any:
    if depth > MAX_NESTING:
        raise ProtocolError("bad_message", f"{path}: nested deeper than {MAX_NESTING} levels")
    if value is None or isinstance(value, (bool, str, bytes)):
        return value
    if isinstance(value, int):
        if not -(1 << 63) <= value < (1 << 64):
            raise ProtocolError("bad_message", f"{path}: integer {value} does not fit in 64 bits")
        return value
    if isinstance(value, float):
        return float(value)
    if isinstance(value, np.ndarray):
        array = _wire_array(value, path)
        if len(buffers) >= MAX_ARRAYS:
            raise ProtocolError("bad_message", f"{path}: more than {MAX_ARRAYS} arrays in one message")
        buffers.append(memoryview(array.reshape(-1).view(np.uint8)))
        return {ARRAY_KEY: len(buffers) - 1, "dtype": array.dtype.str, "shape": list(array.shape)}
    if isinstance(value, np.generic):
        if isinstance(value, (np.bool_, np.integer, np.floating)):
            return _encode_value(value.item(), path, depth, buffers)
        raise ProtocolError("bad_message", f"{path}: numpy scalar of type {value.dtype} is not allowed")
    if isinstance(value, dict):
        if ARRAY_KEY in value:
            raise ProtocolError("bad_message", f"{path}: the key {ARRAY_KEY!r} is reserved for arrays")
        encoded = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ProtocolError("bad_message", f"{path}: map key {key!r} is not a string")
            encoded[key] = _encode_value(item, f"{path}.{key}", depth + 1, buffers)
        return encoded
    if isinstance(value, (list, tuple)):
        return [_encode_value(item, f"{path}[{i}]", depth + 1, buffers) for i, item in enumerate(value)]
    raise ProtocolError("bad_message", f"{path}: values of type {type(value).__name__} cannot be sent")


def encode(message: Message) -> list[bytes | memoryview]:
    """Encode ``message`` into the frames of one multipart ZeroMQ message.

    Array frames are memoryviews on the (possibly converted) arrays, not copies: the caller must
    not modify the arrays until the frames have been sent.
    """
    _check_header_fields(message.type, message.seq, message.job, message.body)
    buffers: list[memoryview] = []
    body = _encode_value(message.body, "body", 0, buffers)
    header = {"type": message.type, "seq": message.seq, "job": message.job, "body": body}
    packed = msgpack.packb(header, use_bin_type=True)
    if len(packed) > MAX_HEADER_BYTES:
        raise ProtocolError("bad_message", f"header is {len(packed)} bytes, more than {MAX_HEADER_BYTES}")
    total = len(VERSION_FRAME) + len(packed) + sum(b.nbytes for b in buffers)
    if total > MAX_MESSAGE_BYTES:
        raise ProtocolError("bad_message", f"message is {total} bytes, more than {MAX_MESSAGE_BYTES}")
    return [VERSION_FRAME, packed, *buffers]


# --------------------------------------------------------------------------------------------
# decode
# --------------------------------------------------------------------------------------------


def _frame_bytes(frame: Any, index: int) -> memoryview:
    """A read-only byte view of one received frame (bytes, zmq.Frame or buffer)."""
    buffer = getattr(frame, "buffer", frame)  # zmq.Frame exposes .buffer
    try:
        view = memoryview(buffer)
    except TypeError:
        raise ProtocolError("malformed", f"frame {index} is a {type(frame).__name__}, not a byte buffer") from None
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    return view.toreadonly()


def _refuse_ext(code: int, data: bytes) -> Any:
    raise ProtocolError("malformed", f"msgpack extension type {code} is not allowed")


def _unpack_header(raw: memoryview) -> Any:
    if len(raw) > MAX_HEADER_BYTES:
        raise ProtocolError("malformed", f"header frame is {len(raw)} bytes, more than {MAX_HEADER_BYTES}")
    unpacker = msgpack.Unpacker(
        raw=False,
        use_list=True,
        strict_map_key=True,
        max_buffer_size=MAX_HEADER_BYTES,
        ext_hook=_refuse_ext,
        timestamp=0,
    )
    try:
        unpacker.feed(raw)
        header = unpacker.unpack()
    except ProtocolError:
        raise
    except msgpack.OutOfData:
        raise ProtocolError("malformed", "header frame is truncated msgpack") from None
    except Exception as exc:  # msgpack raises many types (FormatError, StackError, ValueError, ...)
        raise ProtocolError("malformed", f"header frame is not valid msgpack: {exc}") from None
    if unpacker.tell() != len(raw):
        raise ProtocolError("malformed", f"header frame has {len(raw) - unpacker.tell()} trailing bytes")
    return header


def _check_header_fields(type_: Any, seq: Any, job: Any, body: Any) -> None:
    if not isinstance(type_, str) or not type_:
        raise ProtocolError("bad_message", f"header 'type' must be a non-empty string, got {type_!r}")
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= _MAX_SEQ:
        raise ProtocolError("bad_message", f"header 'seq' must be an integer in [0, 2**63), got {seq!r}")
    if job is not None and not isinstance(job, str):
        raise ProtocolError("bad_message", f"header 'job' must be a string or nil, got {type(job).__name__}")
    if not isinstance(body, dict):
        raise ProtocolError("bad_message", f"header 'body' must be a map, got {type(body).__name__}")


class _ArrayDecoder:
    """Replaces placeholders by read-only arrays viewing the data frames, each used once."""

    def __init__(self, data_frames: Sequence[memoryview]):
        self.frames = data_frames
        self.used = [False] * len(data_frames)

    def array(self, placeholder: dict, path: str) -> np.ndarray:
        if set(placeholder) != _PLACEHOLDER_KEYS:
            raise ProtocolError(
                "malformed", f"{path}: array placeholder must have exactly the keys $nd, dtype, shape"
            )
        index, dtype_str, shape = placeholder[ARRAY_KEY], placeholder["dtype"], placeholder["shape"]
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self.frames):
            raise ProtocolError(
                "malformed", f"{path}: array index {index!r} does not name one of the {len(self.frames)} data frames"
            )
        if self.used[index]:
            raise ProtocolError("malformed", f"{path}: data frame {2 + index} is referenced twice")
        if not isinstance(dtype_str, str) or dtype_str not in ALLOWED_DTYPES:
            raise ProtocolError(
                "malformed", f"{path}: dtype {dtype_str!r} is not allowed (allowed: {', '.join(ALLOWED_DTYPES)})"
            )
        if not isinstance(shape, list) or len(shape) > MAX_NDIM:
            raise ProtocolError("malformed", f"{path}: shape must be a list of at most {MAX_NDIM} integers")
        for extent in shape:
            if isinstance(extent, bool) or not isinstance(extent, int) or extent < 0:
                raise ProtocolError("malformed", f"{path}: shape {shape!r} has an invalid extent {extent!r}")
        dtype = np.dtype(dtype_str)
        declared = math.prod(shape) * dtype.itemsize
        if declared > MAX_MESSAGE_BYTES:
            raise ProtocolError(
                "malformed", f"{path}: declared size {declared} bytes exceeds the {MAX_MESSAGE_BYTES}-byte limit"
            )
        buffer = self.frames[index]
        if declared != len(buffer):
            raise ProtocolError(
                "malformed",
                f"{path}: shape {shape} x {dtype_str} needs {declared} bytes but data frame "
                f"{2 + index} has {len(buffer)}",
            )
        self.used[index] = True
        if dtype_str == "|b1" and len(buffer) and np.frombuffer(buffer, np.uint8).max() > 1:
            raise ProtocolError("malformed", f"{path}: boolean array holds bytes other than 0 and 1")
        array = np.frombuffer(buffer, dtype=dtype).reshape(shape)
        array.flags.writeable = False
        return array

    def check_all_used(self) -> None:
        unused = [2 + i for i, used in enumerate(self.used) if not used]
        if unused:
            raise ProtocolError("malformed", f"data frame(s) {unused} are not referenced by the header")


def _decode_value(value: Any, path: str, depth: int, arrays: _ArrayDecoder) -> Any:
    if depth > MAX_NESTING:
        raise ProtocolError("malformed", f"{path}: nested deeper than {MAX_NESTING} levels")
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if isinstance(value, dict):
        if ARRAY_KEY in value:
            return arrays.array(value, path)
        decoded = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ProtocolError("malformed", f"{path}: map key {key!r} is not a string")
            decoded[key] = _decode_value(item, f"{path}.{key}", depth + 1, arrays)
        return decoded
    if isinstance(value, list):
        return [_decode_value(item, f"{path}[{i}]", depth + 1, arrays) for i, item in enumerate(value)]
    raise ProtocolError("malformed", f"{path}: values of type {type(value).__name__} are not allowed")


def decode(frames: Sequence[Any]) -> Message:
    """Decode and validate one received multipart message (untrusted input).

    ``frames`` are ``bytes``, ``zmq.Frame`` or other byte buffers. Arrays in the returned body
    are read-only views on the frames (no copy). Raises :class:`ProtocolError` on any problem.
    """
    if not isinstance(frames, (list, tuple)):
        raise ProtocolError("malformed", f"expected a list of frames, got {type(frames).__name__}")
    if len(frames) < 2:
        raise ProtocolError(
            "malformed", f"message has {len(frames)} frame(s); at least 2 (version, header) are required"
        )
    if len(frames) - 2 > MAX_ARRAYS:
        raise ProtocolError("malformed", f"message has {len(frames) - 2} data frames, more than {MAX_ARRAYS}")
    views = [_frame_bytes(frame, i) for i, frame in enumerate(frames)]
    total = sum(len(v) for v in views)
    if total > MAX_MESSAGE_BYTES:
        raise ProtocolError("malformed", f"message is {total} bytes, more than {MAX_MESSAGE_BYTES}")
    version = bytes(views[0][:64])
    if version != VERSION_FRAME:
        if version.startswith(VERSION_PREFIX):
            raise ProtocolError(
                "version_mismatch",
                f"peer speaks {version.decode('ascii', 'replace')!r}, this side speaks {VERSION_FRAME.decode()!r}",
            )
        raise ProtocolError(
            "malformed", f"frame 0 must be {VERSION_FRAME!r}, got {version[:16]!r}{'...' if len(version) > 16 else ''}"
        )
    header = _unpack_header(views[1])
    if not isinstance(header, dict):
        raise ProtocolError("malformed", f"header must be a msgpack map, got {type(header).__name__}")
    keys = set(header)
    if keys != set(_HEADER_KEYS):
        missing = sorted(set(_HEADER_KEYS) - keys)
        extra = sorted(str(k) for k in keys - set(_HEADER_KEYS))
        raise ProtocolError("malformed", f"header keys wrong: missing {missing}, unexpected {extra}")
    _check_header_fields(header["type"], header["seq"], header["job"], header["body"])
    arrays = _ArrayDecoder(views[2:])
    body = _decode_value(header["body"], "body", 0, arrays)
    arrays.check_all_used()
    return Message(type=header["type"], seq=header["seq"], job=header["job"], body=body)

"""The message types of protocol v1: the one place that defines them.

Each type has a direction (client to server, ``"c2s"``, or server to client, ``"s2c"``), a rule
for the header ``job`` field and a body schema (required and optional top-level keys with their
Python types). :func:`validate` checks a decoded :class:`~protocol.wire.Message` against it;
the builder functions below make valid messages (``seq`` is filled in by the sender).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import ProtocolError
from .wire import PROTOCOL_VERSION, Message

HELLO = "hello"
WELCOME = "welcome"
SUBMIT = "submit"
ACCEPTED = "accepted"
DRIVE = "drive"
PROGRESS = "progress"
FRAME = "frame"
DONE = "done"
CANCEL = "cancel"
RESUME = "resume"
PING = "ping"
PONG = "pong"
ERROR = "error"

ERROR_CODES = (
    "version_mismatch",
    "malformed",
    "bad_message",
    "bad_scene",
    "unknown_job",
    "simulation_failed",
    "server_busy",
    "frames_unavailable",
    "internal",
)

MAX_JOB_ID_LENGTH = 128

_NUMBER = (int, float)


@dataclass(frozen=True)
class MessageSpec:
    direction: str  # "c2s", "s2c" or "both"
    job: str  # "required", "optional" or "none"
    required: dict[str, tuple[type, ...]]
    optional: dict[str, tuple[type, ...]]


SPECS: dict[str, MessageSpec] = {
    HELLO: MessageSpec("c2s", "none", {"client": (str,), "protocol": (int,)}, {}),
    WELCOME: MessageSpec(
        "s2c",
        "none",
        {
            "server": (str,),
            "protocol": (int,),
            "backend": (str,),
            "device": (dict,),
            "limits": (dict,),
            "heartbeat_s": _NUMBER,
        },
        {},
    ),
    SUBMIT: MessageSpec(
        "c2s", "none", {"scene": (dict,)}, {"job": (str,), "checkpoint_every": (int,), "resume": (dict,)}
    ),
    ACCEPTED: MessageSpec(
        "s2c", "required", {"frame_start": (int,), "frame_end": (int,), "animated": (list,)}, {}
    ),
    DRIVE: MessageSpec("c2s", "required", {"frame": (int,), "objects": (dict,)}, {}),
    PROGRESS: MessageSpec(
        "s2c",
        "required",
        {
            "frame": (int,),
            "frames_done": (int,),
            "frames_total": (int,),
            "elapsed_s": _NUMBER,
            "eta_s": _NUMBER,
        },
        {},
    ),
    FRAME: MessageSpec(
        "s2c", "required", {"frame": (int,), "objects": (dict,), "stats": (dict,)}, {"checkpoint": (dict,)}
    ),
    DONE: MessageSpec(
        "s2c",
        "required",
        {"frames_done": (int,), "last_frame": (int,), "cancelled": (bool,), "elapsed_s": _NUMBER},
        {},
    ),
    CANCEL: MessageSpec("c2s", "required", {}, {}),
    RESUME: MessageSpec("c2s", "required", {"from_frame": (int,)}, {}),
    PING: MessageSpec("both", "optional", {}, {}),
    PONG: MessageSpec("both", "optional", {}, {"frames_sent": (int,), "ended": (bool,)}),
    ERROR: MessageSpec(
        "s2c", "optional", {"code": (str,), "message": (str,)}, {"object": (str,), "frame": (int,)}
    ),
}

CLIENT_TYPES = frozenset(t for t, s in SPECS.items() if s.direction in ("c2s", "both"))
SERVER_TYPES = frozenset(t for t, s in SPECS.items() if s.direction in ("s2c", "both"))


def _type_ok(value: Any, allowed: tuple[type, ...]) -> bool:
    if isinstance(value, bool) and bool not in allowed:
        return False  # bool is an int subclass; a flag is not a count
    return isinstance(value, allowed)


def validate(message: Message, direction: str) -> Message:
    """Check ``message`` against the table for ``direction`` (``"c2s"`` or ``"s2c"``).

    Raises ``ProtocolError("bad_message", ...)`` naming the type and the offending key.
    Returns the message unchanged, for chaining.
    """
    allowed = CLIENT_TYPES if direction == "c2s" else SERVER_TYPES
    spec = SPECS.get(message.type)
    if spec is None or message.type not in allowed:
        sender = "client" if direction == "c2s" else "server"
        raise ProtocolError(
            "bad_message",
            f"unknown message type {message.type!r} from a {sender} (expected one of {', '.join(sorted(allowed))})",
        )
    if spec.job == "required":
        if not message.job:
            raise ProtocolError("bad_message", f"{message.type!r} needs the header 'job' field")
        if len(message.job) > MAX_JOB_ID_LENGTH:
            raise ProtocolError("bad_message", f"job id is longer than {MAX_JOB_ID_LENGTH} characters")
    elif spec.job == "none" and message.job is not None:
        raise ProtocolError("bad_message", f"{message.type!r} must not carry a header 'job' field")
    body = message.body
    for key, types in spec.required.items():
        if key not in body:
            raise ProtocolError("bad_message", f"{message.type!r} body is missing the key {key!r}")
    for key, value in body.items():
        types = spec.required.get(key) or spec.optional.get(key)
        if types is None:
            raise ProtocolError("bad_message", f"{message.type!r} body has an unknown key {key!r}")
        if not _type_ok(value, types):
            names = " or ".join(t.__name__ for t in types)
            raise ProtocolError(
                "bad_message", f"{message.type!r} body key {key!r} must be {names}, got {type(value).__name__}"
            )
    return message


# --------------------------------------------------------------------------------------------
# builders (seq = 0; the sending side numbers its messages)
# --------------------------------------------------------------------------------------------


def hello(client: str) -> Message:
    return Message(HELLO, body={"client": client, "protocol": PROTOCOL_VERSION})


def welcome(
    server: str, backend: str, device: dict, max_message_bytes: int, heartbeat_s: float, **extra_limits: int
) -> Message:
    limits = {"max_message_bytes": max_message_bytes, **extra_limits}
    return Message(
        WELCOME,
        body={
            "server": server,
            "protocol": PROTOCOL_VERSION,
            "backend": backend,
            "device": device,
            "limits": limits,
            "heartbeat_s": float(heartbeat_s),
        },
    )


def submit(
    scene: dict, job: str | None = None, checkpoint_every: int | None = None, resume: dict | None = None
) -> Message:
    """``checkpoint_every``: the server attaches a checkpoint to every N-th frame and the last one;
    ``resume``: a checkpoint ({"frame", "groups"}) to continue from (sent as {"checkpoint": ...})."""
    body: dict[str, Any] = {"scene": scene}
    if job is not None:
        body["job"] = job
    if checkpoint_every is not None:
        body["checkpoint_every"] = int(checkpoint_every)
    if resume is not None:
        body["resume"] = {"checkpoint": resume}
    return Message(SUBMIT, body=body)


def accepted(job: str, frame_start: int, frame_end: int, animated: list[str]) -> Message:
    return Message(
        ACCEPTED, job=job, body={"frame_start": frame_start, "frame_end": frame_end, "animated": list(animated)}
    )


def drive(job: str, frame: int, objects: dict[str, dict]) -> Message:
    return Message(DRIVE, job=job, body={"frame": frame, "objects": objects})


def progress(job: str, frame: int, frames_done: int, frames_total: int, elapsed_s: float, eta_s: float) -> Message:
    return Message(
        PROGRESS,
        job=job,
        body={
            "frame": frame,
            "frames_done": frames_done,
            "frames_total": frames_total,
            "elapsed_s": float(elapsed_s),
            "eta_s": float(eta_s),
        },
    )


def frame(
    job: str, frame_number: int, positions: dict[str, np.ndarray], stats: dict, checkpoint: dict | None = None
) -> Message:
    objects = {object_id: {"positions": array} for object_id, array in positions.items()}
    body = {"frame": frame_number, "objects": objects, "stats": stats}
    if checkpoint is not None:
        body["checkpoint"] = checkpoint
    return Message(FRAME, job=job, body=body)


def done(job: str, frames_done: int, last_frame: int, cancelled: bool, elapsed_s: float) -> Message:
    return Message(
        DONE,
        job=job,
        body={
            "frames_done": frames_done,
            "last_frame": last_frame,
            "cancelled": bool(cancelled),
            "elapsed_s": float(elapsed_s),
        },
    )


def cancel(job: str) -> Message:
    return Message(CANCEL, job=job, body={})


def resume(job: str, from_frame: int) -> Message:
    return Message(RESUME, job=job, body={"from_frame": from_frame})


def ping(job: str | None = None) -> Message:
    return Message(PING, job=job, body={})


def pong(job: str | None = None, frames_sent: int | None = None, ended: bool | None = None) -> Message:
    """A pong for a job-level ping tells the client the last frame the server sent for the job
    and whether its final message (done/error) was sent, so the client can detect lost frames."""
    body: dict[str, Any] = {}
    if frames_sent is not None:
        body["frames_sent"] = int(frames_sent)
    if ended is not None:
        body["ended"] = bool(ended)
    return Message(PONG, job=job, body=body)


def error(
    code: str, message: str, job: str | None = None, object: str | None = None, frame: int | None = None
) -> Message:
    if code not in ERROR_CODES:
        raise ValueError(f"unknown error code {code!r} (expected one of {', '.join(ERROR_CODES)})")
    body: dict[str, Any] = {"code": code, "message": message}
    if object is not None:
        body["object"] = object
    if frame is not None:
        body["frame"] = int(frame)
    return Message(ERROR, job=job, body=body)

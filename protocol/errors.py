"""Exceptions shared by both ends of the Tangle protocol."""

from __future__ import annotations


class ProtocolError(Exception):
    """A message that cannot be encoded or decoded.

    ``code`` is one of the wire error codes: ``"version_mismatch"`` (frame 0 names another
    protocol version), ``"malformed"`` (the frames or the msgpack header cannot be parsed or
    break a limit) or ``"bad_message"`` (well-formed, but the header or body does not match the
    message table in :mod:`protocol.messages`).
    """

    def __init__(self, code: str, message: str):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class SolverError(Exception):
    """The solver server reported an ``error``, or did not answer in time.

    ``code`` is a server error code (see ``protocol.messages.ERROR_CODES``) or, raised by the
    client itself, ``"timeout"`` (server silent for longer than the client's timeout),
    ``"protocol"`` (the server sent something the client cannot decode) or ``"no_drive"``
    (the scene has animated objects but no ``drive`` callable was given).
    ``object`` and ``frame`` name the scene object and frame when known.
    """

    def __init__(self, code: str, message: str, object: str | None = None, frame: int | None = None):
        where = []
        if object is not None:
            where.append(f"object {object!r}")
        if frame is not None:
            where.append(f"frame {frame}")
        suffix = f" ({', '.join(where)})" if where else ""
        super().__init__(f"{code}: {message}{suffix}")
        self.code = code
        self.message = message
        self.object = object
        self.frame = frame

"""Tangle protocol v1: wire format, message table and a plain-Python client.

Internal imports are relative so that build_addon.py can vendor this package into the
Blender extension.
"""

from .errors import ProtocolError, SolverError
from .wire import PROTOCOL_VERSION, VERSION_FRAME, Message, decode, encode

__all__ = ["ProtocolError", "SolverError", "Message", "encode", "decode", "PROTOCOL_VERSION", "VERSION_FRAME"]

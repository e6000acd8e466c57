"""Where and how the add-on reaches a solver server: address plus optional CURVE key files. Blender-free.

A :class:`ServerConnection` is resolved on the main thread (from the scene's address or a server
profile of the add-on preferences) and handed to the bake worker, which opens the
``protocol.client.SolverClient`` with :meth:`ServerConnection.client_options`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


# the scene address that means "a solver this Blender starts on 127.0.0.1 at the first bake and reuses after"
# (operators/server.py); no port is stored in the file, so a saved scene never points at a dead server
LOCAL = "local"


def is_local(address: str) -> bool:
    """Whether a scene's server address asks for the local solver (``LOCAL``, any case, spaces ignored)."""
    return address.strip().lower() == LOCAL


class ConnectionSettingsError(ValueError):
    """The connection settings cannot work (missing key file, unknown profile...); nothing was sent."""


@dataclass(frozen=True)
class ServerConnection:
    """address: ZeroMQ address, e.g. "tcp://gpu-box:5555".
    server_public_key_file: the server's public certificate (``server.key``); empty = no encryption.
    client_secret_key_file: this client's ``*.key_secret`` certificate (Ironhouse: the server accepts
    only authorized client keys); empty = a fresh key pair, which an Ironhouse server refuses.
    profile: name of the preferences profile this came from ("" for the scene's own address).
    local: the scene asked for the local solver and this is its address.
    """

    address: str
    server_public_key_file: str = ""
    client_secret_key_file: str = ""
    profile: str = ""
    local: bool = False

    @property
    def encrypted(self) -> bool:
        return bool(self.server_public_key_file)

    def describe(self) -> str:
        """"tcp://gpu-box:5555 (profile 'GPU box', CURVE)" for messages and the panel."""
        details = [f"profile '{self.profile}'"] if self.profile else []
        details += ["local solver"] if self.local else []
        details += ["CURVE"] if self.encrypted else []
        return self.address + (f" ({', '.join(details)})" if details else "")

    def validate(self) -> None:
        """Raise :class:`ConnectionSettingsError` naming the profile and file when a setting cannot work."""
        where = f"server profile '{self.profile}'" if self.profile else "the scene's server settings"
        if not self.address.strip():
            raise ConnectionSettingsError(f"{where}: the server address is empty")
        if "://" not in self.address:
            raise ConnectionSettingsError(
                f"{where}: address '{self.address}' has no transport; expected e.g. tcp://127.0.0.1:5555")
        if self.client_secret_key_file and not self.server_public_key_file:
            raise ConnectionSettingsError(
                f"{where}: a client secret key file is set but no server public key file; CURVE needs both")
        for label, path in (("server public key file", self.server_public_key_file),
                            ("client secret key file", self.client_secret_key_file)):
            if path and not os.path.isfile(path):
                raise ConnectionSettingsError(f"{where}: the {label} '{path}' does not exist")

    def client_options(self) -> dict:
        """Keyword arguments for ``SolverClient(address, timeout, **options)`` (validated first)."""
        self.validate()
        if not self.encrypted:
            return {}
        return {"server_public_key": self.server_public_key_file,
                "client_secret_key_file": self.client_secret_key_file or None}


def open_client(connection: ServerConnection, timeout: float):
    """A ``protocol.client.SolverClient`` for ``connection`` (raises SolverError("connect") on a bad address)."""
    from .._protocol import solver_client_class

    return solver_client_class()(connection.address, timeout=timeout, **connection.client_options())

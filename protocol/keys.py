"""CURVE key files for remote use (ZeroMQ Ironhouse: the server has a key pair and accepts only
clients whose public keys sit in its authorized-clients folder).

Layout made by :func:`generate_keys` (``python -m solver_server --generate-keys DIR``)::

    DIR/server.key            server public key (give this to clients)
    DIR/server.key_secret     server secret key (mode 0600, stays on the server)
    DIR/client.key            a client public key
    DIR/client.key_secret     the client's secret key (mode 0600, copy to the client machine)
    DIR/authorized_clients/   public keys the server accepts (client.key is copied here)

Files are ``zmq.auth`` certificates (ZPL text), readable with :func:`zmq.auth.load_certificate`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import zmq

MIN_LIBZMQ = (4, 3, 3)  # older libzmq releases have known CURVE/ZAP vulnerabilities
SERVER_NAME = "server"
CLIENT_NAME = "client"
AUTHORIZED_DIR = "authorized_clients"


def require_curve() -> None:
    """Raise RuntimeError unless this libzmq supports CURVE and is at least MIN_LIBZMQ."""
    if not zmq.has("curve"):
        raise RuntimeError("this libzmq was built without CURVE support; install a pyzmq wheel with libsodium")
    if zmq.zmq_version_info() < MIN_LIBZMQ:
        wanted = ".".join(map(str, MIN_LIBZMQ))
        raise RuntimeError(f"libzmq {zmq.zmq_version()} is too old for CURVE; {wanted} or newer is required")


def _make_pair(directory: Path, name: str) -> tuple[Path, Path]:
    import zmq.auth

    public, secret = (Path(p) for p in zmq.auth.create_certificates(directory, name))
    os.chmod(secret, 0o600)
    return public, secret


def generate_keys(directory: str | os.PathLike, client_name: str = CLIENT_NAME) -> dict[str, Path]:
    """Create (or add to) a key folder: a server pair unless one exists, and one client pair
    named ``client_name`` whose public key is authorized. Refuses to overwrite existing keys."""
    require_curve()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    authorized = directory / AUTHORIZED_DIR
    authorized.mkdir(exist_ok=True)
    if (directory / f"{client_name}.key").exists():
        raise FileExistsError(f"{directory / (client_name + '.key')} already exists; choose another client name")
    server_public = directory / f"{SERVER_NAME}.key"
    server_secret = directory / f"{SERVER_NAME}.key_secret"
    if not server_secret.exists():
        server_public, server_secret = _make_pair(directory, SERVER_NAME)
    client_public, client_secret = _make_pair(directory, client_name)
    shutil.copy(client_public, authorized / client_public.name)
    return {
        "server_public": server_public,
        "server_secret": server_secret,
        "client_public": client_public,
        "client_secret": client_secret,
        "authorized": authorized,
    }


def load_public_key(key_or_path: str | bytes | os.PathLike) -> bytes:
    """A Z85 public key given directly (40 characters) or as a certificate file path."""
    if isinstance(key_or_path, bytes):
        key = key_or_path
    elif isinstance(key_or_path, str) and len(key_or_path) == 40 and not os.path.exists(key_or_path):
        key = key_or_path.encode("ascii")
    else:
        import zmq.auth

        key, _ = zmq.auth.load_certificate(key_or_path)
    if len(key) != 40:
        raise ValueError(f"a CURVE public key is 40 Z85 characters, got {len(key)}")
    return key


def load_key_pair(secret_file: str | os.PathLike) -> tuple[bytes, bytes]:
    """(public, secret) from a ``*.key_secret`` certificate file."""
    import zmq.auth

    public, secret = zmq.auth.load_certificate(secret_file)
    if not secret:
        raise ValueError(f"{secret_file} holds no secret key (pass the .key_secret file)")
    return public, secret

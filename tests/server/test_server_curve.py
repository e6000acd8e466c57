"""CURVE (Ironhouse): with --keys only authorized clients get answers; key files are private."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.client import SolverClient
from protocol.errors import SolverError
from protocol.keys import generate_keys

from scenes import grid_cloth

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def keys(tmp_path):
    return generate_keys(tmp_path / "keys")


def test_key_files_are_private(keys):
    for name in ("server_secret", "client_secret"):
        assert stat.S_IMODE(keys[name].stat().st_mode) == 0o600
    assert (keys["authorized"] / keys["client_public"].name).is_file()
    with pytest.raises(FileExistsError):
        generate_keys(keys["authorized"].parent)  # never overwrites a client pair


def test_authorized_client_is_served_and_others_get_nothing(keys, start_solver_server):
    server = start_solver_server("--keys", str(keys["authorized"].parent), "--bind", "tcp://0.0.0.0:*")
    address = server.address.replace("0.0.0.0", "127.0.0.1")
    with SolverClient(address, timeout=10, server_public_key=keys["server_public"],
                      client_secret_key_file=str(keys["client_secret"])) as client:
        assert client.hello()["protocol"] == 1
        assert [r.frame for r in client.submit(grid_cloth(n=3, frame_end=3)).frames()] == [1, 2, 3]
    with SolverClient(address, timeout=1.5) as plain:  # no encryption at all
        with pytest.raises(SolverError) as info:
            plain.hello()
        assert info.value.code == "timeout"
    with SolverClient(address, timeout=1.5, server_public_key=keys["server_public"]) as stranger:
        with pytest.raises(SolverError) as info:  # encrypted, but its fresh key is not authorized
            stranger.submit(grid_cloth(n=3, frame_end=3))
        assert info.value.code == "timeout"
    assert sum("submitted" in line for line in server.stderr_lines) == 1  # only the authorized job


def test_non_loopback_bind_needs_keys_and_the_keys_must_exist(keys):
    refused = subprocess.run([sys.executable, "-m", "solver_server", "--bind", "tcp://0.0.0.0:0"],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--keys" in refused.stderr
    missing = subprocess.run([sys.executable, "-m", "solver_server", "--bind", "tcp://0.0.0.0:0", "--keys",
                              str(keys["authorized"])], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 1 and "no server key" in missing.stderr

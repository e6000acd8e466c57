"""Fixtures: ``real_server(**kwargs)`` runs the real SolverServer (real Simulation) on a thread of the
test process and returns it (``.address``); every server is stopped at teardown."""

from __future__ import annotations

import threading

import pytest

from solver_server.backend import get_backend
from solver_server.server import SolverServer


class ThreadedServer:
    def __init__(self, **kwargs):
        self.server = SolverServer("tcp://127.0.0.1:*", get_backend("cpu"), **kwargs)
        self.address = self.server.address
        self.thread = threading.Thread(target=self.server.serve, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.stop()
        self.thread.join(10)
        assert not self.thread.is_alive(), "server loop did not stop"


@pytest.fixture
def real_server():
    servers: list[ThreadedServer] = []

    def start(**kwargs) -> ThreadedServer:
        servers.append(ThreadedServer(**kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()

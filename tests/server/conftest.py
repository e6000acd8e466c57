"""In-process server fixture for transport tests: the real SolverServer loop on a thread, with a
simulation factory of the test's choosing (FakeSimulation by default)."""

from __future__ import annotations

import threading

import pytest

from fake_simulation import FakeSimulation
from solver_server.backend import get_backend
from solver_server.server import SolverServer


class InProcessServer:
    def __init__(self, factory=FakeSimulation, **kwargs):
        self.created: list = []  # every simulation the server built, for white-box checks

        def recording_factory(scene, backend):
            simulation = factory(scene, backend)
            self.created.append(simulation)
            return simulation

        ready = threading.Event()
        self.error: BaseException | None = None

        def run():
            try:
                self.server = SolverServer("tcp://127.0.0.1:*", get_backend("cpu"),
                                           simulation_factory=recording_factory, **kwargs)
            except BaseException as exc:  # surface construction errors in the test
                self.error = exc
                ready.set()
                raise
            ready.set()
            self.server.serve()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        ready.wait(10)
        if self.error:
            raise self.error
        self.address = self.server.address

    def stop(self):
        self.server.stop()
        self.thread.join(10)
        assert not self.thread.is_alive(), "server loop did not stop"


@pytest.fixture
def inprocess_server():
    servers = []

    def start(factory=FakeSimulation, **kwargs) -> InProcessServer:
        server = InProcessServer(factory, **kwargs)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()

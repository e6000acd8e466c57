"""Random and mutated traffic thrown at the real server loop (in-process, real Simulation):
the loop must survive every message and still serve a well-behaved client afterwards."""

from __future__ import annotations

import msgpack
import zmq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import messages
from protocol.client import SolverClient
from protocol.wire import VERSION_FRAME, encode
from solver_server.jobs import default_simulation_factory

TYPES = sorted(messages.SPECS) + ["", "nope"]

bodies = st.dictionaries(
    st.sampled_from(["scene", "frame", "objects", "client", "protocol", "job", "from_frame", "x"]),
    st.none() | st.integers(-3, 10) | st.text(max_size=4) | st.dictionaries(st.text(max_size=3), st.integers(-5, 5), max_size=3),
    max_size=4,
)


@st.composite
def traffic(draw):
    kind = draw(st.integers(0, 2))
    if kind == 0:  # raw garbage
        return draw(st.lists(st.binary(max_size=32), min_size=1, max_size=5))
    header = {"type": draw(st.sampled_from(TYPES)), "seq": draw(st.integers(0, 5)),
              "job": draw(st.none() | st.sampled_from(["j", "k"])), "body": draw(bodies)}
    frames = [VERSION_FRAME, msgpack.packb(header)]
    if kind == 2:  # a well-formed message with a mutated byte
        frames = [bytearray(f) for f in frames]
        target = frames[draw(st.integers(0, 1))]
        if target:
            target[draw(st.integers(0, len(target) - 1))] ^= draw(st.integers(1, 255))
        frames = [bytes(f) for f in frames]
    return frames


def test_server_survives_random_traffic(inprocess_server):
    server = inprocess_server(factory=default_simulation_factory)
    context = zmq.Context()
    peer = context.socket(zmq.DEALER)
    peer.setsockopt(zmq.LINGER, 0)
    peer.connect(server.address)
    sent = []

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(traffic())
    def send(frames):
        peer.send_multipart(frames)
        sent.append(frames)
        while peer.poll(0):
            peer.recv_multipart()

    try:
        send()
        peer.send_multipart(encode(messages.ping()))
        assert len(sent) >= 100
        with SolverClient(server.address, timeout=10) as client:
            assert client.hello()["protocol"] == 1
        assert server.thread.is_alive()
    finally:
        peer.close(linger=0)
        context.term()

"""The live server loop under mutated traffic (a short run of benchmarks/fuzz_server.py; the
100 000-message figure comes from running that script): no decoder crash, no server crash, no
hang, no ``internal`` error, and a valid client is served afterwards."""

from __future__ import annotations

import pytest

from benchmarks.fuzz_server import run


@pytest.mark.parametrize("seed", [11])
def test_mutated_messages_never_crash_or_hang_the_server(seed):
    figures = run(total=3000, seed=seed, verbose=False)
    assert figures["messages"] == 3000
    assert figures["decoder_crashes"] == 0 and figures["server_crashes"] == 0 and figures["hangs"] == 0
    assert "internal" not in figures["replies"], figures["replies"]
    assert figures["valid_client_served"]
    assert figures["replies"].get("malformed", 0) > 100, "the mutations must reach the decoder's checks"


@pytest.mark.slow
def test_one_hundred_thousand_mutated_messages():
    figures = run(total=100_000, seed=1, verbose=False)
    assert figures["decoder_crashes"] == figures["server_crashes"] == figures["hangs"] == 0
    assert "internal" not in figures["replies"] and figures["valid_client_served"]

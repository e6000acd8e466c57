"""Reliability figures as tests: 4 clients baking at once get exactly their solo results; a paused
(SIGSTOP) server is reported as a timeout, and one resumed (SIGCONT) before the client's timeout
finishes the bake with every frame exactly once. Detection times are measured by
benchmarks/reliability_figures.py (no timing asserts here)."""

from __future__ import annotations

import signal
import threading
import time

import numpy as np
import pytest

from protocol.client import SolverClient, SolverError

from .scenes import light_cloth_scene


def _variant(index: int, frame_end: int):
    """Four different small scenes: cloth resolution and ball path differ per client."""
    scene, drive = light_cloth_scene(frame_end=frame_end, cloth_n=5 + index % 2)
    scene["objects"][0]["params"]["friction"] = 0.1 + 0.1 * index

    def shifted(frame):
        entry = drive(frame)
        matrix = entry["Ball"]["matrix_world"].copy()
        matrix[0, 3] += 0.05 * index
        return {"Ball": {"matrix_world": matrix}}

    return scene, shifted


def _bake(address, scene, drive, results, key, timeout=30.0):
    try:
        with SolverClient(address, timeout=timeout) as client:
            frames = [(r.frame, r.positions["Cloth"]) for r in client.submit(scene, drive=drive).frames()]
        results[key] = frames
    except BaseException as error:  # reported by the main thread
        results[key] = error


def test_four_concurrent_clients_each_get_their_solo_result(real_server):
    server = real_server(max_jobs=4)
    variants = [_variant(index, frame_end=16) for index in range(4)]
    solo: dict = {}
    for index, (scene, drive) in enumerate(variants):
        _bake(server.address, scene, drive, solo, index)
    together: dict = {}
    threads = [threading.Thread(target=_bake, args=(server.address, scene, drive, together, index))
               for index, (scene, drive) in enumerate(variants)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(180)
    for index in range(4):
        assert not isinstance(together[index], BaseException), together[index]
        assert [f for f, _ in together[index]] == list(range(1, 17))
        for (_, alone), (_, shared) in zip(solo[index], together[index]):
            np.testing.assert_array_equal(shared, alone)
    assert not np.array_equal(solo[0][-1][1][:5], solo[2][-1][1][:5]), "the four scenes really differ"


def test_sigstop_is_a_timeout_and_sigcont_within_the_timeout_recovers(start_solver_server):
    scene, drive = light_cloth_scene(frame_end=40, cloth_n=5)
    server = start_solver_server()
    reference: dict = {}
    _bake(server.address, scene, drive, reference, "ref")

    # paused for longer than the client's timeout: a clear timeout error, no hang
    with SolverClient(server.address, timeout=1.5) as client:
        frames = client.submit(scene, drive=drive).frames()
        next(frames)
        server.process.send_signal(signal.SIGSTOP)
        try:
            with pytest.raises(SolverError) as error:
                for _ in frames:
                    pass
        finally:
            server.process.send_signal(signal.SIGCONT)
    assert error.value.code == "timeout" and server.address in error.value.message

    # paused for less than the timeout: the bake carries on, every frame exactly once and unchanged
    received = []
    with SolverClient(server.address, timeout=10.0) as client:
        for result in client.submit(scene, drive=drive).frames():
            received.append((result.frame, result.positions["Cloth"]))
            if result.frame == 10:
                server.process.send_signal(signal.SIGSTOP)
                time.sleep(2.5)
                server.process.send_signal(signal.SIGCONT)
    assert [f for f, _ in received] == list(range(1, 41))
    for (_, got), (_, want) in zip(received, reference["ref"]):
        np.testing.assert_array_equal(got, want)

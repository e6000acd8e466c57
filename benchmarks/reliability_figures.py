"""Reliability figures: silence detection, kill -9 recovery, concurrency, checkpoint cost.

``python -m benchmarks.reliability_figures`` prints:

* SIGSTOP detection: a client with ``timeout = 3 × heartbeat`` (3 s) baking against a server that
  gets SIGSTOP: seconds from the last message received to ``SolverError("timeout")`` (5 trials);
* kill -9 recovery: a 48-frame animated cloth bake, server killed at frame 20, restarted, resumed
  from the last checkpoint the client received: seconds from the kill to the first resumed frame
  and the largest position difference to the uninterrupted bake over all 48 frames;
* 4 concurrent clients vs the same 4 bakes one after the other (wall time, and whether every
  result is identical to its solo bake);
* checkpoint size and time (``Simulation.checkpoint`` + npz encoding) for the PD, DER, particle and
  Cosserat test scenes.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from protocol.checkpoint_files import encode_checkpoint  # noqa: E402
from protocol.client import HEARTBEAT_S, SolverClient, SolverError  # noqa: E402


def _server(*args):
    from tests.server_process import ServerProcess

    return ServerProcess("--log-level", "WARNING", *args)


def sigstop_detection(trials: int = 5) -> list[float]:
    from tests.reliability.scenes import light_cloth_scene

    scene, drive = light_cloth_scene(frame_end=2000, cloth_n=5)
    delays = []
    for _ in range(trials):  # a fresh server each time: the abandoned jobs hold slots for --peer-grace
        server = _server()
        try:
            with SolverClient(server.address, timeout=3 * HEARTBEAT_S) as client:
                frames = client.submit(scene, drive=drive).frames()
                next(frames)
                server.process.send_signal(signal.SIGSTOP)
                last = time.monotonic()
                try:
                    for _ in frames:
                        last = time.monotonic()
                except SolverError as error:
                    assert error.code == "timeout", error
                    delays.append(time.monotonic() - last)
                finally:
                    server.process.send_signal(signal.SIGCONT)
        finally:
            server.stop()
    return delays


def kill_recovery() -> tuple[float, float, float]:
    from tests.reliability.scenes import light_cloth_scene
    from solver_server.backend import get_backend
    from solver_server.simulation import Simulation

    scene, drive = light_cloth_scene(frame_end=48)
    simulation = Simulation(scene, get_backend("cpu"))
    reference = {1: simulation.initial_frame()[1]["Cloth"]}
    for frame in range(2, 49):
        reference[frame] = simulation.advance(drive(frame))[1]["Cloth"]
    first = _server()
    baked, checkpoint, killed_at = {}, None, None
    with SolverClient(first.address, timeout=2.0) as client:
        try:
            for result in client.submit(scene, drive=drive, checkpoint_every=4).frames():
                baked[result.frame] = result.positions["Cloth"]
                checkpoint = result.checkpoint or checkpoint
                if result.frame == 20:
                    os.kill(first.process.pid, signal.SIGKILL)
                    killed_at = time.monotonic()
        except SolverError:
            pass
    detected = time.monotonic() - killed_at
    first.stop()
    second = _server()
    try:
        with SolverClient(second.address, timeout=20.0) as client:
            first_frame_at = None
            baked = {f: p for f, p in baked.items() if f <= checkpoint["frame"]}
            for result in client.submit(scene, drive=drive, resume=checkpoint).frames():
                first_frame_at = first_frame_at or time.monotonic()
                baked[result.frame] = result.positions["Cloth"]
    finally:
        second.stop()
    assert sorted(baked) == list(range(1, 49))
    worst = max(float(np.abs(baked[f] - reference[f]).max()) for f in baked)
    return detected, first_frame_at - killed_at, worst


def concurrency() -> tuple[float, float, bool]:
    from tests.reliability.test_concurrency_and_pauses import _bake, _variant

    variants = [_variant(index, frame_end=24) for index in range(4)]
    server = _server("--max-jobs", "4")
    try:
        solo: dict = {}
        tick = time.monotonic()
        for index, (scene, drive) in enumerate(variants):
            _bake(server.address, scene, drive, solo, index)
        sequential = time.monotonic() - tick
        together: dict = {}
        tick = time.monotonic()
        threads = [threading.Thread(target=_bake, args=(server.address, scene, drive, together, index))
                   for index, (scene, drive) in enumerate(variants)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        parallel = time.monotonic() - tick
    finally:
        server.stop()
    identical = all(np.array_equal(a, b) for index in range(4)
                    for (_, a), (_, b) in zip(solo[index], together[index]))
    return sequential, parallel, identical


def checkpoint_costs() -> list[tuple[str, int, float]]:
    from tests.reliability.scenes import SOLVER_SCENES
    from solver_server.backend import get_backend
    from solver_server.simulation import Simulation

    rows = []
    for kind, build in sorted(SOLVER_SCENES.items()):
        scene, drive = build(frame_end=4)
        simulation = Simulation(scene, get_backend("cpu"))
        for frame in (2, 3):
            simulation.advance(drive(frame))
        tick = time.perf_counter()
        blob = encode_checkpoint(simulation.checkpoint())
        rows.append((kind, len(blob), (time.perf_counter() - tick) * 1e3))
    return rows


def main(argv: list[str] | None = None) -> int:
    delays = sigstop_detection()
    print(f"SIGSTOP detection with timeout = 3 heartbeats ({3 * HEARTBEAT_S:g} s): "
          f"{min(delays):.2f}..{max(delays):.2f} s after the last message (mean {np.mean(delays):.2f} s, "
          f"{len(delays)} trials)")
    detected, recovered, worst = kill_recovery()
    print(f"kill -9 at frame 20/48: client timeout after {detected:.2f} s (timeout 2 s); first resumed frame "
          f"{recovered:.2f} s after the kill (incl. server restart); max |resumed - uninterrupted| = {worst:.3g} m")
    sequential, parallel, identical = concurrency()
    print(f"4 clients x 24 frames: one after the other {sequential:.2f} s, concurrently {parallel:.2f} s; "
          f"results identical to solo: {identical}")
    for kind, size, ms in checkpoint_costs():
        print(f"checkpoint {kind:10s}: {size / 1024:7.1f} KiB, {ms:6.2f} ms (state copy + npz)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Fuzz the decoder and the live server loop with mutated protocol messages (reliability figures).

``python -m benchmarks.fuzz_server [--messages 100000] [--seed 1]`` starts a real solver server
subprocess (real Simulation), then sends it ``--messages`` messages made by mutating valid ones
(hello, submit with a small animated scene, submit with a checkpoint to resume, drive, cancel,
resume, ping): byte flips, truncation, dropped / duplicated / swapped frames, msgpack headers with
values swapped for hostile ones (huge ints, NaN, wrong types, bogus ``$nd`` placeholders and
shapes), garbage frames and wrong version frames. After every batch of 500 the loop must answer
a ping within 10 s (repeated each second: replies to a peer with 256 unread ones are dropped by
design), else that counts as a hang. The same messages also go through ``decode`` +
``validate`` in this process, where anything but ProtocolError is a crash.

Prints: messages sent, decoder crashes, server crashes (process exit), hangs, error codes the
server answered with (``internal`` would be a server bug surfacing), the server's peak RSS, and
whether a well-behaved client bakes a scene correctly afterwards. Exit status 1 on any failure.
"""

from __future__ import annotations

import argparse
import collections
import copy
import sys
import time
from pathlib import Path

import msgpack
import numpy as np
import zmq

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from protocol import messages  # noqa: E402
from protocol.client import SolverClient, SolverError  # noqa: E402
from protocol.errors import ProtocolError  # noqa: E402
from protocol.wire import VERSION_FRAME, decode, encode  # noqa: E402

JOB_IDS = ("fz1", "fz2", "fz3")
HOSTILE_VALUES = (None, True, -1, 0, 2**63 - 1, -(2**63), 2**64 - 1, 1e308, float("nan"), float("-inf"), "",
                  "x" * 300, b"\x00\xff", [], {}, [1, 2, 3], {"$nd": 0, "dtype": "<f8", "shape": [1, 3]},
                  {"$nd": 99, "dtype": "<f8", "shape": [3]}, {"$nd": 0, "dtype": "|O", "shape": [1]},
                  {"$nd": 0, "dtype": "<f4", "shape": [2**40, 2**40]}, {"$nd": 0, "dtype": "<f4", "shape": [-1]},
                  {"id": "Cloth"}, [[0.0] * 4] * 4)


def tiny_scene(frame_end: int = 3) -> tuple[dict, callable]:
    """A 4×4 cloth pinned at one corner under an animated ball (cheap: a few ms per frame)."""
    n = 4
    xs = np.linspace(0.0, 0.3, n)
    x, y = np.meshgrid(xs, xs)
    vertices = np.stack([x.ravel(), y.ravel(), np.full(n * n, 0.5)], axis=1)
    index = np.arange(n * n).reshape(n, n)
    a, b, c, d = index[:-1, :-1].ravel(), index[:-1, 1:].ravel(), index[1:, :-1].ravel(), index[1:, 1:].ravel()
    triangles = np.concatenate([np.stack([a, b, d], 1), np.stack([a, d, c], 1)]).astype("<i4")
    scene = {"gravity": [0.0, 0.0, -9.81], "time": {"fps": 24, "frame_start": 1, "frame_end": frame_end, "substeps": 1},
             "objects": [{"id": "Cloth", "kind": "cloth", "vertices": vertices, "triangles": triangles,
                          "pins": {"indices": np.array([0], "<i4"), "weights": np.ones(1)}, "params": {}},
                         {"id": "Ball", "kind": "collider", "animated": True, "matrix_world": np.eye(4),
                          "shape": {"type": "sphere", "center": [0.1, 0.1, 0.2], "radius": 0.1}, "params": {}}]}

    def drive(frame: int) -> dict:
        matrix = np.eye(4)
        matrix[2, 3] = 0.01 * frame
        return {"Ball": {"matrix_world": matrix}}

    return scene, drive


def seed_messages() -> list[list[bytes]]:
    """Valid messages (as frame lists) that the mutations start from."""
    from solver_server.backend import get_backend
    from solver_server.simulation import Simulation

    scene, drive = tiny_scene()
    simulation = Simulation(copy.deepcopy(scene), get_backend("cpu"))
    simulation.advance(drive(2))
    checkpoint = simulation.checkpoint()
    seeds = [messages.hello("fuzz"), messages.ping(), messages.pong()]
    for job in JOB_IDS:
        seeds += [messages.submit(scene, job=job), messages.submit(scene, job=job, checkpoint_every=1),
                  messages.submit(scene, job=job, resume=checkpoint), messages.drive(job, 2, drive(2)),
                  messages.drive(job, 3, drive(3)), messages.cancel(job), messages.resume(job, 1),
                  messages.ping(job)]
    return [[bytes(frame) for frame in encode(message)] for message in seeds]


def _mutate_structure(value, rng: np.random.Generator, depth: int = 0):
    """Replace one random node of a msgpack-decoded structure with a hostile value."""
    if isinstance(value, dict) and value and depth < 12 and rng.random() < 0.8:
        key = list(value)[int(rng.integers(len(value)))]
        mutated = dict(value)
        if rng.random() < 0.1:
            mutated.pop(key)
        elif rng.random() < 0.1:
            mutated["zz_unknown"] = HOSTILE_VALUES[int(rng.integers(len(HOSTILE_VALUES)))]
        else:
            mutated[key] = _mutate_structure(value[key], rng, depth + 1)
        return mutated
    if isinstance(value, list) and value and depth < 12 and rng.random() < 0.8:
        mutated = list(value)
        position = int(rng.integers(len(value)))
        mutated[position] = _mutate_structure(value[position], rng, depth + 1)
        return mutated
    return HOSTILE_VALUES[int(rng.integers(len(HOSTILE_VALUES)))]


def mutate(frames: list[bytes], rng: np.random.Generator) -> list[bytes]:
    frames = list(frames)
    kind = int(rng.integers(8))
    if kind == 0:  # flip bytes anywhere
        for _ in range(int(rng.integers(1, 5))):
            target = int(rng.integers(len(frames)))
            if frames[target]:
                data = bytearray(frames[target])
                data[int(rng.integers(len(data)))] ^= int(rng.integers(1, 256))
                frames[target] = bytes(data)
    elif kind == 1:  # truncate a frame
        target = int(rng.integers(len(frames)))
        frames[target] = frames[target][: int(rng.integers(len(frames[target]) + 1))]
    elif kind == 2:  # drop, duplicate or swap frames
        choice = int(rng.integers(3))
        i, j = (int(k) for k in rng.integers(len(frames), size=2))
        if choice == 0 and len(frames) > 1:
            frames.pop(i)
        elif choice == 1:
            frames.insert(i, frames[j])
        else:
            frames[i], frames[j] = frames[j], frames[i]
    elif kind in (3, 4, 5):  # hostile values inside the header
        try:
            header = msgpack.unpackb(frames[1], raw=False, strict_map_key=False)
            frames[1] = msgpack.packb(_mutate_structure(header, rng), use_bin_type=True)
        except Exception:  # noqa: BLE001 - the seed was already broken: send it as is
            pass
    elif kind == 6:  # garbage
        frames = [rng.bytes(int(rng.integers(0, 64))) for _ in range(int(rng.integers(1, 5)))]
    else:  # a wrong version frame or an extra stray frame
        if rng.random() < 0.5:
            frames[0] = [b"TANGLE/2", b"", b"TANGLE/1\x00", rng.bytes(8)][int(rng.integers(4))]
        else:
            frames.append(rng.bytes(int(rng.integers(0, 128))))
    return frames


def decoder_crashes(all_frames: list[list[bytes]]) -> int:
    crashes = 0
    for frames in all_frames:
        try:
            messages.validate(decode(frames), "c2s")
        except ProtocolError:
            pass
        except Exception as error:  # noqa: BLE001 - counted, reported
            crashes += 1
            if crashes <= 3:
                print(f"decoder crash: {type(error).__name__}: {error}", file=sys.stderr)
    return crashes


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def run(total: int, seed: int, batch: int = 500, hang_s: float = 10.0, address: str | None = None,
        server_pid: int | None = None, verbose: bool = True) -> dict:
    """Fuzz the server at ``address`` (started here when None). Returns the figures."""
    rng = np.random.default_rng(seed)
    seeds = seed_messages()
    server = None
    if address is None:
        sys.path.insert(0, str(REPO_ROOT))
        from tests.server_process import ServerProcess  # the test suite's subprocess helper

        server = ServerProcess("--log-level", "ERROR", "--max-jobs", "4", "--client-silence", "2")
        address, server_pid = server.address, server.process.pid
    context = zmq.Context()
    peer = context.socket(zmq.DEALER)
    peer.setsockopt(zmq.LINGER, 0)
    peer.setsockopt(zmq.SNDTIMEO, 5000)
    peer.connect(address)
    codes: collections.Counter = collections.Counter()
    hangs = sent = 0
    decoder_crash_count = 0
    started = time.monotonic()

    def drain():
        while peer.poll(0):
            reply = peer.recv_multipart()
            try:
                message = decode(reply)
            except ProtocolError:
                codes["<undecodable reply>"] += 1
                continue
            if message.type == messages.ERROR:
                codes[message.body.get("code")] += 1
            else:
                codes[message.type] += 1

    try:
        while sent < total:
            count = min(batch, total - sent)
            batch_frames = [mutate(seeds[int(rng.integers(len(seeds)))], rng) for _ in range(count)]
            decoder_crash_count += decoder_crashes(batch_frames)
            for frames in batch_frames:
                peer.send_multipart(frames)
                sent += 1
                if sent % 50 == 0:
                    drain()
            # the loop must still answer; a reply may be dropped while this peer has 256 unread
            # replies queued (by design), so the ping is repeated every second until the deadline
            deadline = time.monotonic() + hang_s
            answered = False
            next_ping = time.monotonic()
            while time.monotonic() < deadline and not answered:
                if time.monotonic() >= next_ping:
                    peer.send_multipart(encode(messages.ping()))
                    next_ping = time.monotonic() + 1.0
                if peer.poll(100):
                    reply = peer.recv_multipart()
                    try:
                        message = decode(reply)
                    except ProtocolError:
                        continue
                    answered = message.type == messages.PONG and message.job is None
                    codes[message.body.get("code") if message.type == messages.ERROR else message.type] += 1
            if not answered:
                hangs += 1
            if server is not None and server.process.poll() is not None:
                break
            if verbose and (sent // batch) % 20 == 0:
                print(f"  {sent} messages, {time.monotonic() - started:.0f} s", flush=True)
        drain()
        crashed = server is not None and server.process.poll() is not None
        served = False
        if not crashed:
            # jobs the fuzzer got accepted wait for drive data it never sends; they hold job slots until
            # the server frees them (--client-silence after the fuzzer went quiet)
            scene, drive = tiny_scene(frame_end=6)
            give_up = time.monotonic() + 30.0
            while not served:
                try:
                    with SolverClient(address, timeout=20.0) as client:
                        frames = [r.frame for r in client.submit(scene, drive=drive).frames()]
                    served = frames == list(range(1, 7))
                    break
                except SolverError as error:
                    if error.code != "server_busy" or time.monotonic() > give_up:
                        raise
                    time.sleep(0.5)
        figures = {"messages": sent, "decoder_crashes": decoder_crash_count, "server_crashes": int(crashed),
                   "hangs": hangs, "valid_client_served": served,
                   "peak_rss_mib": peak_rss_mib(server_pid) if server_pid else float("nan"),
                   "seconds": time.monotonic() - started, "replies": dict(codes)}
        return figures
    finally:
        peer.close(linger=0)
        context.term()
        if server is not None:
            server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    figures = run(args.messages, args.seed)
    for key, value in figures.items():
        print(f"{key}: {value}")
    ok = (figures["decoder_crashes"] == 0 and figures["server_crashes"] == 0 and figures["hangs"] == 0
          and figures["valid_client_served"])
    print("fuzz: PASS" if ok else "fuzz: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

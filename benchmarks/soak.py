"""Soak test: a bake loop against one solver server for a long time (a reliability figure).

``python -m benchmarks.soak [--minutes 30]`` starts a solver server subprocess (with
``--checkpoint-dir`` in a temporary folder) and bakes a small animated cloth scene over and over,
each bake from a fresh SolverClient with checkpoints on the wire, every 4th bake cancelled half-way
and every 8th resumed from a checkpoint. It samples the server's resident memory (VmRSS) and open
file descriptors, and this process's descriptors, and prints them once a minute and at the end:
RSS drift after warm-up and fd ranges. The warm-up is max(10 % of the run, 6 min), at most half of
the run: the server keeps ended jobs' frames for 120 s (resume) and forgets idle clients after
300 s, so its memory only reaches steady state after about 5 minutes of bakes (runs shorter than
12 minutes therefore measure part of that ramp). The target: RSS drift < 10 %, descriptors
stable. Exit status 1 when the bar is missed or a bake failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from protocol.client import SolverClient  # noqa: E402

WARMUP_S = 360.0  # > the server's IDLE_PEER_FORGET_S (300 s) and RESULT_TTL_S (120 s) retention windows


def _status_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def bake_once(address: str, iteration: int, scene, drive, checkpoints: dict) -> int:
    """One bake; returns the number of frames received (cancelled bakes stop half-way)."""
    count = 0
    with SolverClient(address, timeout=30.0) as client:
        resume = checkpoints.get("latest") if iteration % 8 == 7 else None
        job = client.submit(scene, drive=drive, checkpoint_every=6, resume=resume)
        for result in job.frames():
            count += 1
            if result.checkpoint is not None:
                checkpoints["latest"] = result.checkpoint
            if iteration % 4 == 3 and result.frame == 12:
                job.cancel()
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="duration (default 30)")
    parser.add_argument("--report-s", type=float, default=60.0, help="seconds between progress lines")
    args = parser.parse_args(argv)
    from tests.server_process import ServerProcess  # the test suite's subprocess helper
    from tests.reliability.scenes import light_cloth_scene

    scene, drive = light_cloth_scene(frame_end=24, cloth_n=6)
    duration = args.minutes * 60.0
    warmup = min(max(WARMUP_S, 0.1 * duration), 0.5 * duration)
    with tempfile.TemporaryDirectory() as store:
        server = ServerProcess("--log-level", "WARNING", "--checkpoint-dir", store, "--checkpoint-every", "6")
        pid = server.process.pid
        started = time.monotonic()
        next_report = started + args.report_s
        baseline_rss = baseline_fds = None
        rss_samples, fd_samples, own_fd_samples = [], [], []
        bakes = frames = failures = 0
        checkpoints: dict = {}
        try:
            while time.monotonic() - started < duration:
                try:
                    frames += bake_once(server.address, bakes, scene, drive, checkpoints)
                except Exception as error:  # noqa: BLE001 - counted and reported
                    failures += 1
                    print(f"bake {bakes} failed: {type(error).__name__}: {error}", flush=True)
                bakes += 1
                now = time.monotonic()
                rss, fds = _status_kib(pid, "VmRSS"), _fds(pid)
                if baseline_rss is None and now - started >= warmup:
                    baseline_rss, baseline_fds = rss, fds
                if baseline_rss is not None:
                    rss_samples.append(rss)
                    fd_samples.append(fds)
                    own_fd_samples.append(_fds(os.getpid()))
                if now >= next_report:
                    next_report = now + args.report_s
                    print(f"{now - started:6.0f} s: {bakes} bakes, {frames} frames, server RSS {rss / 1024:.1f} MiB, "
                          f"server fds {fds}, client fds {_fds(os.getpid())}", flush=True)
        finally:
            server.stop()
    if not rss_samples:
        print("soak: too short to measure after the warm-up")
        return 1
    final_rss = sum(rss_samples[-5:]) / len(rss_samples[-5:])
    drift = (final_rss - baseline_rss) / baseline_rss
    print(f"bakes: {bakes} ({failures} failed), frames: {frames}, minutes: {(time.monotonic() - started) / 60:.1f}")
    print(f"server RSS after warm-up {baseline_rss / 1024:.1f} MiB, at the end {final_rss / 1024:.1f} MiB, "
          f"peak {max(rss_samples) / 1024:.1f} MiB, drift {100 * drift:+.1f} %")
    print(f"server fds after warm-up {baseline_fds}, range {min(fd_samples)}..{max(fd_samples)}; "
          f"client fds range {min(own_fd_samples)}..{max(own_fd_samples)}")
    ok = failures == 0 and abs(drift) < 0.10 and max(fd_samples) - min(fd_samples) <= 4
    print("soak: PASS" if ok else "soak: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Processes a test run leaves behind: every process the run starts inherits ``TANGLE_TEST_RUN=<token>`` in its
environment (subprocesses copy it unless a test builds an environment from nothing), so at the end of the run
the ones still alive are found by that token, also after their parent died and they were re-parented."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from tests.server_process import process_running

VARIABLE = "TANGLE_TEST_RUN"


def mark_this_run() -> str:
    """Give this process (and so every process it starts) the run's token; returns it."""
    token = os.environ.get(VARIABLE) or uuid.uuid4().hex
    os.environ[VARIABLE] = token
    return token


def _running_with(token: bytes) -> list[tuple[int, str]]:
    """(pid, command line) of live processes other than this one whose environment holds ``token``."""
    marker = f"{VARIABLE}=".encode() + token
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        if not process_running(int(entry.name)):
            continue                                       # ended, waiting to be reaped
        try:
            if marker not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found.append((int(entry.name), command))
    return found


def leftovers(token: str, wait_s: float = 15.0) -> list[tuple[int, str]]:
    """The run's processes still alive after up to ``wait_s`` seconds (those ending on their own are given
    the time: a local solver notices its parent's end within a second). [] where /proc is missing."""
    if not Path("/proc/self/environ").exists():
        return []
    deadline = time.monotonic() + wait_s
    while True:
        alive = _running_with(token.encode())
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.25)


def end(processes: list[tuple[int, str]]) -> None:
    """Kill ``processes`` (pid, command) so that a failed run leaves nothing running either."""
    for pid, _ in processes:
        try:
            os.kill(pid, 9)
        except OSError:
            pass

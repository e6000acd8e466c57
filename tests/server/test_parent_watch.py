"""A local solver ends with the process that started it (``--parent-pid``), also when that process ends
without running its exit handlers (``os._exit``), as Blender does when it crashes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from solver_server.parent_watch import parent_gone, process_alive
from tests.server_process import end_process, process_running, wait_gone

REPO_ROOT = Path(__file__).resolve().parents[2]

# a stand-in for Blender: starts a local server the add-on's way, prints its pid and leaves abruptly
_PARENT = """
import os, sys
from blender_addon.core.local_server import LocalServer
server = LocalServer()
server.start()
print(server.process.pid, flush=True)
sys.stdin.readline()
os._exit(0)
"""


def test_process_alive_and_parent_gone():
    assert process_alive(os.getpid())
    assert not parent_gone(os.getppid(), was_parent=True)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not process_alive(child.pid), "a reaped process is gone"
    assert not process_alive(0) and not process_alive(-5)


def test_a_local_server_ends_when_its_parent_exits_without_cleaning_up():
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], cwd=REPO_ROOT, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    server_pid = None
    try:
        server_pid = int(parent.stdout.readline())
        time.sleep(1.0)
        assert process_running(server_pid), "the server runs while its parent does"
        parent.stdin.write("\n")
        parent.stdin.flush()
        parent.wait(30)
        assert wait_gone(server_pid, 10), "the local server outlived its parent by 10 s"
    finally:
        parent.kill()
        parent.wait(10)
        if server_pid is not None:
            end_process(server_pid)

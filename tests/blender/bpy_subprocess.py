"""Start the bpy module in a fresh subprocess for the real-Blender tests (bpy can be imported only once per
process, and its state must not leak between tests): a scenario of one of the scenario scripts in this
folder (which print one line "RESULT <json>"), or the add-on's command line (``python -m blender_addon.cli``).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPOSITORY_ROOT = HERE.parents[1]


def environment(home: Path) -> dict:
    """The environment of a bpy subprocess: HOME in ``home`` (a throwaway folder, so extensions install
    into a fresh Blender user configuration), the repository importable, and the Warp kernel cache of this
    user (``TANGLE_KERNEL_CACHE``, docs/kernels.md): with HOME moved, every solver server a scenario starts
    would otherwise compile all kernels again (~26 s each on the 2-core box)."""
    cache = os.environ.get("TANGLE_KERNEL_CACHE") or str(Path.home() / ".cache" / "warp")
    return dict(os.environ, HOME=str(home), PYTHONPATH=str(REPOSITORY_ROOT), TANGLE_KERNEL_CACHE=cache)


def run_scenario_script(script: str, name: str, home: Path, *, process_timeout_s: float = 120.0, **args) -> dict:
    """Run scenario ``name`` of ``script`` (a file in this folder) with ``args`` (any names, ``timeout``
    included); its result dict. Raises AssertionError with the tail of its output when it fails or prints
    no result."""
    completed = subprocess.run([sys.executable, str(HERE / script), name, json.dumps(args)], cwd=REPOSITORY_ROOT,
                               env=environment(home), capture_output=True, text=True, timeout=process_timeout_s)
    lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    if completed.returncode != 0 or not lines:
        raise AssertionError(f"scenario {name} of {script} failed (exit {completed.returncode}):\n"
                             f"{completed.stdout[-4000:]}\n{completed.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def run_cli(*args: str, home: Path, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """``python -m blender_addon.cli ARGS`` to completion (output captured as text)."""
    return subprocess.run([sys.executable, "-m", "blender_addon.cli", *args], cwd=REPOSITORY_ROOT,
                          env=environment(home), capture_output=True, text=True, timeout=timeout)


def start_cli(*args: str, home: Path, own_group: bool = False) -> subprocess.Popen:
    """``python -m blender_addon.cli ARGS`` started in the background (stdout and stderr piped, text);
    ``own_group``: as the leader of a process group of its own, as a shell runs a command (a terminal's
    Ctrl-C then reaches the whole group: ``os.killpg(process.pid, SIGINT)``)."""
    return subprocess.Popen([sys.executable, "-m", "blender_addon.cli", *args], cwd=REPOSITORY_ROOT,
                            env=environment(home), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=own_group)


def solver_children(pid: int) -> list[int]:
    """Process ids of the solver servers (``-m solver_server``) whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if parent == pid and b"solver_server" in command:
            found.append(int(entry.name))
    return found

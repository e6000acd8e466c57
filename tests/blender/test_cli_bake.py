"""Headless farm bake: ``python -m blender_addon.cli bake shot.blend`` (bpy module, no UI)."""

import os
import re
import signal
import time

import pytest
from bpy_subprocess import run_cli, solver_children, start_cli

from tests.server_process import end_process, wait_gone

def test_cli_bake_saves_keyframes_that_play_without_the_addon(run_scenario, solver_server_address, tmp_path):
    shot, baked = tmp_path / "shot.blend", tmp_path / "baked.blend"
    run_scenario("save_for_cli", path=str(shot))
    completed = run_cli("bake", str(shot), "--address", solver_server_address, "--output", str(baked),
                        home=tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "bake finished: 6/6 frames" in completed.stdout
    # progress in a log (stdout is a pipe here): a line at the first frame and at the last, with the rate
    assert "tangle: 1/6 frames (16%) · frame 1 · " in completed.stdout
    assert "tangle: 6/6 frames (100%) · frame 6 · " in completed.stdout and " s/frame" in completed.stdout
    playback = run_scenario("inspect_without_addon", path=str(baked))
    assert playback["shape_keys"] == ["Basis"] + [f"tangle_f{frame:04d}" for frame in range(1, 7)]
    assert playback["pinned_drift"] < 1e-5
    assert playback["max_drop"] > 0.05


def test_cli_bake_without_a_server_fails_clearly_within_the_timeout(run_scenario, tmp_path):
    shot = tmp_path / "shot.blend"
    run_scenario("save_for_cli", path=str(shot))
    started = time.monotonic()
    completed = run_cli("bake", str(shot), "--address", "tcp://127.0.0.1:9", "--timeout", "2", home=tmp_path)
    assert completed.returncode == 1
    assert "timeout" in completed.stdout and "tcp://127.0.0.1:9" in completed.stdout
    assert time.monotonic() - started < 60  # bounded by the 2 s timeout plus Blender start-up, never a hang


@pytest.mark.parametrize("sent, exit_code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_cli_bake_stops_cleanly_on_a_signal_and_keeps_its_frames(run_scenario, solver_server_address, tmp_path,
                                                                  sent, exit_code):
    """Ctrl-C (or a farm's SIGTERM) cancels the bake after the current frame, saves the frames
    baked so far and exits non-zero (130 / 143); the saved file holds exactly those frames."""
    shot, baked = tmp_path / "shot.blend", tmp_path / "baked.blend"
    run_scenario("save_for_cli", path=str(shot), frames=1000, grid=12)
    process = start_cli("bake", str(shot), "--address", solver_server_address, "--output", str(baked),
                        home=tmp_path)
    try:
        lines = []                                        # Blender's own lines, then the first frame's
        while not (lines and lines[-1].startswith("tangle: ")) and len(lines) < 50:
            lines.append(process.stdout.readline())
        assert lines[-1].startswith("tangle: 1/1000 frames"), lines
        process.send_signal(sent)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == exit_code, stdout + stderr
    kept = int(re.search(r"bake cancelled: (\d+)/1000 frames", stdout).group(1))
    assert 1 <= kept < 1000
    assert f"cancelled by {sent.name}; the {kept} frames baked so far are kept" in stderr
    assert f"tangle: saved {baked}" in stdout
    names = run_scenario("shape_keys", path=str(baked))["names"]
    assert names == ["Basis"] + [f"tangle_f{frame:04d}" for frame in range(1, kept + 1)]


def _first_frame_and_local_server(process) -> int:
    """Read the CLI's output up to its first frame line; the id of the local solver server it started."""
    lines = []
    while not (lines and lines[-1].startswith("tangle: ")) and len(lines) < 50:
        lines.append(process.stdout.readline())
    assert lines[-1].startswith("tangle: 1/1000 frames"), lines
    servers = solver_children(process.pid)
    assert len(servers) == 1, servers
    return servers[0]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the local server through /proc")
def test_ctrl_c_in_the_terminal_cancels_a_local_server_bake_cleanly(run_scenario, tmp_path):
    """A terminal's Ctrl-C sends SIGINT to the whole foreground process group. The local solver runs in a group
    of its own, so it keeps serving: the bake reads as cancelled (exit 130, frames kept), with no failure or
    timeout, and the CLI then stops its server."""
    shot, baked = tmp_path / "shot.blend", tmp_path / "baked.blend"
    run_scenario("save_for_cli", path=str(shot), frames=1000, grid=12)
    process = start_cli("bake", str(shot), "--local-server", "--output", str(baked), home=tmp_path, own_group=True)
    server = None
    try:
        server = _first_frame_and_local_server(process)
        os.killpg(process.pid, signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
        if server is not None:
            still_running = not wait_gone(server, 10)
            end_process(server)
    assert process.returncode == 130, stdout + stderr
    assert re.search(r"bake cancelled: \d+/1000 frames", stdout), stdout
    assert "failed" not in (stdout + stderr).lower() and "timeout" not in (stdout + stderr).lower(), stdout + stderr
    assert "cancelled by SIGINT" in stderr
    assert not still_running, "the CLI stops its local server when the bake ends"


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds the local server through /proc")
def test_a_killed_blender_takes_its_local_solver_with_it(run_scenario, tmp_path):
    """Blender killed outright (SIGKILL: no exit handler runs) during a bake on a local solver: the solver
    notices that its Blender is gone and ends within 10 s."""
    shot = tmp_path / "shot.blend"
    run_scenario("save_for_cli", path=str(shot), frames=1000, grid=12)
    process = start_cli("bake", str(shot), "--local-server", "--output", str(tmp_path / "baked.blend"),
                        home=tmp_path)
    server = None
    try:
        server = _first_frame_and_local_server(process)
        process.kill()
        process.wait(10)
        assert wait_gone(server, 10), "the local solver outlived its Blender by 10 s"
    finally:
        process.kill()
        process.communicate()
        if server is not None:
            end_process(server)

"""Headless farm bake: ``python -m blender_addon.cli bake shot.blend`` (bpy module, no UI)."""

import time

from bpy_subprocess import run_cli

def test_cli_bake_saves_keyframes_that_play_without_the_addon(run_scenario, solver_server_address, tmp_path):
    shot, baked = tmp_path / "shot.blend", tmp_path / "baked.blend"
    run_scenario("save_for_cli", path=str(shot))
    completed = run_cli("bake", str(shot), "--address", solver_server_address, "--output", str(baked),
                        home=tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "bake finished: 6/6 frames" in completed.stdout
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

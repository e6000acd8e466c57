"""Bake workflow in real Blender (bpy 4.5): server profiles with CURVE keys, Start / Stop Local Server,
resume after cancel, re-bake from a frame, topology change refused, shape-key vs PC2 output routes.

Each scenario runs in its own bpy subprocess (workflow_scenarios.py) against a real solver server.
"""

import re
import stat
import subprocess
import sys
from functools import partial

import pytest

from bpy_subprocess import REPOSITORY_ROOT


@pytest.fixture
def run_workflow(run_scenario):
    """run_workflow(name, **args): a scenario of workflow_scenarios.py in a fresh bpy subprocess."""
    return partial(run_scenario, script="workflow_scenarios.py")


def test_profiles_with_curve_keys_and_the_local_server(run_workflow, start_solver_server, tmp_path):
    keys = tmp_path / "keys"
    subprocess.run([sys.executable, "-m", "solver_server", "--generate-keys", str(keys), "--client-name", "artist"],
                   cwd=REPOSITORY_ROOT, check=True, capture_output=True, timeout=60)
    secure = start_solver_server("--keys", str(keys))
    bad_python = tmp_path / "python-without-packages"
    bad_python.write_text(f"#!/bin/sh\nexec '{sys.executable}' -I -S \"$@\"\n")
    bad_python.chmod(bad_python.stat().st_mode | stat.S_IXUSR)
    result = run_workflow("connection", curve_address=secure.address, server_key=str(keys / "server.key"),
                          client_key=str(keys / "artist.key_secret"), bad_python=str(bad_python),
                          path=str(tmp_path / "local.blend"))
    assert result["profile_add"]["result"] == ["FINISHED"]
    assert result["curve"]["result"] == ["FINISHED"] and result["curve"]["server_info"].startswith("tangle-solver ")
    unauthorized = result["curve_unauthorized"]
    assert unauthorized["result"] == ["RAISED"] and "timeout" in unauthorized["last_error"]
    assert "profile 'Secure'" in unauthorized["last_error"]
    missing = result["missing_key_file"]
    assert missing["result"] == ["RAISED"] and "/nonexistent/server.key" in missing["last_error"]
    assert "'Secure'" in missing["last_error"]
    for case in ("unknown_profile", "bake_with_unknown_profile"):
        assert result[case]["result"] == ["RAISED"]
        assert "'Nobody'" in result[case]["last_error"] and "preferences" in result[case]["last_error"]
    assert result["bake_with_unknown_profile"]["keys"] is False  # nothing was baked
    bad = result["bad_python"]
    assert bad["result"] == ["RAISED"] and str(bad_python) in bad["last_error"]
    assert "solver_server" in bad["last_error"] and "Server Python" in bad["last_error"]
    start = result["start"]
    assert start["result"] == ["FINISHED"] and start["address"] == "local"    # no port in the scene
    assert start["profile"] == "" and result["start_poll_while_running"] is False
    assert result["local_test"]["server_info"].startswith("tangle-solver ")
    assert result["local_bake"]["result"] == ["FINISHED"]
    assert re.fullmatch(r"Baked: frames 1–4 baked in [\d.]+ s · frames 1–4 stored \(complete\)",
                        result["local_bake"]["status"]), result["local_bake"]["status"]
    assert result["stop"]["result"] == ["FINISHED"] and result["process_exit"] is not None
    assert result["stop_poll_after"] is False
    # reopened with no server running: the scene says "local", the previous session's server line is gone
    assert result["reopened"] == {"address": "local", "server_info": "", "running": False}
    rebake = result["rebake_local"]
    assert rebake["result"] == ["FINISHED"] and rebake["running"] is True, rebake   # Bake started it by itself
    assert re.fullmatch(r"Baked: frames 1–4 baked \(4 replaced\) in [\d.]+ s · frames 1–4 stored \(complete\)",
                        rebake["status"]), rebake["status"]


def check_continuation(result: dict, frames: int, cancel_after: int, rebake_from: int) -> None:
    assert result["full"]["result"] == ["FINISHED"]
    # checkpoint_every = 3: the server's state after frames 4, 7, 10, ... and the last one is stored
    assert result["checkpoint_frames"] == list(range(4, frames, 3)) + [frames]
    cancelled = result["cancelled"]
    assert cancelled["state"] == "cancelled" and cancelled["frames"] >= cancel_after
    last = cancelled["last_frame"]
    assert last < frames  # something was left to resume
    assert cancelled["checkpoint_frames"] == list(range(4, last + 1, 3))
    assert result["resume_poll"] is True
    assert result["resume"]["result"] == ["FINISHED"], result["resume"]
    # the status says what this run baked and what is stored, not "Baked 10/10 frames"
    # (the cancelled bake started over the full one: its frames replaced those, the rest were freed)
    assert re.fullmatch(rf"Cancelled: frames 1–{last} baked \({last} replaced\) in [\d.]+ s · frames 1–{last} stored, "
                        rf"{last + 1}–{frames} missing \(Resume continues\)", cancelled["status"]), cancelled["status"]
    assert re.fullmatch(rf"Baked: frames {last + 1}–{frames} baked in [\d.]+ s · frames 1–{frames} stored "
                        r"\(complete\)", result["resume"]["status"]), result["resume"]["status"]
    replaced = frames - rebake_from + 1
    assert re.fullmatch(rf"Baked: frames {rebake_from}–{frames} baked \({replaced} replaced\) in [\d.]+ s · "
                        rf"frames 1–{frames} stored \(complete\)", result["rebake"]["status"]), result["rebake"]["status"]
    # the resume restored the latest checkpoint at or before the last baked frame, not frame 1
    assert result["resume"]["streamed"] == frames - max(cancelled["checkpoint_frames"])
    before_rebake = [frame for frame in result["checkpoints_before_rebake"] if frame < rebake_from]
    assert result["rebake"]["streamed"] == frames - max(before_rebake)
    assert result["resume_vs_full"] < 1e-5  # resumed bake equals the uninterrupted one [m]
    if "kept_frames_identical_after_resume" in result:
        assert result["kept_frames_identical_after_resume"] is True
    assert result["rebake"]["result"] == ["FINISHED"], result["rebake"]
    assert result["rebake_kept_bit_identical"] is True
    assert result["rebake_kept_max_diff"] == 0.0
    assert result["rebake_changed_min"] > 1e-4  # the changed damping took effect after frame k
    assert result["rebake_frames"] == list(range(1, frames + 1))
    refused = result["changed_topology"]
    assert refused["result"] == ["RAISED"]
    assert "'Sheet'" in refused["last_error"] and "topology changed" in refused["last_error"]
    assert result["free"]["result"] == ["FINISHED"] and result["record_after_free"] is False


@pytest.mark.parametrize("route", ["SHAPE_KEYS", "PC2"])
def test_resume_after_cancel_and_rebake_from_a_frame(run_workflow, solver_server_address, tmp_path, route):
    frames, cancel_after, rebake_from = 60, 5, 11
    result = run_workflow("continuation", address=solver_server_address, frames=frames, route=route,
                          cancel_after=cancel_after, rebake_from=rebake_from, path=str(tmp_path / "shot.blend"))
    check_continuation(result, frames, cancel_after, rebake_from)


def test_shape_key_and_pc2_routes_play_back_identically(run_workflow, solver_server_address, tmp_path):
    copy_dir = tmp_path / "elsewhere"
    copy_dir.mkdir()
    result = run_workflow("output_routes", address=solver_server_address, frames=12,
                          path=str(tmp_path / "shot.blend"), copy_dir=str(copy_dir))
    unsaved = result["pc2_unsaved"]
    assert unsaved["result"] == ["RAISED"] and "save the .blend first" in unsaved["last_error"]
    assert result["shape_keys"]["result"] == ["FINISHED"] and result["pc2"]["result"] == ["FINISHED"]
    assert result["modifier_path"] == "//shot_tangle/Scene/Sheet.pc2"
    assert result["pc2_file"] == str(tmp_path / "shot_tangle" / "Scene" / "Sheet.pc2")
    assert result["shape_keys_left"] is False  # switching routes replaced the shape-key bake
    assert result["pc2_moved"] > 0.01
    assert result["routes_max_diff"] < 1e-6  # both routes play back the same positions [m]
    assert result["path_after_save_as"] == "//../shot_tangle/Scene/Sheet.pc2"  # remapped, still relative
    assert result["save_as_max_diff"] < 1e-6 and result["reload_max_diff"] < 1e-6
    refused = result["rebake_without_modifier"]
    assert refused["result"] == ["RAISED"] and "'Sheet'" in refused["last_error"]
    assert "Tangle Cache' modifier was removed" in refused["last_error"]
    assert result["free"]["result"] == ["FINISHED"]
    assert result["modifier_after_free"] is False and result["file_after_free"] is False


def test_workflow_panel_draws_only_existing_properties_and_operators(run_workflow):
    result = run_workflow("panel")
    assert result["missing"] == []
    assert result["operators"] == ["tangle.start_local_server", "tangle.resume_bake", "tangle.rebake_from_frame"]
    assert {"server_profile", "output_route", "checkpoint_every"} <= set(result["props"])


@pytest.mark.parametrize("route", ["SHAPE_KEYS", "PC2"])
def test_modal_bake_shows_progress_and_escape_keeps_the_frames(run_workflow, solver_server_address, tmp_path, route):
    result = run_workflow("modal_escape", address=solver_server_address, frames=300, n=30, escape_after=3,
                          route=route, path=str(tmp_path / "shot.blend"))
    assert result["panel_shows_progress"] is True
    assert result["mid_status"].startswith("Baking frame ") and "ETA" in result["mid_status"]
    assert "iterations" in result["mid_stats"] and 0.0 < result["mid_progress"] < 1.0
    assert result["outcome"] == ["FINISHED"] and result["state"] == "cancelled"
    assert 3 <= result["frames"] < 300 and result["last_frame"] == result["frames"]
    assert result["timer_removed"] == ["timer"] and result["active_after"] is False
    kept = result["frames"]
    assert re.fullmatch(rf"Cancelled: frames 1–{kept} baked in [\d.]+ s · frames 1–{kept} stored, {kept + 1}–300 "
                        r"missing \(Resume continues\)", result["status"]), result["status"]
    assert result["reports"][0][0] == ["WARNING"] and "cancelled" in result["reports"][0][1]
    print(f"{route}: longest modal tick {result['max_tick_ms']:.1f} ms over {result['ticks']} ticks")


def test_paused_server_is_reported_and_the_bake_recovers(run_workflow):
    result = run_workflow("paused_server", frames=120, n=8, pause_s=3.0)
    assert 3 <= result["frames_at_pause"] < 120
    waited = re.search(r"· no new frame for (\d+) s$", result["statuses"][-1])
    assert waited and 2 <= int(waited.group(1)) <= 5, result["statuses"]  # paused for 3 s
    assert result["state"] == "finished" and result["frames"] == 120  # recovered after SIGCONT
    print(f"longest modal tick {result['max_tick_ms']:.1f} ms over {result['ticks']} ticks")


def test_preferences_draw_profiles_and_local_server_settings(run_workflow):
    result = run_workflow("preferences")
    assert result["add"]["result"] == ["FINISHED"] and result["names"] == ["Server 1", "Server 2"]
    assert result["missing"] == [] and result["lists"] == ["TANGLE_UL_server_profiles"] and result["list_registered"]
    assert result["operators"] == ["tangle.profile_add", "tangle.profile_remove", "tangle.setup_local_solver"]
    assert {"address", "server_public_key_file", "client_secret_key_file", "python_path", "solver_path",
            "local_device", "wheel_folder"} <= set(result["props"])
    assert result["remove"]["result"] == ["FINISHED"] and result["names_after_remove"] == ["Server 1"]

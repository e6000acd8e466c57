"""Headless farm bake failures and retries: `python -m blender_addon.cli bake` returns non-zero with a
clear message on every failure, within the timeout, and keeps the frames baked so far so that a retry
with --resume finishes the bake; the `tangle.farm_bake` operator (for `blender -b --python-expr`) fails
with an ERROR report that Blender's --python-exit-code turns into a non-zero exit code."""

import re
import threading
import time
from pathlib import Path

from bpy_subprocess import run_cli, run_scenario_script, start_cli


def workflow(name: str, home: Path, **args) -> dict:
    return run_scenario_script("workflow_scenarios.py", name, home, **args)


def test_refused_scene_and_missing_file_fail_with_the_problem_named(tmp_path):
    shot = tmp_path / "shot.blend"
    workflow("save_shot", tmp_path, path=str(shot), frames=4, bad_pins=True)
    started = time.monotonic()
    completed = run_cli("bake", str(shot), "--address", "tcp://127.0.0.1:9", "--timeout", "2", home=tmp_path)
    assert completed.returncode == 1
    assert "Sheet" in completed.stderr and "no_such_group" in completed.stderr
    assert time.monotonic() - started < 60
    missing = run_cli("bake", str(tmp_path / "nope.blend"), home=tmp_path)
    assert missing.returncode == 1 and "nope.blend does not exist" in missing.stderr
    not_blend = tmp_path / "text.blend"
    not_blend.write_text("not a blend file")
    unreadable = run_cli("bake", str(not_blend), home=tmp_path)
    assert unreadable.returncode == 1 and "cannot open" in unreadable.stderr
    bad_key = run_cli("bake", str(shot), "--address", "tcp://127.0.0.1:9", "--server-key", str(tmp_path / "no.key"),
                  home=tmp_path)
    assert bad_key.returncode == 1 and "no.key" in bad_key.stderr


def test_server_killed_mid_bake_fails_within_the_timeout_and_resume_finishes(tmp_path, start_solver_server):
    shot = tmp_path / "shot.blend"
    frames = 100
    workflow("save_shot", tmp_path, path=str(shot), frames=frames, n=16, substeps=32)
    server = start_solver_server()
    process = start_cli("bake", str(shot), "--address", server.address, "--timeout", "2", home=tmp_path)
    # the server is killed once the client reports more than 10 frames baked (past the checkpoints of frames 5
    # and 10), however fast the bake runs: a fixed wait after the submission found the bake finished on a fast run
    progress = []
    reader = threading.Thread(target=_read_lines, args=(process.stdout, progress), daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while _frames_reported(progress) <= 10 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    server.process.kill()
    killed_at = time.monotonic()
    process.wait(timeout=60)
    reader.join(timeout=10)
    stdout, stderr = "".join(progress), process.stderr.read()
    detected_after = time.monotonic() - killed_at
    assert process.returncode == 1, stdout + stderr
    assert "timeout" in stdout and server.address in stdout and "FAILED" in stderr
    assert detected_after < 2.0 + 10.0  # the 2 s silence timeout, plus saving and exiting
    kept = workflow("inspect_bake", tmp_path, path=str(shot))
    baked = kept["last_frame"]
    assert baked is not None and 1 <= baked < frames
    assert kept["keys"] == ["Basis"] + [f"tangle_f{frame:04d}" for frame in range(1, baked + 1)]
    assert kept["checkpoints"] and max(kept["checkpoints"]) <= baked

    retry = start_solver_server()
    completed = run_cli("bake", str(shot), "--address", retry.address, "--resume", home=tmp_path)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    # the retry restored the latest checkpoint saved in the file (every 5 frames), not frame 1
    checkpoint = max(frame for frame in kept["checkpoints"] if frame <= baked)
    streamed = frames - checkpoint
    assert f"bake from frame {baked + 1} finished: {streamed}/{streamed} frames" in completed.stdout
    done = workflow("inspect_bake", tmp_path, path=str(shot))
    assert done["last_frame"] == frames
    assert done["keys"] == ["Basis"] + [f"tangle_f{frame:04d}" for frame in range(1, frames + 1)]


def _read_lines(stream, lines: list) -> None:
    """Append the lines of ``stream`` to ``lines`` as they come, until its end."""
    for line in stream:
        lines.append(line)


def _frames_reported(lines: list) -> int:
    """The most frames done that the CLI's progress lines ("tangle: 11/100 frames (11%) · …") report so far."""
    done = [int(match.group(1)) for line in list(lines) for match in [re.search(r"(\d+)/\d+ frames", line)] if match]
    return max(done, default=0)


def test_farm_bake_operator_reports_an_error_on_failure_and_bakes_on_success(tmp_path, solver_server_address):
    shot = tmp_path / "shot.blend"
    workflow("save_shot", tmp_path, path=str(shot), frames=5)
    failed = workflow("farm_operator", tmp_path, path=str(shot), address="tcp://127.0.0.1:9", timeout=1.0)
    assert failed["result"]["result"] == ["RAISED"]  # what --python-exit-code 1 turns into exit code 1
    assert "farm bake failed" in failed["result"]["error"] and "timeout" in failed["result"]["error"]
    baked = tmp_path / "baked.blend"
    done = workflow("farm_operator", tmp_path, path=str(shot), address=solver_server_address, timeout=10.0,
                    output=str(baked))
    assert done["result"]["result"] == ["FINISHED"]
    result = workflow("inspect_bake", tmp_path, path=str(baked))
    assert result["last_frame"] == 5 and len(result["keys"]) == 6

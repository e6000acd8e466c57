"""Set Up Local Solver in real Blender: the installed extension zip makes its own solver
environment from local wheels (no network needed), and Bake then runs the solver from it; a wheel folder
without the packages fails with a clear status and changes nothing."""

from pathlib import Path

import numpy as np


def test_setup_local_solver_from_wheels_then_bake_on_the_local_connection(run_scenario, extension_zip,
                                                                          solver_wheelhouse, discarded_environments):
    tmp_path = discarded_environments
    empty = tmp_path / "empty_wheels"
    empty.mkdir()
    result = run_scenario("setup_and_bake", script="setup_scenarios.py", zip=str(extension_zip),
                          wheels=str(solver_wheelhouse), empty_wheels=str(empty), process_timeout_s=600.0)
    assert result["addon"]["enabled"]
    failed = result["failed_setup"]
    assert failed["result"] == ["RAISED"] and "wheel folder lacks" in failed["status"], failed
    assert failed["python_path"] == ""                              # a failed set-up leaves the preferences alone
    assert result["setup"]["result"] == ["FINISHED"], result["setup"]
    environment = Path(result["environment_folder"])
    assert str(environment).startswith(str(tmp_path)) and environment.name == "solver_env"   # in the user folder
    assert Path(result["python_path"]).is_relative_to(environment) and Path(result["python_path"]).is_file()
    assert result["status"] == f"Local solver ready: {result['python_path']}"
    assert result["solver_in_extension"]                             # the solver's source shipped in the zip
    assert result["address"] == "local"
    assert result["bake_result"]["result"] == ["FINISHED"], result["last_error"]
    assert result["server_python"] == result["python_path"]         # the bake ran on the private environment
    assert result["fall"] > 0.01 and result["baked_status"].startswith("Baked"), result["baked_status"]


def test_the_artists_day_from_the_installed_zip(run_scenario, extension_zip, solver_wheelhouse,
                                                discarded_environments):
    """Set up the local solver from the preferences (local wheels, no network); bake cloth,
    hair and a soft body with painted maps; cancel, save, reopen with no server, resume; re-bake from a
    frame; save and reopen; Bake again brings the local server back. Every status line is checked."""
    import re

    tmp_path = discarded_environments
    frames, cancel_after, rebake_from = 10, 4, 7
    result = run_scenario("artist_day", script="setup_scenarios.py", zip=str(extension_zip),
                          wheels=str(solver_wheelhouse), frames=frames, cancel_after=cancel_after,
                          rebake_from=rebake_from, path=str(tmp_path / "shot.blend"), process_timeout_s=600.0)
    assert result["setup"]["result"] == ["FINISHED"], result["setup"]
    assert [problem for problem in result["check"] if problem[2]] == []         # nothing blocks the painted shot
    full = result["full"]
    assert full["result"] == ["FINISHED"], full["last_error"]
    assert "solver_env" in full["server_python"]                                 # the private environment
    assert re.fullmatch(rf"Baked: frames 1–{frames} baked in [\d.]+ s · frames 1–{frames} stored \(complete\)",
                        full["status"]), full["status"]
    last = result["cancelled"]["last_frame"]
    assert cancel_after <= last < frames
    assert re.fullmatch(rf"Cancelled: frames 1–{last} baked \({last} replaced\) in [\d.]+ s · frames 1–{last} "
                        rf"stored, {last + 1}–{frames} missing \(Resume continues\)", result["cancelled"]["status"]), \
        result["cancelled"]["status"]
    assert result["reopened"]["server_info"] == "" and result["reopened"]["running"] is False
    assert result["reopened"]["status"] == result["cancelled"]["status"]        # the saved line is still true
    resume = result["resume"]
    assert resume["result"] == ["FINISHED"], resume["last_error"]
    assert re.fullmatch(rf"Baked: frames {last + 1}–{frames} baked in [\d.]+ s · frames 1–{frames} stored "
                        r"\(complete\)", resume["status"]), resume["status"]
    # the resumed bake continues from the checkpoint: the same end state as the uninterrupted bake
    np.testing.assert_allclose(resume["flap"], full["flap"], atol=1e-5)
    np.testing.assert_allclose(resume["hair"], full["hair"], atol=1e-5)
    assert abs(resume["jelly_z"] - full["jelly_z"]) < 1e-5
    rebake = result["rebake"]
    replaced = frames - rebake_from + 1
    assert rebake["result"] == ["FINISHED"], rebake["last_error"]
    assert re.fullmatch(rf"Baked: frames {rebake_from}–{frames} baked \({replaced} replaced\) in [\d.]+ s · "
                        rf"frames 1–{frames} stored \(complete\)", rebake["status"]), rebake["status"]
    assert np.abs(np.asarray(rebake["flap"]) - np.asarray(full["flap"])).max() > 1e-4   # the new damping acted
    played = result["played_back"]
    np.testing.assert_allclose(played["flap"], rebake["flap"], atol=1e-6)
    np.testing.assert_allclose(played["hair"], rebake["hair"], atol=1e-6)
    again = result["bake_again"]
    assert again["result"] == ["FINISHED"] and again["running"] is True, again["last_error"]
    assert re.fullmatch(rf"Baked: frames 1–{frames} baked \({frames} replaced\) in [\d.]+ s · frames 1–{frames} "
                        r"stored \(complete\)", again["status"]), again["status"]
    # damping 6 from frame 1 now, not from frame 7: its flap ends elsewhere than the re-baked one
    assert np.abs(np.asarray(again["flap"]) - np.asarray(played["flap"])).max() > 1e-4

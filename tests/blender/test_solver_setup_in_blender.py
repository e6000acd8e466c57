"""Set Up Local Solver in real Blender (issue 22 item 2): the installed extension zip makes its own solver
environment from local wheels (no network needed), and Bake then runs the solver from it; a wheel folder
without the packages fails with a clear status and changes nothing."""

from pathlib import Path


def test_setup_local_solver_from_wheels_then_bake_on_the_local_connection(run_scenario, extension_zip,
                                                                          solver_wheelhouse, tmp_path):
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

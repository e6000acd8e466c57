"""Real-Blender scenario for Preferences > Set Up Local Solver (issue 22 item 2), run in a fresh subprocess by
test_solver_setup_in_blender.py (prints one line "RESULT <json>"): the extension zip installed into a fresh
user folder sets up its private solver environment from a folder of wheels (no network), then a Bake on the
default 'local' connection starts the solver from that environment."""

import importlib
from pathlib import Path

import bpy

from scenario_helpers import bake, bake_scene, call, evaluated_world_positions, grid_object, load_addon, \
    run_from_command_line

PACKAGE = "bl_ext.user_default.tangle"


def scenario_setup_and_bake(args: dict) -> dict:
    result = {"addon": load_addon("zip", args["zip"])}
    prefs = bpy.context.preferences.addons[PACKAGE].preferences
    setup = importlib.import_module(f"{PACKAGE}.operators.setup")
    result["environment_folder"] = str(setup.environment_folder())
    prefs.wheel_folder = args["empty_wheels"]                 # a folder without the packages: a clear failure
    result["failed_setup"] = call(bpy.ops.tangle.setup_local_solver) | {"status": prefs.setup_status,
                                                                        "python_path": prefs.python_path}
    prefs.wheel_folder = args["wheels"]
    result["setup"] = call(bpy.ops.tangle.setup_local_solver)
    result |= {"python_path": prefs.python_path, "solver_path": prefs.solver_path, "status": prefs.setup_status}
    scene = bake_scene(4, 2)                                   # the scene keeps the default 'local' connection
    result["address"] = scene.tangle.server_address
    sheet = grid_object("Sheet", 5, 0.4, 1.0)
    sheet.tangle.role = "CLOTH"
    rest = evaluated_world_positions(sheet, 1)
    result |= bake(scene)
    server = importlib.import_module(f"{PACKAGE}.operators.server").running_local_server()
    result["server_python"] = server.python if server is not None else None
    result["fall"] = float(rest[:, 2].mean() - evaluated_world_positions(sheet, 4)[:, 2].mean())
    result["baked_status"] = scene.tangle.status
    result["solver_in_extension"] = (Path(prefs.solver_path) / "solver_server" / "__main__.py").is_file()
    return result


if __name__ == "__main__":
    run_from_command_line(globals())

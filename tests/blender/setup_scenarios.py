"""Real-Blender scenario for Preferences > Set Up Local Solver, run in a fresh subprocess by
test_solver_setup_in_blender.py (prints one line "RESULT <json>"): the extension zip installed into a fresh
user folder sets up its private solver environment from a folder of wheels (no network), then a Bake on the
default 'local' connection starts the solver from that environment."""

import importlib
from pathlib import Path

import bpy
import numpy as np

from roles_scenarios import curves_positions, make_head_and_hair
from scenario_helpers import bake, bake_cancelled_after, bake_scene, call, evaluated_world_positions, grid_object, load_addon, \
    mesh_object, run_from_command_line

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


def _painted_shot(frames: int):
    """Cloth (bending painted by a vertex group), a soft body (Young's modulus painted) and Curves hair on a
    head (Young's modulus painted by a point attribute), all through the panel's own properties."""
    scene = bake_scene(frames, 2)
    scene.tangle.checkpoint_every = 3
    n = 7
    flap = grid_object("Flap", n, 0.4, 1.0)
    rows, columns = np.divmod(np.arange(n * n), n)
    flap.location.x = 0.6
    flap.vertex_groups.new(name="clamp").add(np.flatnonzero(columns < 2).tolist(), 1.0, "REPLACE")
    flap.vertex_groups.new(name="stiff").add(np.flatnonzero(rows < n // 2).tolist(), 1.0, "REPLACE")
    flap.tangle.role, flap.tangle.pin_group = "CLOTH", "clamp"
    flap.tangle.cloth.bend_stiffness, flap.tangle.cloth.damping = 1.0, 2.0
    flap.tangle.cloth.bend_stiffness_map, flap.tangle.cloth.bend_stiffness_map_zero = "stiff", 0.1
    jelly = mesh_object("Jelly", bpy.ops.mesh.primitive_cube_add, (-0.6, 0.0, 0.5), size=0.2)
    jelly.tangle.role = "SOFTBODY"
    jelly.tangle.softbody.tet_resolution = 3
    jelly.vertex_groups.new(name="firm").add([vertex.index for vertex in jelly.data.vertices if vertex.co.z > 0],
                                              1.0, "REPLACE")
    jelly.tangle.softbody.young_modulus_map = "firm"
    floor = mesh_object("Floor", bpy.ops.mesh.primitive_plane_add, size=4.0)
    floor.tangle.role, floor.tangle.collider_shape = "COLLIDER", "PLANE"
    head, hair, _, _ = make_head_and_hair(5, 0.08)
    head.location.z = 1.3
    hair.tangle.role = "HAIR"
    stiff_roots = hair.data.attributes.new("stiff_roots", "FLOAT", "POINT")
    stiff_roots.data.foreach_set("value", np.tile(np.linspace(1.0, 0.0, 5), len(hair.data.curves)).astype(np.float32))
    hair.tangle.hair.young_modulus_map = "stiff_roots"
    return scene, flap, jelly, hair


def _state(scene, objects, frames) -> dict:
    """What an artist sees: the status line and where every object is on the last frame."""
    return {"status": scene.tangle.status, "last_error": scene.tangle.last_error,
            "flap": evaluated_world_positions(objects[0], frames).tolist(),
            "jelly_z": float(evaluated_world_positions(objects[1], frames)[:, 2].mean()),
            "hair": curves_positions(objects[2], frames).tolist()}


def scenario_artist_day(args: dict) -> dict:
    """The whole story from the installed zip: set up the local solver from a wheel folder; bake cloth,
    a soft body and hair with painted maps on 'local'; cancel part way, save, reopen with no server, Resume;
    re-bake from a frame; save, reopen, Bake again (the local solver comes back by itself). The status line
    is recorded after every step."""
    result = {"addon": load_addon("zip", args["zip"])}
    prefs = bpy.context.preferences.addons[PACKAGE].preferences
    prefs.wheel_folder = args["wheels"]
    result["setup"] = call(bpy.ops.tangle.setup_local_solver) | {"status": prefs.setup_status}
    frames, path = args["frames"], args["path"]
    scene, *objects = _painted_shot(frames)
    bpy.ops.wm.save_as_mainfile(filepath=path)
    result["check"] = [[problem.object, problem.message, problem.blocking] for problem in
                       importlib.import_module(f"{PACKAGE}.export").check_scene(scene)]
    result["full"] = call(bpy.ops.tangle.bake) | _state(scene, objects, frames)
    server_module = importlib.import_module(f"{PACKAGE}.operators.server")
    result["full"]["server_python"] = server_module.running_local_server().python

    bake_cancelled_after(scene, args["cancel_after"], PACKAGE, timeout_s=120.0)
    result["cancelled"] = {"status": scene.tangle.status,
                           "last_frame": importlib.import_module(f"{PACKAGE}.bake_output").load_record(scene).last_frame}
    bpy.ops.wm.save_mainfile()
    server_module.stop_local_server()                              # Blender closes: no server any more
    bpy.ops.wm.open_mainfile(filepath=path)
    scene = bpy.context.scene
    objects = [bpy.data.objects[name] for name in ("Flap", "Jelly", "Hair")]
    result["reopened"] = {"status": scene.tangle.status, "server_info": scene.tangle.server_info,
                          "running": server_module.running_local_server() is not None}
    result["resume"] = call(bpy.ops.tangle.resume_bake) | _state(scene, objects, frames)
    scene.frame_set(args["rebake_from"])
    objects[0].tangle.cloth.damping = 6.0
    result["rebake"] = call(bpy.ops.tangle.rebake_from_frame) | _state(scene, objects, frames)
    bpy.ops.wm.save_mainfile()
    server_module.stop_local_server()
    bpy.ops.wm.open_mainfile(filepath=path)
    scene = bpy.context.scene
    objects = [bpy.data.objects[name] for name in ("Flap", "Jelly", "Hair")]
    result["played_back"] = _state(scene, objects, frames)           # the saved bake plays without a server
    result["bake_again"] = call(bpy.ops.tangle.bake) | _state(scene, objects, frames) | {
        "running": server_module.running_local_server() is not None}
    server_module.stop_local_server()
    return result


if __name__ == "__main__":
    run_from_command_line(globals())

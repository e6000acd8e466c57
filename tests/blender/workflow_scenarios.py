"""Real-Blender scenarios of the bake workflow (connection, resume / re-bake, output routes, farm entry),
each run in a fresh subprocess by test_bake_workflow.py:

    python workflow_scenarios.py SCENARIO JSON_ARGS   ->  prints one line "RESULT <json>"

Assertions live in the pytest module; this file only drives Blender and measures.
"""

import importlib
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import bpy
import numpy as np

from scenario_helpers import (LayoutRecorder, bake_cancelled_after, bake_scene, call, draw_panels, drawn, enable_addon,
                              evaluated_world_positions, grid_object, missing_from_rna, run_from_command_line)


def pinned_sheet(n: int = 6, name: str = "Sheet") -> bpy.types.Object:
    sheet = grid_object(name, n, 1.0, 1.0)
    sheet.rotation_euler = (0.0, 0.0, 0.4)
    sheet.vertex_groups.new(name="pins").add([n * (n - 1), n * n - 1], 1.0, "REPLACE")
    sheet.tangle.role, sheet.tangle.pin_group = "CLOTH", "pins"
    return sheet


def playback(obj, frames) -> dict[int, list]:
    return {frame: evaluated_world_positions(obj, frame) for frame in frames}


def shape_key_bytes(obj) -> dict[int, bytes]:
    """Raw float32 data of every baked shape key, by frame."""
    session = importlib.import_module("blender_addon.core.bake_state")
    result = {}
    for block in obj.data.shape_keys.key_blocks if obj.data.shape_keys else ():
        frame = session.frame_of_shape_key(block.name)
        if frame is not None:
            data = np.empty(len(block.data) * 3, np.float32)
            block.data.foreach_get("co", data)
            result[frame] = data.tobytes()
    return result


def max_difference(a: dict, b: dict) -> float:
    return float(max(np.abs(a[frame] - b[frame]).max() for frame in a))


def modal_driver(scene):
    """(operator, context, reports, removed timers): stand-ins for the bake operator instance and Blender's
    context when ``TANGLE_OT_bake.modal`` is driven by hand; its reports and removed timers are collected."""
    reports, removed_timers = [], []
    operator = SimpleNamespace(_timer="timer", report=lambda level, text: reports.append((sorted(level), text)))
    context = SimpleNamespace(window_manager=SimpleNamespace(event_timer_remove=removed_timers.append), screen=None,
                              scene=scene)
    return operator, context, reports, removed_timers


def modal_tick(operators, operator, context, ticks: list) -> set | None:
    """One window-manager timer tick of the bake operator, 0.1 s after the previous one: its outcome
    once the bake is over (None while it runs); the tick's duration [s] is appended to ``ticks``."""
    time.sleep(0.1)
    started = time.perf_counter()
    outcome = operators.TANGLE_OT_bake.modal(operator, context, SimpleNamespace(type="TIMER", value="NOTHING"))
    ticks.append(time.perf_counter() - started)
    return None if outcome == {"PASS_THROUGH"} else outcome


def scenario_connection(args: dict) -> dict:
    """Server profiles with CURVE keys, a missing profile, Start / Stop Local Server."""
    enable_addon()
    scene = bpy.context.scene
    prefs = bpy.context.preferences.addons["blender_addon"].preferences
    result = {"profile_add": call(bpy.ops.tangle.profile_add)}
    profile = prefs.profiles[0]
    profile.name, profile.address = "Secure", args["curve_address"]
    profile.server_public_key_file = args["server_key"]
    profile.client_secret_key_file = args["client_key"]
    scene.tangle.server_profile, scene.tangle.timeout = "Secure", 3.0
    result["curve"] = call(bpy.ops.tangle.test_connection) | {"server_info": scene.tangle.server_info}
    profile.client_secret_key_file = ""  # a fresh, unauthorized client key: the server stays silent
    result["curve_unauthorized"] = call(bpy.ops.tangle.test_connection) | {"last_error": scene.tangle.last_error}
    profile.server_public_key_file = "/nonexistent/server.key"
    result["missing_key_file"] = call(bpy.ops.tangle.test_connection) | {"last_error": scene.tangle.last_error}
    scene.tangle.server_profile = "Nobody"
    result["unknown_profile"] = call(bpy.ops.tangle.test_connection) | {"last_error": scene.tangle.last_error}
    sheet = pinned_sheet()
    result["bake_with_unknown_profile"] = call(bpy.ops.tangle.bake) | {
        "last_error": scene.tangle.last_error, "keys": sheet.data.shape_keys is not None}

    prefs.python_path = args["bad_python"]
    result["bad_python"] = call(bpy.ops.tangle.start_local_server) | {"last_error": scene.tangle.last_error}
    prefs.python_path = sys.executable
    result["start"] = call(bpy.ops.tangle.start_local_server) | {
        "address": scene.tangle.server_address, "profile": scene.tangle.server_profile}
    result["start_poll_while_running"] = bpy.ops.tangle.start_local_server.poll()
    result["local_test"] = call(bpy.ops.tangle.test_connection) | {"server_info": scene.tangle.server_info}
    scene.frame_start, scene.frame_end = 1, 4
    result["local_bake"] = call(bpy.ops.tangle.bake) | {"status": scene.tangle.status}
    server_module = importlib.import_module("blender_addon.operators.server")
    server = server_module.running_local_server()
    process = server.process
    result["stop"] = call(bpy.ops.tangle.stop_local_server)
    result["process_exit"] = process.poll()
    result["stop_poll_after"] = bpy.ops.tangle.stop_local_server.poll()

    # The file stores no port and no stale status; Bake brings the local solver back itself.
    scene.tangle.server_info = "tangle-solver 0.0.0 · cpu · a previous session"
    bpy.ops.wm.save_as_mainfile(filepath=args["path"])
    bpy.ops.wm.open_mainfile(filepath=args["path"])
    scene = bpy.context.scene
    result["reopened"] = {"address": scene.tangle.server_address, "server_info": scene.tangle.server_info,
                          "running": server_module.running_local_server() is not None}
    result["rebake_local"] = call(bpy.ops.tangle.bake) | {"status": scene.tangle.status,
                                                         "running": server_module.running_local_server() is not None}
    server_module.stop_local_server()
    return result


def scenario_continuation(args: dict) -> dict:
    """Uninterrupted bake vs cancel-at-k + resume; re-bake from frame k keeps frames < k bit-identical;
    a changed topology is refused; the stored checkpoints survive save and reload."""
    enable_addon()
    bake_output = importlib.import_module("blender_addon.bake_output")
    frames = args["frames"]
    scene = bake_scene(frames, 2, args["address"])
    scene.tangle.checkpoint_every, scene.tangle.output_route = 3, args["route"]
    bpy.ops.wm.save_as_mainfile(filepath=args["path"])
    sheet = pinned_sheet()
    result = {"full": call(bpy.ops.tangle.bake)}
    reference = playback(sheet, range(1, frames + 1))
    record = bake_output.load_record(scene)
    result["checkpoint_frames"] = sorted(record.checkpoints)

    # Cancel after k frames (driven the way the modal timer drives the session), then Resume.
    session = bake_cancelled_after(scene, args["cancel_after"])
    record = bake_output.load_record(scene)
    result["cancelled"] = {"state": session.outcome.state, "frames": session.outcome.frames_baked,
                           "status": scene.tangle.status,
                           "last_frame": record.last_frame, "checkpoint_frames": sorted(record.checkpoints)}
    before_resume = shape_key_bytes(sheet) if args["route"] == "SHAPE_KEYS" else None
    bpy.ops.wm.save_mainfile()
    bpy.ops.wm.open_mainfile(filepath=args["path"])  # the resume must work from the saved file alone
    scene, sheet = bpy.context.scene, bpy.data.objects["Sheet"]
    result["resume_poll"] = bpy.ops.tangle.resume_bake.poll()
    result["resume"] = call(bpy.ops.tangle.resume_bake) | {"status": scene.tangle.status}
    result["resume"]["streamed"] = importlib.import_module("blender_addon.session").last_session().outcome.frames_total
    resumed = playback(sheet, range(1, frames + 1))
    result["resume_vs_full"] = max_difference(reference, resumed)
    if before_resume is not None:
        after = shape_key_bytes(sheet)
        result["kept_frames_identical_after_resume"] = all(after[f] == data for f, data in before_resume.items()
                                                           if f <= result["cancelled"]["last_frame"])

    # Re-bake from frame k with a changed parameter: frames < k stay bit-identical, frames >= k change.
    k = args["rebake_from"]
    before = {frame: positions.copy() for frame, positions in playback(sheet, range(1, frames + 1)).items()}
    raw_before = shape_key_bytes(sheet) if args["route"] == "SHAPE_KEYS" else None
    pc2_before = None
    if args["route"] == "PC2":
        pc2_before = Path(bpy.path.abspath(bake_output.mesh_cache_modifier(sheet).filepath)).read_bytes()
    sheet.tangle.cloth.damping = 5.0
    scene.frame_set(k)
    result["checkpoints_before_rebake"] = sorted(bake_output.load_record(scene).checkpoints)
    result["rebake"] = call(bpy.ops.tangle.rebake_from_frame) | {"status": scene.tangle.status}
    result["rebake"]["streamed"] = importlib.import_module("blender_addon.session").last_session().outcome.frames_total
    after = playback(sheet, range(1, frames + 1))
    result["rebake_kept_max_diff"] = float(max(np.abs(after[f] - before[f]).max() for f in range(1, k)))
    result["rebake_changed_min"] = float(np.abs(after[frames] - before[frames]).max())
    if raw_before is not None:
        raw_after = shape_key_bytes(sheet)
        result["rebake_kept_bit_identical"] = all(raw_after[f] == raw_before[f] for f in range(1, k))
        result["rebake_frames"] = sorted(raw_after)
    if pc2_before is not None:
        pc2_after = Path(bpy.path.abspath(bake_output.mesh_cache_modifier(sheet).filepath)).read_bytes()
        kept_bytes = 32 + (k - 1) * len(sheet.data.vertices) * 12
        result["rebake_kept_bit_identical"] = pc2_after[32:kept_bytes] == pc2_before[32:kept_bytes]
        result["rebake_frames"] = list(range(1, frames + 1))

    # A topology change is detected and refused with the object named; nothing is touched.
    bpy.context.view_layer.objects.active = sheet
    sheet.data.vertices.add(1)
    sheet.data.update()
    result["changed_topology"] = call(bpy.ops.tangle.rebake_from_frame) | {"last_error": scene.tangle.last_error}
    result["free"] = call(bpy.ops.tangle.free_bake)
    result["record_after_free"] = bake_output.RECORD_PROPERTY in scene
    return result


def scenario_output_routes(args: dict) -> dict:
    """The same bake as shape keys and as PC2 + Mesh Cache: identical playback; Save As and reload keep
    the PC2 route playing; Free Bake removes the modifier and the file."""
    enable_addon()
    bake_output = importlib.import_module("blender_addon.bake_output")
    frames = args["frames"]
    scene = bake_scene(frames, 2, args["address"])
    sheet = pinned_sheet()
    scene.tangle.output_route = "PC2"  # PC2 needs a saved .blend
    result = {}
    result["pc2_unsaved"] = call(bpy.ops.tangle.bake) | {"last_error": scene.tangle.last_error}
    bpy.ops.wm.save_as_mainfile(filepath=args["path"])
    scene.tangle.output_route = "SHAPE_KEYS"
    result["shape_keys"] = call(bpy.ops.tangle.bake)
    sample_frames = [1, 2, 3, frames // 2, frames]
    shape_key_playback = playback(sheet, sample_frames)
    scene.tangle.output_route = "PC2"
    result["pc2"] = call(bpy.ops.tangle.bake)
    modifier = bake_output.mesh_cache_modifier(sheet)
    result["modifier_path"] = modifier.filepath
    result["shape_keys_left"] = sheet.data.shape_keys is not None
    pc2_path = Path(bpy.path.abspath(modifier.filepath))
    result["pc2_file"] = str(pc2_path)
    pc2_playback = playback(sheet, sample_frames)
    result["routes_max_diff"] = max_difference(shape_key_playback, pc2_playback)
    result["pc2_moved"] = float(np.abs(pc2_playback[frames] - pc2_playback[1]).max())
    bpy.ops.wm.save_mainfile()
    copy = Path(args["copy_dir"]) / "copy.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(copy))  # Save As into another folder
    result["path_after_save_as"] = bake_output.mesh_cache_modifier(bpy.data.objects["Sheet"]).filepath
    bpy.ops.wm.open_mainfile(filepath=str(copy))
    result["save_as_max_diff"] = max_difference(pc2_playback, playback(bpy.data.objects["Sheet"], sample_frames))
    copied_sheet = bpy.data.objects["Sheet"]
    copied_sheet.modifiers.remove(bake_output.mesh_cache_modifier(copied_sheet))
    bpy.context.scene.frame_set(4)
    result["rebake_without_modifier"] = call(bpy.ops.tangle.rebake_from_frame) | {
        "last_error": bpy.context.scene.tangle.last_error}
    bpy.ops.wm.open_mainfile(filepath=args["path"])
    sheet = bpy.data.objects["Sheet"]
    result["reload_max_diff"] = max_difference(pc2_playback, playback(sheet, sample_frames))
    result["free"] = call(bpy.ops.tangle.free_bake)
    result["modifier_after_free"] = bake_output.mesh_cache_modifier(sheet) is not None
    result["file_after_free"] = pc2_path.exists()
    return result


def scenario_panel(args: dict) -> dict:
    """Draw the bake-workflow sub-panel with a recording layout: every property and operator exists."""
    enable_addon()
    panels = importlib.import_module("blender_addon.panels")
    pinned_sheet()
    calls = draw_panels((panels.TANGLE_PT_bake_workflow,), scene=bpy.context.scene,
                        preferences=bpy.context.preferences)
    return {"missing": missing_from_rna(calls), "operators": drawn(calls, "operator"), "props": drawn(calls, "prop")}


def scenario_preferences(args: dict) -> dict:
    """Draw the add-on preferences (profiles list + selected profile + local server) with a recording
    layout: every drawn property and operator exists; Add / Remove Profile work."""
    enable_addon()
    preferences = importlib.import_module("blender_addon.preferences")
    prefs = bpy.context.preferences.addons["blender_addon"].preferences
    result = {"add": call(bpy.ops.tangle.profile_add), "add_again": call(bpy.ops.tangle.profile_add)}
    result["names"] = [profile.name for profile in prefs.profiles]

    class Recorder(LayoutRecorder):
        def template_list(self, list_type, list_id, data, name, active_data, active_name, **kwargs):
            self.calls.append(("list", list_type))
            self.calls.append(("prop", data, name))
            self.calls.append(("prop", active_data, active_name))

        def separator(self, **kwargs):
            pass

    calls = []

    class Drawn:
        layout = Recorder(calls)

        def __getattr__(self, name):
            return getattr(prefs, name)

    preferences.TanglePreferences.draw(Drawn(), bpy.context)
    result["missing"] = missing_from_rna(calls)
    result["lists"] = drawn(calls, "list")
    result["list_registered"] = hasattr(bpy.types, result["lists"][0]) if result["lists"] else False
    result["operators"] = drawn(calls, "operator")
    result["props"] = drawn(calls, "prop")
    result["remove"] = call(bpy.ops.tangle.profile_remove)
    result["names_after_remove"] = [profile.name for profile in prefs.profiles]
    return result


def scenario_modal_escape(args: dict) -> dict:
    """Drive the bake operator's modal() exactly as Blender would (timer ticks every 0.1 s, then an Esc
    press): progress/ETA/live stats mid-bake, Esc cancels, the frames so far are kept; the longest tick
    (main-thread time applying frames) is measured."""
    enable_addon()
    operators = importlib.import_module("blender_addon.operators.bake")
    bake_output = importlib.import_module("blender_addon.bake_output")
    scene = bake_scene(args["frames"], 2, args["address"])
    scene.tangle.output_route = args["route"]
    bpy.ops.wm.save_as_mainfile(filepath=args["path"])
    pinned_sheet(args["n"])
    operator, context, reports, removed = modal_driver(scene)
    importlib.import_module("blender_addon.session").set_active_session(operators.BakeSession(scene).start())
    result = {"panel_shows_progress": operators.active_session() is not None, "mid_status": "", "ticks": 0}
    ticks, outcome, pressed = [], None, False
    deadline = time.monotonic() + 60
    while outcome is None and time.monotonic() < deadline:
        outcome = modal_tick(operators, operator, context, ticks)
        if not pressed and importlib.import_module("blender_addon.session").last_session().progress.frames_done >= args["escape_after"]:
            result["mid_status"], result["mid_stats"] = scene.tangle.status, scene.tangle.live_stats
            result["mid_progress"] = scene.tangle.progress
            pressed = True
            operators.TANGLE_OT_bake.modal(operator, context, SimpleNamespace(type="ESC", value="PRESS"))
    session = importlib.import_module("blender_addon.session").last_session()
    result.update(outcome=sorted(outcome or []), state=session.outcome.state, frames=session.outcome.frames_baked,
                  last_frame=bake_output.load_record(scene).last_frame, reports=reports, timer_removed=removed,
                  status=scene.tangle.status, max_tick_ms=1e3 * max(ticks), ticks=len(ticks),
                  active_after=operators.active_session() is not None)
    return result


def scenario_paused_server(args: dict) -> dict:
    """SIGSTOP the solver server mid-bake while the modal timer ticks: the status says how long no frame
    came and every tick stays short; after SIGCONT the bake finishes with every frame."""
    import signal

    enable_addon()
    operators = importlib.import_module("blender_addon.operators.bake")
    local_server = importlib.import_module("blender_addon.core.local_server")
    scene = bake_scene(args["frames"], 2)
    scene.tangle.timeout = 30.0
    pinned_sheet(args["n"])
    operator, context, _, _ = modal_driver(scene)
    result, ticks, statuses = {}, [], []
    server = local_server.LocalServer()
    scene.tangle.server_address = server.start()
    try:
        session = operators.BakeSession(scene).start()
        importlib.import_module("blender_addon.session").set_active_session(session)
        paused_at = resumed_at = outcome = None
        deadline = time.monotonic() + 90
        while outcome is None and time.monotonic() < deadline:
            outcome = modal_tick(operators, operator, context, ticks)
            now = time.monotonic()
            if paused_at is None and session.progress.frames_done >= 3:
                os.kill(server.process.pid, signal.SIGSTOP)
                paused_at = now
                result["frames_at_pause"] = session.progress.frames_done
            elif paused_at is not None and resumed_at is None:
                statuses.append(scene.tangle.status)
                if now - paused_at >= args["pause_s"]:
                    os.kill(server.process.pid, signal.SIGCONT)
                    resumed_at = now
    finally:
        if server.process is not None and server.process.poll() is None:
            os.kill(server.process.pid, signal.SIGCONT)
        server.stop()
    result.update(state=session.outcome.state, frames=session.outcome.frames_baked, statuses=statuses[-2:],
                  max_tick_ms=1e3 * max(ticks), ticks=len(ticks))
    return result


def scenario_save_shot(args: dict) -> dict:
    """Write a .blend with a pinned cloth grid for the farm-bake tests (``bad_pins``: a missing pin group)."""
    enable_addon()
    bake_scene(args["frames"], args.get("substeps", 2))
    sheet = pinned_sheet(args.get("n", 6))
    if args.get("bad_pins"):
        sheet.tangle.pin_group = "no_such_group"
    bpy.ops.wm.save_as_mainfile(filepath=args["path"])
    return {"saved": args["path"]}


def scenario_inspect_bake(args: dict) -> dict:
    """Open a baked .blend and report its shape keys, the stored bake record and the positions."""
    bpy.ops.wm.open_mainfile(filepath=args["path"])
    enable_addon(keep_file=True)
    bake_output = importlib.import_module("blender_addon.bake_output")
    sheet = bpy.data.objects["Sheet"]
    record = bake_output.load_record(bpy.context.scene)
    keys = [block.name for block in sheet.data.shape_keys.key_blocks] if sheet.data.shape_keys else []
    frames = args.get("frames", [])
    return {"keys": keys, "last_frame": None if record is None else record.last_frame,
            "checkpoints": [] if record is None else sorted(record.checkpoints),
            "positions": {str(f): evaluated_world_positions(sheet, f).tolist() for f in frames}}


def scenario_farm_operator(args: dict) -> dict:
    """bpy.ops.tangle.farm_bake on the open file, as `blender -b shot.blend --python-expr` runs it."""
    bpy.ops.wm.open_mainfile(filepath=args["path"])
    enable_addon(keep_file=True)
    return {"result": call(lambda: bpy.ops.tangle.farm_bake(address=args["address"], timeout=args["timeout"],
                                                            output=args.get("output", "")))}


if __name__ == "__main__":
    run_from_command_line(globals())

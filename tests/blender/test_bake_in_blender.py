"""End to end in real Blender (bpy 4.5): install the built extension zip, bake a pinned cloth grid
against a real solver server subprocess, check the shape keys / keyframes and the physics, free it.

Every scenario runs in its own bpy subprocess (tests/blender/scenarios.py); the modal (UI) path of
the bake operator needs a window and is not exercised here — the operator's blocking path is the same
BakeSession code driven synchronously.
"""

import re
import pytest


def check_grid_bake(result: dict) -> None:
    bad = result["bad_pin_group"]
    assert bad["result"] == ["RAISED"] and not bad["shape_keys"]  # operator reported an ERROR
    assert "Sheet" in bad["error"] and "no_such_group" in bad["error"]
    assert "Sheet" in bad["last_error"] and "no_such_group" in bad["last_error"]

    refused = result["server_refused"]
    assert refused["result"] == ["RAISED"] and not refused["shape_keys"]
    # refused by Check Scene with the server's own rule, before anything is sent
    assert refused["last_error"].startswith("Sheet: strain limits (1.5, 2) must satisfy min ≤ 1 ≤ max")

    assert result["bake_result"]["result"] == ["FINISHED"], result["bake_result"]
    assert result["last_error"] == ""
    assert re.fullmatch(r"Baked: frames 1–10 baked in [\d.]+ s · frames 1–10 stored \(complete\)", result["status"])
    assert "iterations" in result["live_stats"]
    assert result["connection"]["result"] == ["FINISHED"]
    assert result["connection"]["server_info"].startswith("tangle-solver ")
    refused = result["connection_refused"]
    assert refused["result"] == ["RAISED"] and refused["server_info"] == ""
    assert "tcp://127.0.0.1:9" in refused["last_error"] and "timeout" in refused["last_error"]
    keys = result["shape_keys"]
    assert keys["names"] == ["Basis"] + [f"tangle_f{frame:04d}" for frame in range(1, 11)]
    assert keys["fcurves"] == 10 and keys["interpolations"] == ["LINEAR"]
    assert keys["keys_of_frame_5"] == [[4.0, 0.0], [5.0, 1.0], [6.0, 0.0]]
    assert result["baked_topology"]
    # Physics seen through playback (shape keys evaluated by Blender, converted back to world space):
    assert result["first_frame_error"] < 1e-5  # frame 1 is the submitted input
    assert max(result["pinned_drift"].values()) < 1e-5  # pinned corners hold (float32 shape keys)
    assert result["free_drop"]["5"] > 0.0 and result["free_drop"]["10"] > 0.0  # every free vertex fell
    # The edge opposite the pins falls, but never faster than free fall: backward Euler with n steps of
    # h gives g h² n(n+1)/2 = (g t²/2)(1 + 1/n), t = (f - 1)/24 s, n = (f - 1) x 4 substeps.
    for frame in (5, 10):
        steps = (frame - 1) * 4
        free_fall = 0.5 * 9.81 * ((frame - 1) / 24) ** 2 * (1 + 1 / steps)
        assert 0.3 * free_fall < result["far_edge_drop"][str(frame)] < free_fall + 1e-6
    assert result["subframe_error"] < 1e-5  # LINEAR keys: halfway between frames is the midpoint
    assert result["refused_rebake"] == ["RAISED"] and result["keys_after_refused_rebake"] == 11
    assert result["free_result"]["result"] == ["FINISHED"]
    assert result["after_free"] == {"names": [], "fcurves": 0, "has_action": False}
    assert result["after_free_topology"] == "" and result["after_free_matches_rest"] < 1e-6
    assert result["free_poll_after"] is False
    assert result["free_again"]["result"] == ["RAISED"] and "Nothing to free" in result["free_again"]["error"]


def test_bake_with_installed_extension_zip(run_scenario, extension_zip, solver_server_address):
    result = run_scenario("bake_grid", mode="zip", zip=str(extension_zip), address=solver_server_address)
    addon = result["addon"]
    assert addon["install_result"] == ["FINISHED"] and addon["enabled"]
    assert "/extensions/user_default/tangle/" in addon["module_file"]
    assert addon["protocol_module"] == "bl_ext.user_default.tangle.protocol"  # the vendored copy
    check_grid_bake(result)


def test_bake_with_addon_registered_from_source(run_scenario, solver_server_address):
    check_grid_bake(run_scenario("bake_grid", mode="source", address=solver_server_address))


def test_animated_scaled_sphere_collider_keeps_cloth_out(run_scenario, solver_server_address):
    frames = 16
    result = run_scenario("sphere_collider", frames=frames, address=solver_server_address)
    assert result["ball_animated"] is True and result["sheet_animated"] is False
    assert result["child_of_static_parent_animated"] is False
    assert result["child_of_animated_parent_animated"] is True
    assert result["constrained_animated"] is True and result["deformed_animated"] is True
    assert result["bake_result"]["result"] == ["FINISHED"], result["bake_result"]
    radius = 0.3  # local radius 1 (bounding box) x object scale 0.3: the matrix carries the scale
    contact = radius + 0.002  # + the cloth's default contact thickness [m]
    # The cloth starts 0.3 m above the sphere top and lands on it: it gets close but never inside.
    assert result["clearance"][0] > 0.6 - 1e-6
    assert min(result["clearance"]) > contact - 1e-3
    # ... and it stays in contact, riding on the rising sphere (0.3 -> 0.6 m), over the last frames.
    assert max(result["clearance"][-4:]) < contact + 0.01
    assert result["center_z_last"] == pytest.approx(0.6, abs=1e-6)


def test_a_pre_roll_bakes_the_first_frame_already_settled(run_scenario, solver_server_address):
    result = run_scenario("preroll", frames=4, preroll=24, address=solver_server_address)
    assert result["exported_time"]["preroll"] == 24
    assert result["bake_result"]["result"] == ["FINISHED"], result["bake_result"]
    assert result["status"].startswith("Baked: frames 1–4")
    # the sheet starts 0.2 m above the ball (radius 0.3); after a second of pre-roll frame 1 already rests on it
    assert result["first_frame_drop"] > 0.15
    contact = 0.3 + 0.002
    assert contact - 1e-3 < result["first_frame_clearance"] < contact + 0.01
    assert contact - 1e-3 < result["last_frame_clearance"] < contact + 0.01


def test_cancel_and_server_loss_keep_the_frames_baked_so_far(run_scenario):
    result = run_scenario("cancel_and_server_loss")
    for case, state in (("cancel", "cancelled"), ("server_loss", "failed")):
        outcome = result[case]
        assert outcome["state"] == state, outcome
        baked = outcome["frames_baked"]
        assert 5 <= baked < 400, outcome
        assert outcome["keys"] == ["Basis"] + [f"tangle_f{frame:04d}" for frame in range(1, baked + 1)]
        assert outcome["moved"] > 0.01  # the kept frames hold a real simulation
        assert outcome["last_pose_held"] < 1e-6  # after the last baked frame the pose holds
    first_bake = result["cancel"]["frames_baked"]
    for case, verb, replaced in (("cancel", "Cancelled", 0),
                                 ("server_loss", "Failed", min(first_bake, result["server_loss"]["frames_baked"]))):
        baked = result[case]["frames_baked"]
        # the second bake replaced the frames the first one had kept (the line says so)
        assert re.fullmatch(rf"{verb}: frames 1–{baked} baked{f' [(]{replaced} replaced[)]' if replaced else ''} in "
                            rf"[\d.]+ s · frames 1–{baked} stored, {baked + 1}–400 missing \(Resume continues\)",
                            result[case]["status"]), result[case]["status"]
    assert "timeout" in result["server_loss"]["message"]


def test_panels_draw_only_existing_properties_and_operators(run_scenario):
    report = run_scenario("panels")
    for role, drawn in report.items():
        assert drawn["missing"] == [], role
        assert drawn["operators"] == ["tangle.test_connection", "tangle.bake", "tangle.free_bake",
                                      "tangle.check_scene"], role
    assert report["CLOTH"]["props"] > report["COLLIDER"]["props"] > report["NONE"]["props"]
    assert any("needs a Curves (hair) or Curve object" in label for label in report["HAIR"]["labels"])
    assert "Static" in report["COLLIDER"]["labels"]

"""Soft body, hair (Curves and legacy Curve), box/torus/mesh colliders, presets and pre-bake checks in
real Blender (bpy 4.5), baked against a real solver server subprocess; every scenario runs in its own
bpy subprocess (tests/blender/roles_scenarios.py)."""


import numpy as np
import pytest


def run_roles(run_scenario, name, **args):
    return run_scenario(name, script="roles_scenarios.py", **args)


def test_soft_body_falls_onto_the_floor_and_colliders_export(run_scenario, solver_server_address):
    frames = 12
    result = run_roles(run_scenario, "softbody_on_floor", frames=frames, address=solver_server_address)
    assert result["preset"]["result"] == ["FINISHED"]
    assert result["jelly_params"]["young_modulus"] == 1.0e6 and result["jelly_params"]["tet_resolution"] == 3
    assert result["kinds"] == {"Jelly": "softbody", "Floor": "collider", "Crate": "collider", "Ring": "collider",
                               "Waving": "collider"}
    assert result["jelly_triangles"] == 12  # the cube's surface, triangulated; the server makes the tets
    # box = the local bounding box, the object's scale rides in matrix_world; torus = Blender's default torus
    assert result["crate_shape"] == {"type": "box", "center": [0.0, 0.0, 0.0], "size": [1.0, 1.0, 1.0]}
    assert result["crate_scale"] == pytest.approx([2.0, 1.0, 0.5])
    assert result["ring_shape"]["major_radius"] == pytest.approx(1.0)
    assert result["ring_shape"]["minor_radius"] == pytest.approx(0.25)
    # a deforming (Wave) mesh collider sends its deformed world vertices for every frame
    assert result["waving_animated"] is True and result["animated_ids"] == ["Waving"]
    assert result["drive_frames"] == list(range(1, frames + 1))
    assert result["drive_vertices_shape"] == [result["waving_vertices"], 3]
    assert result["drive_first_equals_scene"] == 0.0 and result["drive_vertices_move"] > 0.01

    assert result["bake_result"]["result"] == ["FINISHED"], result["last_error"]
    assert result["shape_keys"] == ["Basis"] + [f"tangle_f{frame:04d}" for frame in range(1, frames + 1)]
    assert result["first_frame_error"] < 1e-6
    lowest = result["lowest"]
    assert lowest[0] == pytest.approx(0.4, abs=1e-6)
    # free fall from 0.4 m (bottom face) takes sqrt(2 * 0.4 / g) = 0.286 s = frame 7.9: it lands ...
    assert lowest[5] > 0.05 and min(lowest) < 0.01
    # ... and the floor (plane z = 0, cube thickness 2 mm) holds it at every frame
    assert min(lowest) > 0.002 - 1e-4
    assert result["center_drop"] > 0.3
    assert result["free_result"]["result"] == ["FINISHED"] and result["after_free"] == []


def test_deforming_mesh_collider_lifts_the_cloth(run_scenario, solver_server_address):
    frames = 16
    result = run_roles(run_scenario, "cloth_on_rising_mesh_collider", frames=frames, address=solver_server_address)
    assert result["platform_deforms"] is True
    assert result["bake_result"]["result"] == ["FINISHED"], result["last_error"]
    thickness = 0.002  # the cloth's default contact offset [m]
    gaps = [low - top for low, top in zip(result["lowest"], result["surface"])]
    # the cloth (0.15 m above the platform) lands on it and is never pushed into it while it rises 0.3 m
    assert min(gaps) > thickness - 2e-3, gaps
    # ... and rides up with it: at the end it rests on the lifted surface, far above the rest height 0
    assert result["lowest"][-1] > 0.25 and gaps[-1] < thickness + 0.02, gaps


def test_cloth_pinned_to_a_moving_parent_follows_it(run_scenario, solver_server_address):
    frames = 10
    result = run_roles(run_scenario, "cloth_pinned_to_moving_parent", frames=frames, address=solver_server_address)
    assert result["bake_result"]["result"] == ["FINISHED"], result["last_error"]
    # pinned corners ride along with the parent (0.5 m along x) at every frame, in world space
    assert max(result["pin_drift"]) < 1e-4, result["pin_drift"]
    assert result["far_edge_fall"][-1] > 0.05  # the free edge falls


@pytest.mark.parametrize("model, parented", [("der", True), ("particles", False)])
def test_curves_hair_bound_to_a_moving_head_plays_back(run_scenario, solver_server_address, model, parented,
                                                       tmp_path):
    """Parented to the head (as Blender's hair tools set it up), the hair object moves too: its results are
    brought to local space with its transform of each frame, so the roots still sit on the head."""
    frames = 8
    saved = tmp_path / "hair.blend"
    wind = 30.0  # a scene Wind field along +y [m/s²] (every hair model takes it)
    result = run_roles(run_scenario, "curves_hair_on_moving_head", frames=frames, points=6, model=model,
                       parented=parented, wind=wind, address=solver_server_address,
                       save=str(saved) if parented else "")
    assert result["hair_animated"] or not parented  # a moving parent makes the hair object move
    if wind:  # the field's Z axis, its strength as acceleration, noise 0.5 -> gust amplitude 0.5 x 30
        np.testing.assert_allclose(result["wind_params"]["wind_direction"], [0.0, 1.0, 0.0], atol=1e-6)
        assert result["wind_params"]["wind_strength"] == pytest.approx(30.0)
        assert result["wind_params"]["wind_amplitude"] == pytest.approx(15.0)
        assert result["tip_shift_y"] > 0.02  # blown along +y (about -0.015 m without the field)
    else:
        assert result["wind_params"]["wind_strength"] == 0.0
    assert result["preset"]["result"] == ["FINISHED"]
    # roots bound through the surface UV map land exactly on the chosen triangle centroids
    assert result["roots_surface"] == "Head" and result["root_binding_error"] < 1e-6
    assert result["head_kind"] == "collider" and result["head_animated"] is True
    assert result["bake_result"]["result"] == ["FINISHED"], result["last_error"]
    assert result["frame_after_bake"] == frames // 2
    assert result["surface_deform_during_bake"] == [False, False]
    assert result["fcurves"] == 12 * 6 * 3 and result["interpolations"] == ["LINEAR"]
    assert result["first_frame_error"] < 1e-6
    # the roots ride on the head (translated 0.2 m along x) exactly; the soft strands sag under gravity
    assert result["root_follow_error"] < 1e-5
    assert result["tip_drop"] > 0.01
    assert result["subframe_error"] < 1e-6  # LINEAR keys: halfway between frames is the midpoint
    assert result["baked_topology"]
    assert result["removed_frames"] == frames - 4 and result["keys_left"] == [4]
    assert result["kept_frames_error"] == 0.0 and result["held_after_removal"] == 0.0
    # Free Bake removes the animation and restores the groom exactly
    assert result["free_result"]["result"] == ["FINISHED"]
    assert result["after_free_animation"] is False and result["after_free_attributes"] == []
    assert result["after_free_rest_error"] < 1e-6
    assert result["surface_deform_after_free"] == [True, True]
    if not parented:
        return
    # the saved file plays back without the add-on or a server
    played = run_roles(run_scenario, "play_saved_hair", path=str(saved), frames=frames)
    for frame in ("1", str(frames)):
        np.testing.assert_allclose(played[frame], result["saved_positions"][frame], atol=1e-6)


def test_curves_hair_keys_play_back_the_solver_frames(run_scenario, solver_server_address):
    """Curves keys are written in batches (one keyframe_points.add + foreach_set per F-curve): every frame
    the solver sent plays back within 1e-6 m, also after a cancel (the queued frames are keyed then)."""
    frames, strands, points = 20, 10, 5
    result = run_roles(run_scenario, "curves_keys_match_solver_frames", frames=frames, strands=strands,
                       points=points, long_frames=400, cancel_after=12, address=solver_server_address)
    assert result["bake_result"]["result"] == ["FINISHED"], result["last_error"]
    full = result["full"]
    assert result["sent_frames"] == list(range(1, frames + 1))
    assert full["fcurves"] == 3 * strands * points and full["keys"] == [frames]
    assert full["interpolations"] == ["LINEAR"]
    assert full["max_error"] < 1e-6 and full["moved"] > 0.01  # the hair moved, and every frame plays back
    cancelled = result["cancelled"]
    assert cancelled["state"] == "cancelled" and 12 <= cancelled["frames_baked"] < 400
    assert cancelled["sent_frames"] == list(range(1, cancelled["frames_baked"] + 1))
    assert cancelled["keys"] == [cancelled["frames_baked"]] and cancelled["max_error"] < 1e-6


def test_curves_hair_cache_is_a_packed_geometry_nodes_bake(run_scenario, solver_server_address, tmp_path):
    """The default Hair Cache: a Geometry Nodes bake packed in the .blend. Every frame the solver sent plays
    back within 1e-6 m; re-bake from a frame and cancel + Resume keep the earlier frames bit for bit; the
    file plays without the add-on and exports to Alembic; Free Bake restores groom and modifiers."""
    frames, strands, points = 12, 8, 5
    saved, alembic = tmp_path / "cache.blend", tmp_path / "cache.abc"
    result = run_roles(run_scenario, "curves_hair_cache", frames=frames, strands=strands, points=points,
                       long_frames=400, cancel_after=6, address=solver_server_address, save=str(saved),
                       alembic=str(alembic))
    assert result["default_cache"] == "GEOMETRY_NODES"
    assert result["animated_before"] is False and result["animated_after"] is False  # modifiers do not move it
    assert result["bake_result"]["result"] == ["FINISHED"], result["last_error"]
    assert result["sent_frames"] == list(range(1, frames + 1)) and result["moved"] > 0.01
    full = result["full"]
    assert full["max_error"] < 1e-6 and full["baked_range"] == [1, frames] and full["staging_left"] == []
    assert full["modifiers"] == ["Tangle Hair Cache", "Surface Deform", "Later"]  # the cache comes first
    assert full["surface_deform"] == [False, False] and full["has_action"] is False
    assert result["groom_untouched"] == 0.0  # the cache modifier moves the points; the groom stays as it was
    assert result["subframe_error"] < 1e-6   # between frames: the midpoint, as with LINEAR keys

    assert result["rebake"]["result"] == ["FINISHED"] and result["rebake_sent"] == list(range(6, frames + 1))
    assert result["rebake_kept_error"] == 0.0
    assert result["rebake_state"]["max_error"] < 1e-6 and result["rebake_state"]["baked_range"] == [1, frames]
    assert "(7 replaced)" in result["rebake_state"]["status"]

    cancelled = result["cancelled"]
    assert cancelled["state"] == "cancelled" and 6 <= cancelled["frames_baked"] < 400
    assert cancelled["baked_range"] == [1, cancelled["frames_baked"]] and cancelled["max_error"] < 1e-6
    assert result["resume"]["result"] == ["FINISHED"], result["resume"]
    resumed = result["resumed"]
    last = cancelled["frames_baked"] + 4
    assert resumed["baked_range"] == [1, last] and resumed["max_error"] < 1e-6 and resumed["staging_left"] == []
    assert result["record"] == {"route": "SHAPE_KEYS+GEOMETRY_NODES", "last": last}

    assert result["alembic"]["result"] == ["FINISHED"] and alembic.stat().st_size > 0
    played = run_roles(run_scenario, "play_saved_hair", path=str(saved), frames=last)
    for frame in ("1", str(last)):
        np.testing.assert_allclose(played[frame], result["saved_positions"][frame], atol=1e-6)

    assert result["free"]["result"] == ["FINISHED"]
    after = result["after_free"]
    assert after["modifiers"] == ["Surface Deform", "Later"] and after["surface_deform"] == [True, True]
    assert after["attributes"] == [] and after["rest_error"] == 0.0 and after["later_kept"]


@pytest.mark.parametrize("spline", ["POLY", "NURBS", "BEZIER"])
def test_legacy_curve_hair_bakes_to_shape_keys(run_scenario, solver_server_address, spline):
    frames = 6
    result = run_roles(run_scenario, "legacy_curve_hair", frames=frames, spline=spline, address=solver_server_address)
    assert result["bake_result"]["result"] == ["FINISHED"], result["last_error"]
    assert result["shape_keys"] == ["Basis"] + [f"tangle_f{frame:04d}" for frame in range(1, frames + 1)]
    assert result["basis_is_rest"] < 1e-6
    assert result["first_frame_error"] < 1e-6
    assert result["root_drift"] < 1e-5  # the first two points of every strand are clamped
    # a horizontal 0.25 m strand droops under gravity within 6 frames (0.21 s: free fall 0.21 m at most)
    assert 0.02 < result["tip_drop"] < 0.5 * 9.81 * (5 / 24) ** 2 + 1e-3
    if spline == "BEZIER":
        assert result["handles_moved"] > 0.01
        assert result["handle_midpoint_error"] < 1e-5 and result["handle_span_error"] < 1e-5
    assert result["free_result"]["result"] == ["FINISHED"] and result["after_free"] == []


CHECK_CASES = {
    "empty_mesh": ("EmptyMesh", "empty"),
    "no_faces": ("EdgesOnly", "no faces"),
    "zero_area": ("Sliver", "zero-area"),
    "open_softbody": ("OpenJelly", "open"),
    "non_manifold_softbody": ("Fin", "non-manifold"),
    "negative_scale": ("Mirrored", "negative scale"),
    "missing_pin_group": ("Pinned", "'pins' does not exist"),
    "strain_limits": ("Strained", "must satisfy min ≤ 1 ≤ max"),
    "zero_length_segment": ("Doubled", "zero-length hair segment"),
    "missing_emitter": ("Bald", "missing emitter surface"),
}


def test_checks_catch_each_broken_input_and_the_bake_sends_nothing(run_scenario):
    report = run_roles(run_scenario, "checks")
    for case, (name, fragment) in CHECK_CASES.items():
        outcome = report[case]
        assert any(obj == name and fragment in message for obj, message in outcome["problems"]), (case, outcome)
        assert outcome["panel"] == outcome["problems"]  # listed in the Tangle Bake panel
        # refused before contacting anything: the message is the problem, not a connection timeout
        assert outcome["bake"]["result"] == ["RAISED"] and name in outcome["bake"]["error"], (case, outcome)
        assert outcome["last_error"].startswith(f"{name}: ") and "timeout" not in outcome["last_error"]
    assert report["good"] == {"problems": [], "panel": 0, "operator": {"result": ["FINISHED"], "error": None}}


def test_hair_rooted_inside_a_collider_is_a_warning_that_does_not_block_the_bake(run_scenario):
    report = run_roles(run_scenario, "rooted_inside")
    for case in ("sphere", "flipped_mesh", "thin_cloth"):
        outcome = report[case]
        assert len(outcome["problems"]) == (3 if case == "thin_cloth" else 2), (case, outcome)
        by_object = {name: (message, blocking) for name, message, blocking in outcome["problems"]}
        message, blocking = by_object["Hair"]
        assert not blocking and message.startswith("3 of 4 strands are rooted inside collider 'Ball'"), (case, message)
        message, blocking = by_object["Combed"]
        assert not blocking and message.startswith("1 of 1 strands start partly inside collider 'Ball' (2 points"), \
            (case, message)
        assert outcome["panel"] == outcome["problems"]
        assert outcome["operator"] == {"result": ["FINISHED"], "error": None}
        if case == "thin_cloth":   # zero thickness near a collider is a warning too
            assert outcome["problems"][0][0] == "Sheet" and not outcome["problems"][0][2]
            assert outcome["problems"][0][1].startswith("thickness 0: the cloth rests exactly on collider surfaces")
        # the warnings do not stop the bake: it gets as far as the (dead) server
        assert outcome["bake"]["result"] == ["RAISED"] and "timeout" in outcome["last_error"], (case, outcome)
    blocked = report["blocked"]
    listed = {(name, is_blocking) for name, _, is_blocking in blocked["problems"]}
    assert ("Sheet", True) in listed and ("Hair", False) in listed, blocked   # fix-first and warnings together
    assert blocked["panel"] == blocked["problems"]
    assert blocked["bake"]["result"] == ["RAISED"] and "no such group" in blocked["last_error"], blocked
    assert blocked["local_server"] is False, "a blocked Bake must not start the local solver"


def test_presets_set_their_values(run_scenario):
    report = run_roles(run_scenario, "presets")
    assert report["poll_without_role"] is False and report["no_role"]["result"] == ["RAISED"]
    assert report["mismatches"] == []
    assert report["unknown"]["result"] == ["RAISED"] and "Tweed" in report["unknown"]["error"]


def test_role_panels_draw_only_existing_properties_operators_and_menus(run_scenario):
    report = run_roles(run_scenario, "panels")
    for case, drawn in report.items():
        assert drawn["missing"] == [], case
        assert "tangle.check_scene" in drawn["operators"], case
        assert any(label.startswith("Fix before baking (1)") for label in drawn["labels"]), case
    for case in ("softbody", "hair_der", "hair_cosserat", "hair_particles", "legacy_curve"):
        assert report[case]["menus"] == ["TANGLE_MT_presets"], case
    assert {"young_modulus", "poisson_ratio", "tet_resolution", "pin_group"} <= set(report["softbody"]["props"])
    assert "bind_to_surface" in report["hair_der"]["props"] and "bind_to_surface" not in report["legacy_curve"]["props"]
    assert "Emitter: Head" in report["hair_der"]["labels"]
    assert not any(name.startswith(("particle_", "cosserat_")) for name in report["hair_der"]["props"])
    assert {"particle_stiffness", "guide_count", "wind_strength", "use_scene_wind"} <= set(report["hair_particles"]["props"])
    assert {"wind_strength", "use_scene_wind"} <= set(report["hair_der"]["props"])   # DER hair takes wind too
    assert {"wind_strength", "wind_period", "use_scene_wind", "self_collision"} <= set(report["cloth"]["props"])
    assert "use_scene_wind" not in report["softbody"]["props"]
    assert "guide_count" in report["hair_der"]["props"] and "gravity_scale" not in report["hair_der"]["props"]
    assert {"cosserat_max_step", "interaction_outer_radius", "guide_count"} <= set(report["hair_cosserat"]["props"])
    assert not any(name.startswith("particle_") for name in report["hair_cosserat"]["props"])
    # painted maps: a vertex group per paintable parameter on meshes, an attribute per parameter the model uses
    assert {"bend_stiffness_map", "density_map", "friction_map", "vertex_groups"} <= set(report["cloth"]["props"])
    assert {"young_modulus_map", "density_map"} <= set(report["softbody"]["props"])
    assert {"young_modulus_map", "shear_modulus_map", "attributes"} <= set(report["hair_der"]["props"])
    assert {"particle_stiffness_map"} <= set(report["hair_particles"]["props"])
    assert "young_modulus_map" not in report["hair_particles"]["props"]
    assert "young_modulus_map" not in report["legacy_curve"]["props"]         # a Curve has no attributes


def test_painted_maps_change_the_drape_and_export_as_factors(run_scenario, solver_server_address):
    """A bending rigidity painted by a vertex group (weight 1 on one half, 0.1 × elsewhere)
    makes the unpainted half of a clamped flap sag several times further; Curves attributes on the point and
    curve domains export as per-point factors; Check Scene blocks a missing group and warns about a map the
    hair model does not use (which is then not sent)."""
    frames, n = 36, 9
    result = run_roles(run_scenario, "painted_maps", frames=frames, address=solver_server_address)
    assert result["bake_result"]["result"] == ["FINISHED"], result["last_error"]
    factors = np.asarray(result["flap_maps"]["bend_stiffness"]).reshape(n, n)     # (row y, column x)
    np.testing.assert_allclose(factors[: n // 2], 1.0)
    np.testing.assert_allclose(factors[n // 2:], 0.1, rtol=1e-6)
    assert set(result["flap_maps"]) == {"bend_stiffness"}
    assert result["soft_sag"] > 2.5 * result["stiff_sag"] > 0.0, (result["soft_sag"], result["stiff_sag"])
    strands = result["strands"]
    young = np.asarray(result["hair_maps"]["young_modulus"]).reshape(strands, 5)
    np.testing.assert_allclose(young, np.tile(0.2 + 0.8 * np.linspace(1.0, 0.0, 5), (strands, 1)), rtol=1e-6)
    density = np.asarray(result["hair_maps"]["density"]).reshape(strands, 5)
    np.testing.assert_allclose(density, np.repeat(0.5 + 0.5 * (np.arange(strands) % 2), 5).reshape(strands, 5))
    problems = [tuple(problem) for problem in result["problems"]]
    assert ("Flap", "the bend stiffness map's vertex group 'no such group' does not exist", True) in problems
    assert ("Hair", "the young modulus map 'root_stiff' is not used by the particles hair model and is not sent",
            False) in problems
    assert result["particles_maps"] == ["particle_stiffness"]


@pytest.mark.parametrize("deform", ["armature", "surface_deform"])
def test_a_cape_pinned_by_an_armature_follows_the_skin_and_plays_back_once(run_scenario, solver_server_address,
                                                                           deform):
    """A cape deformed by an Armature modifier on a bending, twisting rig, or by a Surface Deform modifier
    bound to the skinned torso, its top row pinned: the pins follow the skin the modifier makes (they stayed
    where the undeformed mesh was, up to 380 mm off, and the bake failed with a runaway); playback shows the
    bake, not the bake deformed again by the modifier; Free Bake brings the modifier back."""
    frames = 16
    result = run_roles(run_scenario, "cape_on_skinned_torso", frames=frames, deform=deform,
                       address=solver_server_address)
    assert result["skin_moves"] > 0.1           # the skin carries the pinned row a long way
    assert result["bake_result"]["result"] == ["FINISHED"], result["last_error"]
    assert result["muted_after_bake"]
    assert max(result["pin_error"]) < 5e-4, result["pin_error"]        # pins within 0.5 mm
    assert max(result["inside"]) == 0, result["inside"]
    # beyond what the skin itself does to the pinned row (the Surface Deform stretches it by the chest's twist)
    assert max(result["stretch"]) < max(result["skin_stretch"], 0.0) + 0.05, (result["stretch"], result["skin_stretch"])
    assert result["freed"]["result"] == ["FINISHED"] and result["restored_after_free"]
    assert result["checked"] == []          # followed: nothing to warn about
    [(name, message, blocking)] = result["checked_with_shape_key"]
    assert name == "Cape" and not blocking and message.startswith("animated shape keys deform it"), message


@pytest.mark.parametrize("model", ["der", "particles"])
def test_hair_baked_from_a_posed_frame_sits_on_the_bent_scalp(run_scenario, solver_server_address, model):
    """The groom is made on the head's rest shape; a bake that starts where the rig has bent the head carries
    each strand with its root's triangle onto the bent scalp (it kept the rest-pose groom, roots 98 mm off)."""
    result = run_roles(run_scenario, "hair_on_bent_head_from_a_posed_frame", model=model,
                       address=solver_server_address)
    assert result["bake_result"]["result"] == ["FINISHED"], result["last_error"]
    assert max(result["root_gap"]) < 5e-4, result["root_gap"]          # roots within 0.5 mm

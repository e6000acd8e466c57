"""Painted maps, add-on side (core/painted_maps.py, scene_export maps): weights to factors, the checks Check
Scene runs, and the exported ``maps`` that the server's own validation accepts or refuses."""

import numpy as np
import pytest

from blender_addon.core import scene_export
from blender_addon.core.painted_maps import MapSetting, check_maps, factors, map_settings, paintable
from blender_addon.core.param_table import CLOTH_PARAMS, HAIR_PARAMS, defaults
from solver_server.sim.builder import parse_scene
from solver_server.sim.errors import SceneError


def test_weight_one_is_the_full_value_and_weight_zero_the_fraction():
    np.testing.assert_allclose(factors(np.array([0.0, 0.5, 1.0, 2.0, -1.0]), 0.2), [0.2, 0.6, 1.0, 1.0, 0.2],
                               rtol=1e-6)


def test_hair_models_paint_only_what_they_use():
    assert {spec.name for spec in paintable(HAIR_PARAMS, "der")} == {"density", "young_modulus", "shear_modulus"}
    assert {spec.name for spec in paintable(HAIR_PARAMS, "particles")} == {
        "particle_stiffness", "particle_bend_stiffness", "particle_angle_stiffness"}
    assert {spec.name for spec in paintable(CLOTH_PARAMS)} == {"friction", "density", "stretch_stiffness",
                                                               "shear_stiffness", "bend_stiffness"}


def test_check_maps_blocks_missing_groups_and_a_zero_factor_on_a_positive_parameter():
    params = defaults(CLOTH_PARAMS)
    settings = [MapSetting("bend_stiffness", "stiff", 0.1), MapSetting("density", "heavy", 0.0),
                MapSetting("friction", "", 0.0), MapSetting("shear_stiffness", "grip", 0.0)]
    problems = check_maps("Shirt", settings, CLOTH_PARAMS, params, ["stiff", "grip"])
    assert [(problem.object, problem.blocking) for problem in problems] == [("Shirt", True), ("Shirt", True)]
    assert "the density map's vertex group 'heavy' does not exist" in problems[0].message
    assert "below its minimum" in problems[1].message            # density 0 at weight 0: a massless vertex
    assert check_maps("Shirt", settings[:1], CLOTH_PARAMS, params, ["stiff"]) == []


def test_check_maps_warns_about_a_map_the_hair_model_ignores():
    problems = check_maps("Hair", [MapSetting("young_modulus", "root", 0.5)], HAIR_PARAMS, defaults(HAIR_PARAMS),
                          ["root"], "particles", what="attribute")
    assert len(problems) == 1 and not problems[0].blocking
    assert "not used by the particles hair model" in problems[0].message


def test_map_settings_read_every_paintable_parameter_of_a_property_group():
    class Settings:
        def __getattr__(self, name):
            return "group" if name.endswith("_map") else 0.25

    settings = map_settings(Settings(), CLOTH_PARAMS)
    assert {setting.parameter for setting in settings} == {spec.name for spec in paintable(CLOTH_PARAMS)}
    assert all(setting.source == "group" and setting.at_zero == 0.25 for setting in settings)


def _cloth(maps):
    vertices = np.array([[0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]], float)
    return scene_export.simulated_mesh_object("cloth", "Sheet", vertices, np.array([[0, 1, 2], [0, 2, 3]]),
                                              np.zeros(0, int), np.zeros(0), defaults(CLOTH_PARAMS), maps=maps)


def test_exported_maps_pass_the_server_validation():
    entry = _cloth({"bend_stiffness": factors(np.array([1.0, 0.0, 0.5, 1.0]), 0.1)})
    scene = {"time": {"frame_end": 2}, "objects": [entry]}
    spec = parse_scene(scene).objects[0]
    np.testing.assert_allclose(spec.maps["bend_stiffness"], [1.0, 0.1, 0.55, 1.0], rtol=1e-6)
    assert "maps" not in _cloth({})


def test_a_map_of_the_wrong_length_is_refused_before_sending():
    with pytest.raises(scene_export.ExportError, match="3 values for 4 points"):
        _cloth({"density": np.ones(3)})
    with pytest.raises(scene_export.ExportError, match="NaN"):
        _cloth({"density": np.array([1.0, np.nan, 1.0, 1.0])})


def test_the_server_refuses_a_map_check_scene_would_block():
    entry = _cloth({"density": factors(np.zeros(4), 0.0)})
    with pytest.raises(SceneError, match="maps.density must be finite and > 0"):
        parse_scene({"time": {"frame_end": 2}, "objects": [entry]})

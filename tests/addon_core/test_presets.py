"""core.presets: every preset names only real parameters, inside the server's valid ranges, and the
presets of a role are ordered the way the material names say (silk lighter and softer than denim ...)."""

import pytest

from blender_addon.core.param_table import CLOTH_PARAMS, HAIR_PARAMS, SOFTBODY_PARAMS
from blender_addon.core.presets import PRESETS, SETTINGS_GROUP, preset_values
from solver_server.sim.params import resolve_params

KINDS = {"CLOTH": ("cloth", CLOTH_PARAMS), "SOFTBODY": ("softbody", SOFTBODY_PARAMS), "HAIR": ("hair", HAIR_PARAMS)}


def test_the_issue_lists_these_presets():
    assert sorted(PRESETS["CLOTH"]) == ["Cotton", "Denim", "Leather", "Rubber", "Silk"]
    assert sorted(PRESETS["SOFTBODY"]) == ["Flesh", "Jelly", "Rubber"]
    assert sorted(PRESETS["HAIR"]) == ["Curly", "Straight Coarse", "Straight Fine", "Wavy"]
    assert set(SETTINGS_GROUP) == set(PRESETS)


@pytest.mark.parametrize("role", sorted(PRESETS))
def test_presets_pass_the_server_validation_and_the_addon_ranges(role):
    kind, table = KINDS[role]
    specs = {spec.name: spec for spec in table}
    for name, values in PRESETS[role].items():
        assert set(values) <= set(specs), (name, set(values) - set(specs))
        resolve_params(kind, dict(values), object_id=name)  # raises on a bad key or value
        for key, value in values.items():
            assert specs[key].minimum <= value <= specs[key].maximum, (name, key)


def test_materials_are_ordered_physically():
    cloth = PRESETS["CLOTH"]
    for key in ("density", "stretch_stiffness", "bend_stiffness"):
        assert cloth["Silk"][key] < cloth["Cotton"][key] < cloth["Denim"][key] < cloth["Leather"][key], key
    soft = PRESETS["SOFTBODY"]
    assert soft["Jelly"]["young_modulus"] < soft["Flesh"]["young_modulus"] < soft["Rubber"]["young_modulus"]
    hair = PRESETS["HAIR"]
    assert hair["Straight Fine"]["radius"] < hair["Straight Coarse"]["radius"]
    assert hair["Straight Fine"]["friction"] < hair["Wavy"]["friction"] < hair["Curly"]["friction"]


def test_preset_values_are_copies_and_unknown_names_are_clear():
    values = preset_values("CLOTH", "Silk")
    values["density"] = 99.0
    assert PRESETS["CLOTH"]["Silk"]["density"] == 0.06
    with pytest.raises(KeyError, match="valid"):
        preset_values("CLOTH", "Tweed")
    with pytest.raises(KeyError, match="no presets"):
        preset_values("COLLIDER", "Ice")

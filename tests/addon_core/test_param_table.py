"""The add-on's parameter tables mirror the server's (solver_server/sim/params.py): same names, same defaults."""

import pytest

from blender_addon.core.param_table import (
    CLOTH_PARAMS, COLLIDER_PARAMS, HAIR_MODEL_ITEMS, HAIR_PARAMS, SOFTBODY_PARAMS, defaults,
)
from solver_server.sim import params as server_params

TABLES = [("cloth", CLOTH_PARAMS), ("softbody", SOFTBODY_PARAMS), ("hair", HAIR_PARAMS), ("collider", COLLIDER_PARAMS)]


@pytest.mark.parametrize("kind, table", TABLES)
def test_names_and_defaults_match_the_server(kind, table):
    server = server_params.defaults(kind)
    addon = {spec.name: spec.default for spec in table}
    assert addon == server


@pytest.mark.parametrize("kind, table", TABLES)
def test_addon_defaults_pass_the_server_validation(kind, table):
    resolved = server_params.resolve_params(kind, defaults(table), object_id="Sheet")
    assert set(resolved) == {spec.name for spec in table}


@pytest.mark.parametrize("kind, table", TABLES)
def test_addon_ranges_lie_inside_the_server_ranges(kind, table):
    server = {spec.name: spec for spec in server_params.PARAM_TABLES[kind]}
    for spec in table:
        if isinstance(spec.default, (bool, str)):
            continue
        bound = server[spec.name]
        assert spec.minimum >= bound.low and (spec.minimum > bound.low or not bound.low_open), spec.name
        assert spec.maximum is not None and spec.maximum <= bound.high, spec.name


def test_hair_models_match_the_server_choices():
    server = {spec.name: spec for spec in server_params.HAIR}["model"]
    assert tuple(item[0] for item in HAIR_MODEL_ITEMS) == server.choices


def test_every_tooltip_names_its_unit():
    for _, table in TABLES:
        for spec in table:
            if spec.unit:
                assert spec.tooltip.endswith(f"[{spec.unit}]"), spec.name


@pytest.mark.parametrize("kind, table", TABLES)
def test_paintable_parameters_match_the_server(kind, table):
    server = {spec.name for spec in server_params.PARAM_TABLES[kind] if spec.paintable}
    assert {spec.name for spec in table if spec.paintable} == server


def test_hair_model_maps_match_the_server():
    from blender_addon.core.param_table import HAIR_MODEL_PAINTABLE

    assert HAIR_MODEL_PAINTABLE == server_params.HAIR_MODEL_PAINTABLE

"""The add-on's parameter tables mirror the server's (solver_server/sim/params.py): same names, same defaults."""

import pytest

from blender_addon.core.param_table import CLOTH_PARAMS, COLLIDER_PARAMS, defaults
from solver_server.sim import params as server_params


@pytest.mark.parametrize("kind, table", [("cloth", CLOTH_PARAMS), ("collider", COLLIDER_PARAMS)])
def test_names_and_defaults_match_the_server(kind, table):
    server = server_params.defaults(kind)
    addon = {spec.name: spec.default for spec in table}
    assert addon == server


@pytest.mark.parametrize("kind, table", [("cloth", CLOTH_PARAMS), ("collider", COLLIDER_PARAMS)])
def test_addon_defaults_pass_the_server_validation(kind, table):
    resolved = server_params.resolve_params(kind, defaults(table), object_id="Sheet")
    assert set(resolved) == {spec.name for spec in table}


@pytest.mark.parametrize("kind, table", [("cloth", CLOTH_PARAMS), ("collider", COLLIDER_PARAMS)])
def test_addon_ranges_lie_inside_the_server_ranges(kind, table):
    server = {spec.name: spec for spec in server_params.PARAM_TABLES[kind]}
    for spec in table:
        if isinstance(spec.default, bool):
            continue
        bound = server[spec.name]
        assert spec.minimum >= bound.low and (spec.minimum > bound.low or not bound.low_open), spec.name
        assert spec.maximum is not None and spec.maximum <= bound.high, spec.name

"""Helpers for the real-Blender tests: every test in this folder is marked ``blender`` and skipped when the
bpy module is not installed; ``run_scenario`` runs a scenario of a scenario script in a fresh bpy subprocess."""

import importlib.util
import sys

import pytest

from bpy_subprocess import HERE, REPOSITORY_ROOT, run_scenario_script

BPY_MISSING = importlib.util.find_spec("bpy") is None


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.blender)
            if BPY_MISSING:
                item.add_marker(pytest.mark.skip(reason="the bpy module (bpy==4.5.*) is not installed"))


@pytest.fixture
def run_scenario(tmp_path):
    """run_scenario(name, **args) -> the scenario's result dict; HOME points at a fresh temp folder so
    extensions install into a throwaway Blender user configuration. ``script`` picks the scenario file
    in this folder (default scenarios.py)."""

    def run(name: str, script: str = "scenarios.py", **args) -> dict:
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        return run_scenario_script(script, name, home, **args)

    return run


@pytest.fixture(scope="session")
def extension_zip(tmp_path_factory):
    """The extension zip for this platform, built by build_addon.py (wheels cached in wheels/)."""
    sys.path.insert(0, str(REPOSITORY_ROOT))
    import build_addon

    platform_name = build_addon.current_platform()
    cache = REPOSITORY_ROOT / "wheels"
    out_dir = tmp_path_factory.mktemp("dist")
    try:
        build_addon.cached_wheels(cache, platform_name)
        download = False
    except build_addon.BuildError:
        download = True
    try:
        return build_addon.build_zip(platform_name, out_dir, cache, download=download)
    except build_addon.BuildError as error:
        pytest.skip(f"cannot build the extension zip (wheels unavailable offline?): {error}")

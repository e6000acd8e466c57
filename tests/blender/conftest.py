"""Helpers for the real-Blender tests: run a scenario of scenarios.py in a fresh bpy subprocess."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPOSITORY_ROOT = HERE.parents[1]


@pytest.fixture
def run_scenario(tmp_path):
    """run_scenario(name, **args) -> the scenario's result dict; HOME points at a fresh temp folder so
    extensions install into a throwaway Blender user configuration. ``script`` picks the scenario file
    in this folder (default scenarios.py)."""

    def run(name: str, timeout: float = 120.0, script: str = "scenarios.py", **args) -> dict:
        home = tmp_path / "home"
        home.mkdir(exist_ok=True)
        environment = dict(os.environ, HOME=str(home), PYTHONPATH=str(REPOSITORY_ROOT))
        completed = subprocess.run([sys.executable, str(HERE / script), name, json.dumps(args)],
                                   cwd=REPOSITORY_ROOT, env=environment, capture_output=True, text=True,
                                   timeout=timeout)
        lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
        if completed.returncode != 0 or not lines:
            raise AssertionError(f"scenario {name} failed (exit {completed.returncode}):\n"
                                 f"{completed.stdout[-4000:]}\n{completed.stderr[-4000:]}")
        return json.loads(lines[-1][len("RESULT "):])

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

"""build_addon.py with a fake offline wheel cache: zip layout, rewritten manifest, validation."""

import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPOSITORY_ROOT))
import build_addon  # noqa: E402

LINUX_WHEELS = {
    "cp311": ["pyzmq-27.3.0-cp311-cp311-manylinux_2_28_x86_64.whl",
              "msgpack-1.2.4-cp311-cp311-manylinux_2_17_x86_64.whl",
              "msgpack-1.0.8-cp311-cp311-manylinux_2_17_x86_64.whl"],
    "cp313": ["pyzmq-27.3.0-cp312-abi3-manylinux_2_28_x86_64.whl",
              "msgpack-1.2.4-cp313-cp313-manylinux_2_17_x86_64.whl"],
}


def fake_cache(root: Path, wheels=LINUX_WHEELS) -> Path:
    for python_tag, names in wheels.items():
        folder = root / "linux-x64" / python_tag
        folder.mkdir(parents=True)
        for name in names:
            with zipfile.ZipFile(folder / name, "w") as wheel:
                wheel.writestr("placeholder.txt", "test wheel")
    return root


def test_zip_holds_addon_protocol_and_the_newest_wheels(tmp_path):
    cache = fake_cache(tmp_path / "cache")
    archive_path = build_addon.build_zip("linux-x64", tmp_path / "dist", cache, download=False)
    assert archive_path.name == "tangle-0.1.0-linux-x64.zip"
    with zipfile.ZipFile(archive_path) as archive:
        names = set(archive.namelist())
        manifest = tomllib.loads(archive.read("blender_manifest.toml").decode())
    assert {"__init__.py", "registration.py", "core/worker.py", "protocol/client.py", "protocol/wire.py"} <= names
    assert not any("__pycache__" in name for name in names)
    assert manifest["platforms"] == ["linux-x64"]
    assert manifest["permissions"]["network"]
    assert sorted(manifest["wheels"]) == sorted(f"./wheels/{name}" for name in [
        "pyzmq-27.3.0-cp311-cp311-manylinux_2_28_x86_64.whl", "pyzmq-27.3.0-cp312-abi3-manylinux_2_28_x86_64.whl",
        "msgpack-1.2.4-cp311-cp311-manylinux_2_17_x86_64.whl", "msgpack-1.2.4-cp313-cp313-manylinux_2_17_x86_64.whl"])
    assert all(wheel.removeprefix("./") in names for wheel in manifest["wheels"])


def test_missing_wheel_is_a_clear_offline_error(tmp_path):
    wheels = {"cp311": LINUX_WHEELS["cp311"], "cp313": LINUX_WHEELS["cp313"][:1]}
    cache = fake_cache(tmp_path / "cache", wheels)
    with pytest.raises(build_addon.BuildError, match=r"no msgpack wheel for linux-x64 / CPython 3\.13"):
        build_addon.build_zip("linux-x64", tmp_path / "dist", cache, download=False)


def test_validation_rejects_a_zip_whose_manifest_lists_absent_wheels(tmp_path):
    archive_path = build_addon.build_zip("linux-x64", tmp_path / "dist", fake_cache(tmp_path / "cache"),
                                         download=False)
    broken = tmp_path / "broken.zip"
    with zipfile.ZipFile(archive_path) as source, zipfile.ZipFile(broken, "w") as target:
        for item in source.infolist():
            if not item.filename.startswith("wheels/msgpack"):
                target.writestr(item, source.read(item))
    with pytest.raises(build_addon.BuildError, match="lists ./wheels/msgpack-1.2.4-cp311"):
        build_addon.validate_zip(broken, "linux-x64")


@pytest.mark.parametrize("wheel, python_tag, serves", [
    ("pyzmq-27.3.0-cp311-cp311-win_amd64.whl", "cp311", True),
    ("pyzmq-27.3.0-cp311-cp311-win_amd64.whl", "cp313", False),
    ("pyzmq-27.3.0-cp312-abi3-win_amd64.whl", "cp313", True),
    ("pyzmq-27.3.0-cp312-abi3-win_amd64.whl", "cp311", False),
    ("msgpack-1.2.4-py3-none-any.whl", "cp313", True),
])
def test_wheel_python_compatibility(wheel, python_tag, serves):
    assert build_addon._wheel_serves(wheel, python_tag) is serves


def test_manifest_rewrite_needs_exactly_one_wheels_line():
    text = 'id = "tangle"\nwheels = []\n\n[permissions]\nnetwork = "x"\n'
    rewritten = tomllib.loads(build_addon.packaged_manifest(text, ["a.whl"], "windows-x64"))
    assert rewritten["wheels"] == ["./wheels/a.whl"] and rewritten["platforms"] == ["windows-x64"]
    with pytest.raises(build_addon.BuildError, match="exactly one"):
        build_addon.packaged_manifest('id = "tangle"\n', [], "windows-x64")

#!/usr/bin/env python3
"""Build the installable Tangle extension zips: dist/tangle-<version>-<platform>.zip.

Each zip holds the add-on (blender_addon/ at the zip root), the vendored ``protocol`` package
(``protocol/``, imported relatively by ``blender_addon/_protocol.py``) and pyzmq + msgpack wheels for
CPython 3.11 and 3.13 of that platform in ``wheels/``; the manifest inside the zip is rewritten to list
them (``wheels = [...]``) and to name the platform (``platforms = [...]``). The solver itself rides along
as source in ``solver/`` (solver_server + protocol, and ``solver/requirements.txt`` from pyproject.toml):
Preferences > Set Up Local Solver installs those requirements into a private environment and runs it
(blender_addon/core/solver_setup.py).

    python build_addon.py                         # linux-x64, windows-x64, macos-arm64
    python build_addon.py --platform current      # only this machine's platform
    python build_addon.py --no-download           # offline: use wheels already in the cache (wheels/)

Wheels are fetched with ``pip download --only-binary=:all: --platform ... --python-version ...``.
Every zip is checked after writing (manifest fields, files, wheel tags) and by Blender's own validator
(``blender --command extension validate``, or the same tool inside the ``bpy`` wheel).
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
ADDON_DIR = ROOT / "blender_addon"
PROTOCOL_DIR = ROOT / "protocol"
SOLVER_DIR = ROOT / "solver_server"
PYPROJECT = ROOT / "pyproject.toml"
MANIFEST = "blender_manifest.toml"

PYTHON_VERSIONS = ("3.11", "3.13")
VENDORED_REQUIREMENTS = ("pyzmq>=26,<28", "msgpack>=1.0.7,<2")

# Blender platform name -> pip --platform tags (newest first) and the wheel-filename platform pattern.
PLATFORMS: dict[str, tuple[tuple[str, ...], str]] = {
    "linux-x64": (("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"), r"manylinux.*x86_64"),
    "windows-x64": (("win_amd64",), r"win_amd64"),
    "macos-arm64": (("macosx_11_0_arm64",), r"macosx_\d+_\d+_(arm64|universal2)"),
}

EXCLUDED_PARTS = {"__pycache__"}
EXCLUDED_SUFFIXES = {".pyc", ".pyo"}


class BuildError(RuntimeError):
    pass


def current_platform() -> str:
    system, machine = platform.system(), platform.machine().lower()
    names = {("Linux", "x86_64"): "linux-x64", ("Windows", "amd64"): "windows-x64",
             ("Windows", "x86_64"): "windows-x64", ("Darwin", "arm64"): "macos-arm64"}
    try:
        return names[(system, machine)]
    except KeyError:
        raise BuildError(f"no extension build is defined for {system} {machine}; choose one of "
                         f"{sorted(PLATFORMS)}") from None


def read_manifest() -> tuple[str, dict]:
    text = (ADDON_DIR / MANIFEST).read_text(encoding="utf-8")
    return text, tomllib.loads(text)


def wheel_cache(cache_dir: Path, platform_name: str, python_version: str) -> Path:
    return cache_dir / platform_name / f"cp{python_version.replace('.', '')}"


def download_wheels(cache_dir: Path, platform_name: str, python_version: str) -> None:
    tags, _ = PLATFORMS[platform_name]
    destination = wheel_cache(cache_dir, platform_name, python_version)
    destination.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
               "--only-binary=:all:", "--no-deps", "--implementation", "cp",
               "--python-version", python_version, "--dest", str(destination)]
    for tag in tags:
        command += ["--platform", tag]
    command += list(VENDORED_REQUIREMENTS)
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"pip could not download wheels for {platform_name} / CPython {python_version}:\n"
                         f"{result.stderr.strip()}")


def _wheel_distribution(wheel: Path) -> str:
    return wheel.name.split("-")[0].lower()


def cached_wheels(cache_dir: Path, platform_name: str) -> list[Path]:
    """The newest cached wheel of each vendored package for each Python version (deduplicated)."""
    chosen: dict[str, Path] = {}
    for python_version in PYTHON_VERSIONS:
        folder = wheel_cache(cache_dir, platform_name, python_version)
        wheels = sorted(folder.glob("*.whl")) if folder.is_dir() else []
        for requirement in VENDORED_REQUIREMENTS:
            name = re.split(r"[<>=!~ ]", requirement, maxsplit=1)[0].lower()
            matches = [wheel for wheel in wheels if _wheel_distribution(wheel) == name]
            if not matches:
                raise BuildError(f"no {name} wheel for {platform_name} / CPython {python_version} in {folder}; "
                                 "run without --no-download once (needs network)")
            newest = max(matches, key=lambda wheel: [int(p) if p.isdigit() else 0
                                                     for p in wheel.name.split("-")[1].split(".")])
            chosen[newest.name] = newest
    return sorted(chosen.values(), key=lambda wheel: wheel.name)


def packaged_manifest(text: str, wheel_names: list[str], platform_name: str) -> str:
    """The manifest with ``wheels`` listing ``./wheels/<name>`` and ``platforms`` set."""
    wheels_toml = "wheels = [\n" + "".join(f'  "./wheels/{name}",\n' for name in wheel_names) + "]\n"
    platforms_toml = f'platforms = ["{platform_name}"]\n\n'
    text, count = re.subn(r"^wheels\s*=\s*\[[^\]]*\]\s*\n", wheels_toml + platforms_toml, text, flags=re.M)
    if count != 1:
        raise BuildError(f"{ADDON_DIR / MANIFEST} must contain exactly one `wheels = [...]` line")
    return text


def _source_files(folder: Path) -> list[Path]:
    return sorted(path for path in folder.rglob("*") if path.is_file()
                  and not EXCLUDED_PARTS.intersection(path.relative_to(folder).parts)
                  and path.suffix not in EXCLUDED_SUFFIXES)


def build_zip(platform_name: str, out_dir: Path, cache_dir: Path, download: bool) -> Path:
    manifest_text, manifest = read_manifest()
    if download:
        for python_version in PYTHON_VERSIONS:
            download_wheels(cache_dir, platform_name, python_version)
    wheels = cached_wheels(cache_dir, platform_name)
    out_dir.mkdir(parents=True, exist_ok=True)
    archive_path = out_dir / f"{manifest['id']}-{manifest['version']}-{platform_name}.zip"
    with zipfile.ZipFile(archive_path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in _source_files(ADDON_DIR):
            relative = path.relative_to(ADDON_DIR).as_posix()
            if relative == MANIFEST:
                archive.writestr(MANIFEST, packaged_manifest(manifest_text, [w.name for w in wheels], platform_name))
            else:
                archive.write(path, relative)
        for path in _source_files(PROTOCOL_DIR):
            archive.write(path, f"protocol/{path.relative_to(PROTOCOL_DIR).as_posix()}")
        for wheel in wheels:
            archive.write(wheel, f"wheels/{wheel.name}")
        for package in (SOLVER_DIR, PROTOCOL_DIR):        # the local solver's source (Set Up Local Solver)
            for path in _source_files(package):
                archive.write(path, f"solver/{package.name}/{path.relative_to(package).as_posix()}")
        archive.writestr("solver/requirements.txt", _solver_requirements())
    validate_zip(archive_path, platform_name)
    return archive_path


def _solver_requirements() -> str:
    """``solver/requirements.txt``: the solver's runtime requirements (the CUDA extra prefixed ``gpu:``)."""
    sys.path.insert(0, str(ROOT))
    try:
        from blender_addon.core.solver_setup import requirements_text  # noqa: PLC0415
    finally:
        sys.path.remove(str(ROOT))
    return requirements_text(PYPROJECT)


def validate_zip(archive_path: Path, platform_name: str) -> None:
    """Check a built zip; raises BuildError naming the zip and the problem."""
    with zipfile.ZipFile(archive_path) as archive:
        names = set(archive.namelist())
        problems = [f"missing {required}" for required in
                    (MANIFEST, "__init__.py", "_protocol.py", "protocol/__init__.py", "protocol/client.py",
                     "solver/requirements.txt", "solver/solver_server/__main__.py", "solver/protocol/wire.py")
                    if required not in names]
        if MANIFEST in names:
            manifest = tomllib.loads(archive.read(MANIFEST).decode("utf-8"))
            for key in ("schema_version", "id", "version", "name", "tagline", "maintainer", "type",
                        "blender_version_min", "license"):
                if key not in manifest:
                    problems.append(f"manifest lacks {key!r}")
            if "network" not in manifest.get("permissions", {}):
                problems.append("manifest lacks the network permission")
            if manifest.get("platforms") != [platform_name]:
                problems.append(f"manifest platforms {manifest.get('platforms')} != [{platform_name!r}]")
            listed = manifest.get("wheels", [])
            pattern = re.compile(PLATFORMS[platform_name][1])
            for python_version in PYTHON_VERSIONS:
                tag = f"cp{python_version.replace('.', '')}"
                for package in ("pyzmq", "msgpack"):
                    if not any(Path(w).name.startswith(f"{package}-") and _wheel_serves(Path(w).name, tag)
                               for w in listed):
                        problems.append(f"no {package} wheel for CPython {python_version}")
            for wheel in listed:
                if wheel.removeprefix("./") not in names:
                    problems.append(f"manifest lists {wheel} but the zip lacks it")
                if not pattern.search(wheel):
                    problems.append(f"wheel {wheel} is not for {platform_name}")
        if any("__pycache__" in name or name.endswith(".pyc") for name in names):
            problems.append("contains compiled Python files")
    if problems:
        raise BuildError(f"{archive_path.name}: " + "; ".join(problems))
    for command in _blender_validators(archive_path):
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise BuildError(f"{archive_path.name}: Blender's extension validator failed:\n"
                             f"{result.stdout}{result.stderr}".rstrip())


def _blender_validators(archive_path: Path) -> list[list[str]]:
    """Commands running Blender's own validator: ``blender --command extension validate`` when a
    Blender executable is on PATH, else the same tool (bl_pkg's blender_ext.py) shipped in the bpy wheel."""
    blender = shutil.which("blender")
    if blender:
        return [[blender, "--factory-startup", "--command", "extension", "validate", str(archive_path)]]
    spec = importlib.util.find_spec("bpy")
    if spec is None or spec.origin is None:
        return []
    tools = sorted(Path(spec.origin).parent.glob("*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    return [[sys.executable, str(tools[-1]), "validate", str(archive_path)]] if tools else []


def _wheel_serves(wheel_name: str, python_tag: str) -> bool:
    """Whether a wheel installs on CPython ``python_tag`` (e.g. cp313): exact tag or a lower abi3."""
    python_tags, abi_tag = wheel_name[:-4].split("-")[-3:-1]
    wanted = int(python_tag[2:])
    for tag in python_tags.split("."):
        if tag == python_tag or tag in {"py3"}:
            return True
        if abi_tag == "abi3" and tag.startswith("cp") and int(tag[2:]) <= wanted:
            return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", action="append", choices=[*PLATFORMS, "current", "all"],
                        help="platform to build (repeatable; default: all)")
    parser.add_argument("--no-download", action="store_true", help="use only wheels already in the cache")
    parser.add_argument("--wheel-cache", type=Path, default=ROOT / "wheels", help="wheel cache (default: wheels/)")
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="output folder (default: dist/)")
    args = parser.parse_args(argv)
    requested = args.platform or ["all"]
    platforms: list[str] = []
    for name in requested:
        for resolved in (list(PLATFORMS) if name == "all" else [current_platform() if name == "current" else name]):
            if resolved not in platforms:
                platforms.append(resolved)
    try:
        for platform_name in platforms:
            path = build_zip(platform_name, args.out, args.wheel_cache, download=not args.no_download)
            print(f"built {path} ({path.stat().st_size / 1e6:.1f} MB)")
    except BuildError as error:
        print(f"build_addon: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

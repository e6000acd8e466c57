"""A folder of wheels for everything the solver needs on this machine's Python (tests that install the solver
into a clean environment with no index: ``pip install --no-index --find-links``).

Downloaded once with ``pip download`` into ``wheels/solver/<python tag>/`` (git-ignored, like the extension's
wheel cache) and reused while pyproject.toml's requirements stay the same.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from blender_addon.core.solver_setup import project_requirements

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILD_REQUIREMENTS = ("setuptools>=68", "wheel")     # pip builds the package from source in isolation


def solver_wheelhouse() -> Path:
    """The wheel folder (downloads on first use; RuntimeError when pip cannot fetch the wheels)."""
    requirements = project_requirements(REPO_ROOT / "pyproject.toml") + BUILD_REQUIREMENTS
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    folder = REPO_ROOT / "wheels" / "solver" / tag
    stamp = folder / ".requirements"
    digest = hashlib.sha256("\n".join(requirements).encode()).hexdigest()
    if stamp.is_file() and stamp.read_text() == digest:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    result = subprocess.run([sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--quiet",
                             "--only-binary=:all:", "--dest", str(folder), *requirements],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"pip could not download the solver's wheels:\n{result.stderr.strip()[-2000:]}")
    stamp.write_text(digest)
    return folder

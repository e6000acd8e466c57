"""``pip install tangle-solver`` on a remote GPU box (docs/remote.md): from a clean virtual
environment with no index (the wheels of its requirements in a local folder), the package installs, its
``tangle-solver`` command serves, and a client bakes a small cloth on it. The server must run from the
installed package, not from this checkout."""

import os
import subprocess
import sys

import numpy as np

from protocol.client import SolverClient
from tests.physics.scenes import cloth_object, grid, scene
from tests.server_process import REPO_ROOT, ServerProcess


def _clean_environment() -> dict:
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("PYTHON", "PIP_", "VIRTUAL_ENV"))}
    environment["PYTHONNOUSERSITE"] = "1"
    return environment


def test_tangle_solver_installs_from_pip_into_a_clean_venv_and_serves(discarded_environments, solver_wheelhouse):
    tmp_path = discarded_environments
    environment = _clean_environment()
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=environment)
    python = venv / "bin" / "python"
    install = subprocess.run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-index",
                              "--find-links", str(solver_wheelhouse), str(REPO_ROOT)],
                             capture_output=True, text=True, env=environment, cwd=tmp_path)
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    assert "Successfully installed" in install.stdout and "tangle-solver-0.1.0" in install.stdout
    where = subprocess.run([str(python), "-c", "import solver_server, protocol; print(solver_server.__file__)"],
                           capture_output=True, text=True, env=environment, cwd=tmp_path, check=True)
    assert where.stdout.strip().startswith(str(venv))                   # the installed copy, not the checkout
    server = ServerProcess(command=(str(venv / "bin" / "tangle-solver"),), cwd=tmp_path, env=environment,
                           startup_timeout=300.0)
    try:
        vertices, triangles, index = grid(5, 5, size=0.4)
        cloth = cloth_object(vertices, triangles, pins=index[0])
        with SolverClient(server.address, timeout=60.0) as client:
            frames = list(client.submit(scene([cloth], frame_end=4)).frames())
        assert [frame.frame for frame in frames] == [1, 2, 3, 4]
        positions = frames[-1].positions["Cloth"]
        assert np.all(np.isfinite(positions)) and positions[:, 2].min() < 1.0 - 1e-3   # it fell
    finally:
        server.stop()

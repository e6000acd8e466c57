"""--device cuda without CuPy/CUDA: a clear one-line error and a non-zero exit, not a traceback."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from solver_server.backend import BackendError, get_backend
from tests.conftest import REPO_ROOT

HAS_CUPY = importlib.util.find_spec("cupy") is not None


@pytest.mark.skipif(HAS_CUPY, reason="CuPy is installed: --device cuda may work here")
def test_device_cuda_without_cupy_exits_with_a_clear_message():
    result = subprocess.run([sys.executable, "-m", "solver_server", "--device", "cuda", "--bind", "tcp://127.0.0.1:*"],
                            cwd=REPO_ROOT, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert "--device cuda needs CuPy" in result.stderr and "--device cpu" in result.stderr


@pytest.mark.skipif(HAS_CUPY, reason="CuPy is installed")
def test_get_backend_cuda_raises_backend_error():
    with pytest.raises(BackendError, match="CuPy"):
        get_backend("cuda")


def test_unknown_device_is_a_backend_error():
    with pytest.raises(BackendError, match="unknown device 'tpu'"):
        get_backend("tpu")


def test_cpu_device_info_names_the_machine():
    info = get_backend("cpu").device_info()
    assert isinstance(info["name"], str) and info["name"]
    assert info["memory_bytes"] > 0


def test_frame_stats_report_device_time():
    from solver_server.simulation import Simulation
    from tests.portability.scenarios import pd_softbody

    simulation = Simulation(pd_softbody(), get_backend("cpu"))
    simulation.initial_frame()
    _, _, stats = simulation.advance(None)
    assert 0.0 < stats["device_ms"] <= stats["frame_ms"]


def test_welcome_reports_the_backend_and_device(solver_server_address):
    from protocol.client import SolverClient

    with SolverClient(solver_server_address, timeout=20.0) as client:
        welcome = client.hello()
    assert welcome["backend"] == "cpu"
    assert welcome["device"]["name"] and welcome["device"]["memory_bytes"] > 0


def test_the_command_line_devices_include_the_emulated_one():
    from solver_server.devices import DEVICES, backend_for

    assert DEVICES == ("cpu", "cuda", "cuda-emulated")
    assert backend_for("cuda-emulated").name == "cuda-emulated"
    assert backend_for("cpu").name == "cpu"
    with pytest.raises(BackendError, match="unknown device 'tpu'.*cuda-emulated"):
        backend_for("tpu")

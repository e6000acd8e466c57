"""Every solver on a real CUDA GPU (CuPy) gives the CPU backend's frames.

The strict backend (test_solvers_portable.py) proves on any machine that the solvers only call the array
namespace they are given; this test runs the same scenarios on the real thing and is skipped where CuPy or
a CUDA device is missing (CI has neither).  Run it on a GPU machine with `pytest tests/portability`.
"""

from __future__ import annotations

import numpy as np
import pytest

from solver_server.backend import BackendError, get_backend
from tests.portability.scenarios import SCENARIOS, run_frames, use_device_algorithms_on_cpu


def _cuda_backend():
    try:
        return get_backend("cuda")
    except BackendError as exc:
        pytest.skip(f"no CUDA device: {exc}")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_solver_runs_on_cuda_and_matches_cpu(name, monkeypatch):
    cuda = _cuda_backend()
    use_device_algorithms_on_cpu(monkeypatch.setattr)
    reference = run_frames(name, get_backend("cpu"))
    on_device = run_frames(name, cuda)
    assert max(stats["contacts"] for _, _, stats in on_device[1:]) > 0, f"{name}: no contact, collisions untested"
    for (frame, expected, _), (device_frame, got, stats) in zip(reference, on_device):
        assert device_frame == frame
        assert stats.get("device_ms", 0.0) >= 0.0
        for object_id, positions in expected.items():
            assert isinstance(got[object_id], np.ndarray) and got[object_id].dtype == np.float32
            assert np.all(np.isfinite(got[object_id])), f"{name}: {object_id} not finite at frame {frame}"
            # reductions on the GPU sum in another order: agreement to 0.1 mm over these 5-frame scenes
            np.testing.assert_allclose(got[object_id], positions, atol=1e-4,
                                       err_msg=f"{name}: {object_id} at frame {frame}")


def test_a_kernel_writes_into_the_cupy_array_itself():
    """warp_view of a CuPy array is a view of its memory (fails if it copies: the writes would not reach it)."""
    import warp as wp

    from solver_server.kernels import launch, warp_device_of, warp_view
    from tests.kernels.test_interop import _double_in_place

    cuda = _cuda_backend()
    array = cuda.xp.asarray(np.arange(15, dtype=np.float64).reshape(5, 3))
    view = warp_view(array, wp.vec3d)
    assert view.ptr == array.data.ptr and warp_device_of(array) == cuda.warp_device
    launch(_double_in_place, 5, inputs=[view], device=cuda.warp_device)
    np.testing.assert_array_equal(cuda.to_host(array), 2.0 * np.arange(15).reshape(5, 3))
    assert warp_view(cuda.xp.zeros((0, 3)), wp.vec3d).shape == (0,)

"""The kernel layer's hand-over of xp arrays to Warp: zero-copy views, refusals, the kernel cache."""

from __future__ import annotations

import numpy as np
import pytest
import warp as wp

from solver_server.kernel_warmup import warm_kernels
from solver_server.kernels import kernel_cache_dir, warp_device_of, warp_view
from solver_server.emulated_device import emulated_cuda_backend


@wp.kernel
def _double_in_place(values: wp.array(dtype=wp.vec3d)):
    i = wp.tid()
    values[i] = wp.float64(2.0) * values[i]


def test_a_kernel_writes_into_the_numpy_array_itself():
    """Fails if warp_view copies: the kernel's writes would not reach the caller's array."""
    array = np.arange(12, dtype=np.float64).reshape(4, 3)
    view = warp_view(array, wp.vec3d)
    assert view.ptr == array.ctypes.data
    wp.launch(_double_in_place, dim=4, inputs=[view], device="cpu")
    np.testing.assert_array_equal(array, 2.0 * np.arange(12).reshape(4, 3))


def test_a_kernel_writes_into_a_device_array_of_the_emulated_cuda_device():
    """A non-numpy array module goes through DLPack (CuPy's path), also without a copy."""
    xp = emulated_cuda_backend().xp
    array = xp.asarray(np.ones((5, 3)))
    wp.launch(_double_in_place, dim=5, inputs=[warp_view(array, wp.vec3d)], device=warp_device_of(array))
    np.testing.assert_array_equal(xp.asnumpy(array), np.full((5, 3), 2.0))


@pytest.mark.parametrize("array", [np.zeros((4, 3), np.float32), np.zeros((4, 2)), np.zeros((3, 4))[:, :3]])
def test_views_that_would_need_a_conversion_are_refused(array):
    with pytest.raises(ValueError):
        warp_view(array, wp.vec3d)


def test_two_dimensional_index_arrays_keep_their_shape():
    triangles = np.arange(12, dtype=np.int32).reshape(4, 3)
    view = warp_view(triangles, wp.int32)
    assert view.shape == (4, 3) and view.ptr == triangles.ctypes.data


def test_warm_up_loads_every_kernel_module_from_the_cache():
    report = warm_kernels("cpu")
    assert report["cache"] == kernel_cache_dir()
    assert {"solver_server.kernels.geometry", "solver_server.collision.mesh_kernels",
            "solver_server.collision.surface_kernels"} <= set(report["modules"])
    again = warm_kernels("cpu")
    assert again["seconds"] < 2.0, "a warm start must not recompile"


def test_the_backend_names_the_warp_device_of_its_arrays():
    from solver_server.backend import get_backend

    for backend in (get_backend("cpu"), emulated_cuda_backend()):
        assert backend.warp_device == warp_device_of(backend.xp.zeros((2, 3))) == "cpu"


def test_kernels_compile_ahead_of_time_for_a_gpu_without_one():
    from pathlib import Path

    from solver_server.__main__ import main
    from solver_server.kernel_warmup import compile_for_cuda
    from solver_server.kernels import air

    report = compile_for_cuda(90, modules=(air,))
    assert report["cache"] == kernel_cache_dir()
    (binary,) = report["binaries"]
    assert binary.endswith(".sm90.cubin") and Path(binary).stat().st_size > 1000
    assert Path(binary).resolve().is_relative_to(Path(kernel_cache_dir()).resolve())
    assert main(["--cuda-arch", "90"]) == 2                        # only with --warm-kernels
    assert main(["--warm-kernels", "--cuda-arch", "7"]) == 2       # not an architecture

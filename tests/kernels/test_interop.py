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


def test_views_of_the_same_memory_share_their_fields_but_each_keeps_its_own_array_alive():
    """Views are built once per (address, dtype, shape, device) and copied: a second array over the same memory (a
    numpy view of the first, or a new array the allocator placed where a freed one was) gets a view of it that
    writes into it, and every view keeps the array it was made from alive."""
    base = np.arange(12, dtype=np.float64).reshape(4, 3)
    alias = base.reshape(12).reshape(4, 3)                    # another array object over the same memory
    first, second = warp_view(base, wp.vec3d), warp_view(alias, wp.vec3d)
    assert first is not second and first.ptr == second.ptr == base.ctypes.data
    wp.launch(_double_in_place, dim=4, inputs=[second], device="cpu")
    np.testing.assert_array_equal(base, 2.0 * np.arange(12).reshape(4, 3))
    temporary_view = warp_view(np.full((6, 3), 1.5), wp.vec3d)   # its array lives only through the view
    for _ in range(50):
        reused = np.full((6, 3), 4.0)                           # the allocator may hand back freed blocks
        wp.launch(_double_in_place, dim=6, inputs=[warp_view(reused, wp.vec3d)], device="cpu")
        np.testing.assert_array_equal(reused, 8.0)
    wp.launch(_double_in_place, dim=6, inputs=[temporary_view], device="cpu")
    np.testing.assert_array_equal(temporary_view.numpy(), 3.0)
    assert warp_view(base[:2], wp.vec3d).shape == (2,)          # a shorter array over the same start: its own shape


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

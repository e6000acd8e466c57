"""Shared NVIDIA Warp kernels and device functions: one source for the CPU and CUDA (docs/kernels.md).

- ``interop``: the Warp device of an array module, zero-copy views of numpy / CuPy arrays as Warp
  arrays, the kernel cache location (the warm-up of every module: ``solver_server/kernel_warmup.py``);
- ``geometry``: ``@wp.func`` helpers (closest point on a triangle, vertex–moving-triangle CCD).

A solver's own kernels live beside it (``collision/mesh_kernels.py``, ``solvers/<name>/kernels.py``).
"""

from .interop import (QUERY_MIN_ITEMS, capture, cpu_kernel_threads, cuda_layout, cuda_layout_on, device_loops,
                      float64_view, int32_view, kernel_cache_dir, launch, launch_items, launch_split,
                      on_device_stream, recorded_items, repeat_while, replay, warp_device_of, warp_view)

__all__ = ["QUERY_MIN_ITEMS", "capture", "cpu_kernel_threads", "cuda_layout", "cuda_layout_on", "device_loops",
           "float64_view", "int32_view", "kernel_cache_dir", "launch", "launch_items", "launch_split",
           "on_device_stream", "recorded_items", "repeat_while", "replay", "warp_device_of", "warp_view"]

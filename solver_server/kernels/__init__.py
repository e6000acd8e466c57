"""Shared NVIDIA Warp kernels and device functions (DESIGN.md §3): one source for the CPU and CUDA.

- ``interop``: the Warp device of an array module, zero-copy views of numpy / CuPy arrays as Warp
  arrays, the kernel cache location and warm-up;
- ``geometry``: ``@wp.func`` helpers (closest point on a triangle, vertex–moving-triangle CCD).

A solver's own kernels live beside it (``collision/mesh_kernels.py``, ``solvers/<name>/kernels.py``).
"""

from .interop import (capture, cpu_kernel_threads, device_loops, int32_view, kernel_cache_dir, launch, launch_items,
                      launch_split, on_device_stream, recorded_items, repeat_while, replay, warm_kernels,
                      warp_device_of, warp_view)

__all__ = ["capture", "cpu_kernel_threads", "device_loops", "int32_view", "kernel_cache_dir", "launch", "launch_items", "launch_split", "on_device_stream",
           "recorded_items", "repeat_while", "replay", "warm_kernels", "warp_device_of", "warp_view"]

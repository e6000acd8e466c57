"""Load every Tangle Warp kernel module on a device before the first job: compiled once on a fresh machine
(into the kernel cache), read from the cache afterwards. It sits above the solvers, which it imports; the
shared kernel layer (``kernels/``) knows no solver."""

from __future__ import annotations

import time

import warp as wp

from .collision import mesh_kernels, primitive_kernels, surface_kernels
from .kernels import air, bounds, geometry, pairs, segments
from .kernels.interop import ensure_initialized, kernel_cache_dir
from .solvers.cosserat import kernels as cosserat_kernels
from .solvers.der.kernels import WARP_MODULES as DER_MODULES
from .solvers.particles import kernels as particle_kernels
from .solvers.pd.kernels import WARP_MODULES as PD_MODULES

KERNEL_MODULES = (geometry, bounds, air, segments, mesh_kernels, primitive_kernels, surface_kernels, *PD_MODULES, particle_kernels,
                  cosserat_kernels, pairs, *DER_MODULES)


def warm_kernels(device: str = "cpu") -> dict:
    """Load (compile on first use, else read from the cache) every module of KERNEL_MODULES on ``device``.
    Returns {"seconds": float, "cache": str, "modules": [names]}."""
    ensure_initialized()
    tick = time.perf_counter()
    for module in KERNEL_MODULES:
        wp.load_module(module, device=device)
    return {"seconds": time.perf_counter() - tick, "cache": kernel_cache_dir(),
            "modules": [module.__name__ for module in KERNEL_MODULES]}


def compile_for_cuda(arch: int, modules=KERNEL_MODULES) -> dict:
    """Every module of ``modules`` compiled ahead of time into the kernel cache as CUBIN for the CUDA architecture
    ``arch`` (sm_``arch``: 90 for an H100 or H200), on any machine, GPU or not (Warp's bundled NVRTC). A GPU server
    whose cache holds them starts without compiling (a fresh H200 took 100 s to compile the mesh kernels alone).
    Warp loads CUBIN where the GPU's driver is older than its CUDA toolkit (the case on the GPU machines Tangle was
    measured on); a newer driver takes PTX, which the server then compiles at its first start as without this.
    Returns {"seconds": float, "cache": str, "binaries": [paths]}."""
    ensure_initialized()
    tick = time.perf_counter()
    binaries = []
    for module in modules:
        binaries.extend(str(path) for path in wp.compile_aot_module(module, arch=int(arch), use_ptx=False))
    return {"seconds": time.perf_counter() - tick, "cache": kernel_cache_dir(), "binaries": binaries}

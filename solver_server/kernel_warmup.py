"""Load every Tangle Warp kernel module on a device before the first job: compiled once on a fresh machine
(into the kernel cache), read from the cache afterwards. It sits above the solvers, which it imports; the
shared kernel layer (``kernels/``) knows no solver."""

from __future__ import annotations

import time

import warp as wp

from .collision import mesh_kernels, primitive_kernels, surface_kernels
from .kernels import bounds, geometry, pairs
from .kernels.interop import ensure_initialized, kernel_cache_dir
from .solvers.cosserat import kernels as cosserat_kernels
from .solvers.der import (bend_twist_kernels, ccd_kernels, contact_kernels, frame_kernels, retraction_kernels,
                          stretch_kernels)
from .solvers.particles import kernels as particle_kernels
from .solvers.pd import (bending_kernels, jacobi_kernels, limit_kernels, limit_sweep_kernels, local_kernels,
                         tet_kernels, triangle_kernels)

KERNEL_MODULES = (geometry, bounds, mesh_kernels, primitive_kernels, surface_kernels, limit_kernels,
                  limit_sweep_kernels, local_kernels, triangle_kernels, bending_kernels, tet_kernels, jacobi_kernels,
                  particle_kernels, cosserat_kernels, pairs, contact_kernels, stretch_kernels, bend_twist_kernels,
                  frame_kernels, retraction_kernels, ccd_kernels)


def warm_kernels(device: str = "cpu") -> dict:
    """Load (compile on first use, else read from the cache) every module of KERNEL_MODULES on ``device``.
    Returns {"seconds": float, "cache": str, "modules": [names]}."""
    ensure_initialized()
    tick = time.perf_counter()
    for module in KERNEL_MODULES:
        wp.load_module(module, device=device)
    return {"seconds": time.perf_counter() - tick, "cache": kernel_cache_dir(),
            "modules": [module.__name__ for module in KERNEL_MODULES]}

"""The kernel warm-up line every benchmark prints first (first-run and cached compile times)."""

from __future__ import annotations

from solver_server.kernel_warmup import warm_kernels
from solver_server.kernels import cpu_kernel_threads


def print_kernel_warmup(device: str = "cpu") -> float:
    """Load (compile on a fresh cache) every Tangle kernel module on the Warp ``device`` ("cpu", "cuda:0") and
    print how long it took, the cache and the CPU kernel threads; returns the seconds."""
    warmed = warm_kernels(device)
    print(f"kernels ready on {device} in {warmed['seconds']:.2f} s (cache {warmed['cache']}; a fresh cache compiles "
          f"here, ~14 s on the 2-core box); CPU kernel threads: {cpu_kernel_threads()}", flush=True)
    return warmed["seconds"]


def main(argv=None) -> int:
    """`python -m benchmarks.kernel_warmup`: the warm-up alone (point TANGLE_KERNEL_CACHE at an empty folder
    to time a first run)."""
    print_kernel_warmup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

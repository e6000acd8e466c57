"""The devices a solver server runs its jobs on, by the name ``--device`` takes."""

from __future__ import annotations

from .backend import Backend, BackendError, get_backend
from .emulated_device import emulated_cuda_backend

DEVICES = ("cpu", "cuda", "cuda-emulated")


def backend_for(device: str) -> Backend:
    """The backend of ``device`` (one of DEVICES): numpy on the CPU, CuPy on CUDA (BackendError without a usable
    GPU), or the CUDA code paths emulated on the CPU (``emulated_device``: for testing them without a GPU)."""
    if device == "cuda-emulated":
        return emulated_cuda_backend()
    if device not in DEVICES:
        raise BackendError(f"unknown device {device!r}: expected one of {', '.join(DEVICES)}")
    return get_backend(device)

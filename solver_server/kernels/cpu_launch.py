"""Kernel launches on Warp's CPU device without ``wp.launch``'s per-call work.

``wp.launch`` takes every argument through its generic checks and packing (~15 µs for a dozen arguments) before it
calls the compiled kernel. A solver substep makes hundreds of launches (DER on a head ~540, the cloth drape ~100),
so that packing alone was a twentieth of a frame. Per kernel, :class:`CpuLaunch` builds once what a launch needs
from a launch that Warp records (``wp.launch(..., record_cmd=True)``, its public way to replay launches): the
compiled entry point, the kernel's argument struct, and one packer per parameter; a launch then fills the struct
and calls the entry point (~3 µs). The kernel, its arguments and its arithmetic are those of ``wp.launch``, so the
results are the same bit for bit (``tests/kernels/test_cpu_launch.py``).

Every array argument is checked against its parameter's dtype and dimension count, as ``wp.launch`` does: a
mismatch raises instead of letting the kernel read memory of another layout.

:func:`lean_launch` is the entry: it declines (returns False) where ``wp.launch`` must run, i.e. while a CPU graph
is being recorded (``interop.capture``: Warp records launches made through it), while ``wp.launch`` is wrapped by
an observer (a test's recorder, ``benchmarks.host_cost``'s counter: they see every launch), and for a kernel or an
argument of a kind this module does not pack (``CpuLaunch.packers``: Warp's own path then packs it). A Warp whose
recorded launch is laid out otherwise (no compiled entry point, another parameter count) keeps ``wp.launch`` for
every kernel; the entry point's calling convention itself is what ``tests/kernels/test_cpu_launch.py`` holds.
"""

from __future__ import annotations

import ctypes
import threading

import warp as wp

_WP_LAUNCH = wp.launch          # the launch as Warp defines it; a replaced wp.launch is an observer
BOUNDS_KEPT = 64                # launch bounds kept per kernel (one per distinct launch size)

_recording = threading.local()  # .depth: CPU graph recordings open on this thread
_launchers: dict = {}           # kernel -> CpuLaunch, or None where the kernel takes Warp's own path
_launchers_lock = threading.Lock()


class recording_graph:
    """Context for the recording of a CPU graph: launches inside it go through ``wp.launch`` (which records them)."""

    def __enter__(self):
        _recording.depth = getattr(_recording, "depth", 0) + 1
        return self

    def __exit__(self, *exc):
        _recording.depth -= 1
        return False


def _array_packer(arg_type, label: str, kernel_key: str):
    """A packer of a Warp array argument: its descriptor, after the checks ``wp.launch`` makes."""
    dtype, ndim, array_class = arg_type.dtype, arg_type.ndim, wp.array

    def pack(value):
        if type(value) is not array_class:
            raise _Unpacked
        if value.dtype is not dtype and not wp.types.types_equal(value.dtype, dtype):
            raise TypeError(f"kernel '{kernel_key}', argument '{label}' expects an array of dtype {dtype}, "
                            f"got {value.dtype}")
        if value.ndim != ndim:
            raise TypeError(f"kernel '{kernel_key}', argument '{label}' expects an array of {ndim} dimension(s), "
                            f"got {value.ndim}")
        return value.__ctype__()
    return pack


def _scalar_packer(field_type):
    """A packer of a scalar argument (``wp.float64``, ``int``, ``wp.uint64`` …): the ctypes value Warp packs."""
    def pack(value):
        return field_type(value)
    return pack


def _value_packer(arg_type):
    """A packer of a vector or matrix argument passed by value (``wp.vec3d`` …)."""
    def pack(value):
        return value if type(value) is arg_type else arg_type(value)
    return pack


def _struct_packer(field_type):
    """A packer of a ``@wp.struct`` argument: its descriptor, as Warp packs it."""
    def pack(value):
        descriptor = value.__ctype__()
        if type(descriptor) is not field_type:
            raise _Unpacked
        return descriptor
    return pack


class _Unpacked(Exception):
    """An argument of a kind this module does not pack: the launch takes Warp's own path."""


class CpuLaunch:
    """What a CPU launch of ``kernel`` needs, built from one launch Warp records with ``inputs`` (its arguments)."""

    def __init__(self, kernel, dim: int, inputs: list):
        command = _WP_LAUNCH(kernel, dim=dim, inputs=inputs, device="cpu", record_cmd=True)
        hooks = getattr(command, "hooks", None)
        params = getattr(command, "params", None)
        if getattr(hooks, "forward", None) is None or params is None or len(params) != len(kernel.adj.args) + 1 \
                or getattr(command, "block_dim", 1) > 1 or not hasattr(command, "set_dim"):
            raise _Unpacked                         # a Warp whose recorded launch is laid out otherwise: wp.launch
        self.command = command                      # keeps the module's executable loaded
        self.forward = hooks.forward
        self.kernel_key = kernel.key
        fields, packers = [], []
        for arg, param in zip(kernel.adj.args, params[1:]):
            fields.append((arg.label, type(param)))
            if wp.types.is_array(arg.type):
                packers.append(_array_packer(arg.type, arg.label, kernel.key))
            elif isinstance(arg.type, type) and issubclass(arg.type, ctypes.Array):
                packers.append(_value_packer(arg.type))
            elif isinstance(param, ctypes.Structure):
                packers.append(_struct_packer(type(param)))
            elif isinstance(param, (ctypes.c_double, ctypes.c_float, ctypes.c_int32, ctypes.c_int64,
                                    ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int8, ctypes.c_uint8, ctypes.c_bool)):
                packers.append(_scalar_packer(type(param)))
            else:
                raise _Unpacked
        self.arguments = type(f"{kernel.key}_arguments", (ctypes.Structure,), {"_fields_": fields})
        self.packers = packers
        self._bounds: dict[int, object] = {}
        self._lock = threading.Lock()

    def bounds(self, dim: int):
        """Warp's launch bounds for ``dim`` threads (built by the recorded launch's ``set_dim``, kept per size)."""
        bounds = self._bounds.get(dim)
        if bounds is None:
            if len(self._bounds) >= BOUNDS_KEPT:
                self._bounds.clear()
            with self._lock:        # set_dim and bounds read as one: another thread's size must not slip between
                self.command.set_dim(dim)
                bounds = self._bounds[dim] = self.command.bounds
        return bounds

    def __call__(self, dim: int, inputs: list) -> None:
        packers = self.packers
        if len(inputs) != len(packers):
            raise TypeError(f"kernel '{self.kernel_key}' takes {len(packers)} arguments, {len(inputs)} given")
        arguments = self.arguments(*[pack(value) for pack, value in zip(packers, inputs)])
        self.forward(ctypes.byref(self.bounds(dim)), ctypes.byref(arguments))


def lean_launch(kernel, dim: int, inputs: list) -> bool:
    """Launch ``kernel`` over ``dim`` threads on Warp's CPU device through its :class:`CpuLaunch`; returns False
    (nothing launched) where ``wp.launch`` must run instead (module docstring)."""
    if getattr(_recording, "depth", 0) or wp.launch is not _WP_LAUNCH:
        return False
    launcher = _launchers.get(kernel, False)
    if launcher is False:
        with _launchers_lock:
            launcher = _launchers.get(kernel, False)
            if launcher is False:
                try:
                    launcher = CpuLaunch(kernel, dim, inputs)
                except _Unpacked:
                    launcher = None
                _launchers[kernel] = launcher
    if launcher is None:
        return False
    try:
        launcher(dim, inputs)
    except _Unpacked:
        return False
    return True

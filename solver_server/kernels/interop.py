"""Warp set-up and zero-copy hand-over of ``xp`` arrays to Warp kernels.

Arrays stay numpy (CPU) or CuPy (CUDA) at module boundaries (docs/kernels.md). :func:`warp_view` wraps one
as a Warp array over the SAME memory: a numpy or CuPy array through its data pointer (Warp's CPU device or
the array's GPU), any other array module through DLPack (the strict test backend, which stands in for a
device).
A kernel that writes into a view writes into the caller's array; nothing is copied (tested in
``tests/kernels/test_interop.py``; on a GPU, ``tests/portability/test_cuda_device.py``).

Kernel cache: Warp compiles each kernel module once per source hash and keeps the binaries in
``kernel_cache_dir()``: ``$TANGLE_KERNEL_CACHE`` when set, else Warp's default
(``~/.cache/warp/<warp version>``). ``python -m solver_server --warm-kernels`` (and every server start)
loads the solver modules so that the first bake does not compile inside its frames.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import warp as wp

from .cpu_launch import lean_launch, recording_graph

wp.config.quiet = True   # no banner on stdout: the server and the CLI print their own lines

_init_lock = threading.Lock()
_initialized = False


def ensure_initialized() -> None:
    global _initialized
    if _initialized:
        return
    with _init_lock:
        if _initialized:
            return
        cache = os.environ.get("TANGLE_KERNEL_CACHE")
        if cache:
            wp.config.kernel_cache_dir = cache
        wp.config.quiet = True
        wp.init()
        _initialized = True


def kernel_cache_dir() -> str:
    """The folder holding compiled kernels (see module docstring)."""
    ensure_initialized()
    return str(wp.config.kernel_cache_dir)


def warp_device_of(array) -> str:
    """Warp device name of an ``xp`` array: "cpu" for numpy (and the strict CPU stand-in), "cuda:N" for CuPy."""
    ensure_initialized()
    device = getattr(array, "device", None)
    if isinstance(array, np.ndarray) or device is None or not hasattr(device, "id"):
        return "cpu"
    return f"cuda:{int(device.id)}"


_SCALAR_OF = {wp.vec3d: np.float64, wp.vec3f: np.float32, wp.vec3i: np.int32, wp.vec4d: np.float64,
              wp.mat22d: np.float64, wp.mat33d: np.float64, wp.float64: np.float64, wp.float32: np.float32,
              wp.int32: np.int32, wp.int64: np.int64, wp.uint8: np.uint8}
_ITEM_SHAPE_OF = {wp.vec3d: (3,), wp.vec3f: (3,), wp.vec3i: (3,), wp.vec4d: (4,), wp.mat22d: (2, 2),
                  wp.mat33d: (3, 3)}


def _pointer_and_device(array) -> tuple[int, str] | None:
    """(data address, Warp device) of a numpy array or a CUDA array of CuPy; None for other array modules.
    CuPy goes straight from its pointer: DLPack's capsule round trip cost ~60 µs a view on an H100 box, a quarter
    of a PD substep's host time there."""
    if isinstance(array, np.ndarray):
        return array.ctypes.data, "cpu"
    device = getattr(array, "device", None)
    interface = getattr(array, "__cuda_array_interface__", None) if hasattr(device, "id") else None
    if interface is None:
        return None
    return interface["data"][0], f"cuda:{int(device.id)}"


def warp_view(array, dtype):
    """A Warp array of ``dtype`` over the memory of ``array`` without a copy: ``wp.vec3d`` for (n, 3) float64,
    ``wp.vec4d`` for (n, 4), ``wp.mat22d`` / ``wp.mat33d`` for (n, 2, 2) / (n, 3, 3) (1-d Warp arrays of n
    items); ``wp.float64`` and ``wp.int32`` keep the array's shape (e.g. (T, 3) element indices as a 2-d Warp
    array). The array must already be C-contiguous with the matching scalar type (ValueError otherwise: a silent
    conversion would be a copy the kernel's writes never reach)."""
    ensure_initialized()
    scalar = np.dtype(_SCALAR_OF[dtype])
    item_shape = _ITEM_SHAPE_OF.get(dtype)
    itemized = item_shape is not None
    shape = tuple(array.shape)
    if array.dtype != scalar or (itemized and (len(shape) != 1 + len(item_shape) or shape[1:] != item_shape)):
        raise ValueError(f"warp_view: expected {scalar} of shape (n{''.join(', %d' % n for n in item_shape or ())}), "
                         f"got {array.dtype} {shape}")
    pointer = _pointer_and_device(array)
    if pointer is not None:
        if not array.flags.c_contiguous:
            raise ValueError("warp_view: array is not C-contiguous")
        address, device = pointer
        view_shape = (shape[0],) if itemized else shape
        if array.size == 0:
            return wp.empty(view_shape, dtype=dtype, device=device)
        return _view_at(address, dtype, view_shape, device, array)
    view = wp.from_dlpack(array)
    if itemized:
        view = wp.array(ptr=view.ptr, dtype=dtype, shape=(shape[0],), device=view.device, copy=False)
    view._tangle_owner = array   # keep the producer alive as long as the view
    return view


_WarpArray = wp.array
_VIEW_TEMPLATES: dict[tuple, object] = {}
VIEW_TEMPLATES_KEPT = 4096   # (address, dtype, shape, device) templates kept; the table is cleared when full


def _view_at(address: int, dtype, shape: tuple, device: str, owner):
    """A Warp array of ``dtype`` and ``shape`` over the memory at ``address`` on ``device``, keeping ``owner`` (the
    array that owns the memory) alive. Building a ``wp.array`` costs ~8 µs of checks, a good part of a launch's
    host time where a launch takes several views (a contact pass: ~20); the same memory is viewed again and again
    (state arrays, the outputs of a query, whose allocator hands back the same block), so the view's fields are
    built once per (address, dtype, shape, device) and every later view is a copy of them with its own owner. The
    template's kernel-argument struct (``wp.array.__ctype__``: address, shape, strides) is built with it and shared
    by its views, which takes another ~10 µs off a launch of a DER substep's kind (~2 200 launches a frame). A
    template owns nothing and refers to no array: it describes the memory, whatever array holds it now."""
    key = (address, dtype, shape, device)
    template = _VIEW_TEMPLATES.get(key)
    if template is None:
        if len(_VIEW_TEMPLATES) >= VIEW_TEMPLATES_KEPT:
            _VIEW_TEMPLATES.clear()
        template = wp.array(ptr=address, dtype=dtype, shape=shape, device=device, copy=False)
        template.__ctype__()
        _VIEW_TEMPLATES[key] = template
    view = _WarpArray.__new__(_WarpArray)
    view.__dict__.update(template.__dict__)
    view._tangle_owner = owner   # the view does not own the memory: keep the array alive with it
    return view


def float64_view(xp, array, dtype=wp.float64):
    """A Warp view of ``dtype`` (float64 items: ``wp.float64``, ``wp.vec3d`` …) of a float array of ``xp`` for a
    kernel's input: the array itself when it already is contiguous float64, else a contiguous float64 copy."""
    if getattr(array, "dtype", None) == np.float64 and array.flags.c_contiguous:
        return warp_view(array, dtype)
    return warp_view(xp.ascontiguousarray(array, dtype=xp.float64), dtype)


def int32_view(xp, array):
    """A Warp int32 view of an integer (or bool) array of ``xp`` for a kernel's input (nothing is written back):
    the array itself when it already is contiguous int32, else a contiguous int32 copy (on a device each copy is
    a launch and an allocation)."""
    if getattr(array, "dtype", None) == np.int32 and array.flags.c_contiguous:
        return warp_view(array, wp.int32)
    return warp_view(xp.ascontiguousarray(xp.asarray(array).astype(xp.int32)), wp.int32)


_external_streams: dict[tuple[str, int], object] = {}


def _stream_for(device: str):
    """Warp's handle of CuPy's current stream on a CUDA device (created once per stream)."""
    import cupy  # noqa: PLC0415  (a CUDA device means CuPy arrays: backend.py)

    handle = int(cupy.cuda.get_current_stream().ptr)
    key = (device, handle)
    stream = _external_streams.get(key)
    if stream is None:
        stream = wp.Stream(device, cuda_stream=handle)
        _external_streams[key] = stream
    return stream


def on_device_stream(device: str):
    """Context for Warp calls that are not launches (``wp.Bvh`` build and refit, ``wp.Mesh``): on CUDA they
    run in CuPy's current stream too; on the CPU nothing changes."""
    if device == "cpu":
        return contextlib.nullcontext()
    return wp.ScopedStream(_stream_for(device))


def launch(kernel, dim: int, inputs: list, device: str) -> None:
    """``wp.launch`` on ``device``; on CUDA in CuPy's current stream, so a kernel is ordered with the CuPy
    work that produced its inputs and with the CuPy work that reads its outputs (and CuPy's stream-ordered
    memory pool never reuses an input before the kernel ran). On the CPU through ``cpu_launch.lean_launch``
    (the same kernel call without ``wp.launch``'s per-call packing) where it applies."""
    if dim == 0:
        return
    if device == "cpu":
        if not lean_launch(kernel, dim, inputs):
            wp.launch(kernel, dim=dim, inputs=inputs, device=device)
        return
    wp.launch(kernel, dim=dim, inputs=inputs, device=device, stream=_stream_for(device))


def capture(device: str, record):
    """Capture the kernel launches that ``record()`` makes as a graph, without running them: returns (graph,
    record's return value). Replay with :func:`replay`. On CUDA the launches are captured on a stream of their
    own, made CuPy's current stream while recording so that ``launch`` sends them there (CuPy's default stream
    cannot be captured); on the CPU Warp records them and replays them in C++ (no Python per launch). The
    arrays the launches use must outlive the graph, and ``record`` must make nothing but launches (no array
    allocation, no host synchronization)."""
    ensure_initialized()
    if device == "cpu":
        wp.capture_begin(device="cpu")
        try:
            with recording_graph():
                value = record()
        finally:
            graph = wp.capture_end(device="cpu")
        return graph, value
    import cupy  # noqa: PLC0415  (a CUDA device means CuPy arrays: backend.py)

    capture_stream = cupy.cuda.Stream(non_blocking=True)
    with capture_stream:
        stream = _stream_for(device)
        wp.capture_begin(stream=stream)
        try:
            value = record()
        finally:
            graph = wp.capture_end(stream=stream)
    graph._tangle_stream = capture_stream   # the handle Warp's wrapper names stays valid with the graph
    return graph, value


def replay(graph, device: str) -> None:
    """Run a graph of :func:`capture` once: on CUDA in CuPy's current stream (ordered with the CuPy work
    that wrote its inputs and reads its outputs), on the CPU now."""
    if device == "cpu":
        wp.capture_launch(graph)
        return
    wp.capture_launch(graph, stream=_stream_for(device))


def repeat_while(running, body, device: str) -> None:
    """Run ``body()`` (kernel launches only, which must update the flag) while ``running[0]`` (a Warp int32
    array on ``device``) is non-zero. Inside :func:`capture` on CUDA the loop is a graph while-node: it runs on
    the device with no host synchronization (CUDA 12.4+, see :func:`device_loops`); elsewhere every test reads
    the flag (on CUDA a synchronization per round, on the CPU a memory read)."""
    if device == "cpu":
        wp.capture_while(running, body)
        return
    wp.capture_while(running, body, stream=_stream_for(device))


def device_loops(device: str) -> bool:
    """Whether a graph of :func:`capture` on ``device`` may hold :func:`repeat_while` loops (the CPU's recorded
    replay always; CUDA with a 12.4+ driver and toolkit: conditional graph nodes)."""
    ensure_initialized()
    return device == "cpu" or bool(wp.is_conditional_graph_supported())


_CUDA_LAYOUT = contextvars.ContextVar("tangle_cuda_layout", default=False)


@contextlib.contextmanager
def cuda_layout():
    """Within the block, ``launch_items`` and ``launch_split`` use CUDA's layout on every device (a thread per
    item, one launch per kernel): ``--device cuda-emulated`` runs the CUDA code paths on the CPU this way."""
    token = _CUDA_LAYOUT.set(True)
    try:
        yield
    finally:
        _CUDA_LAYOUT.reset(token)


def cuda_layout_on(device: str) -> bool:
    """Whether launches on ``device`` take CUDA's layout now: on a CUDA device, and inside ``cuda_layout``."""
    return device != "cpu" or _CUDA_LAYOUT.get()


SPLIT_MIN_ITEMS = 4096   # a CPU launch_items(split=True) is cut over threads from this many items per thread
# the least work [s] a CPU range must carry to be worth a pool thread (a wake-up and a join cost ~0.05–0.1 ms; on a
# 2-vCPU box whose vCPUs share a core, short kernels ran 1.2–4× slower cut in two than on one thread)
SPLIT_RANGE_SECONDS = 2e-4
SPLIT_SAMPLES = 3        # one-thread launches timed per kernel before its work per item is trusted
LAUNCH_SECONDS = 5e-5    # a CPU launch's own host time (argument packing, dispatch), taken off a timing's work
# launch_split's min_items for kernels that query a tree per item (~0.3–1 µs each on the CPU): a range of this many
# runs a few tenths of a millisecond, several times a pool thread's wake-up
QUERY_MIN_ITEMS = 1024


def launch_items(kernel, count: int, device: str, inputs_before: list, inputs_after: list,
                 per_item: bool | None = None, split: bool = False) -> None:
    """``kernel`` over ``count`` items whose parameter list has two ``int``s, ``first`` and ``chunk``, between
    ``inputs_before`` and ``inputs_after``; thread t handles items [first + t·chunk, first + (t + 1)·chunk),
    clipped to the items. On CUDA one thread per item (first = 0, chunk = 1); on the CPU one thread loops over
    all of them (Warp's CPU backend runs threads one after another at ~20 ns each: a loop in one thread costs
    a few ns per item). One source, same arithmetic.
    split: the items write only their own outputs (no atomics, no shared counters): on the CPU the items are
    cut into up to ``cpu_kernel_threads()`` contiguous ranges (at least SPLIT_MIN_ITEMS each), one launch per
    range at once from the thread pool (as ``launch_split``); each range gives the numbers one launch gives.
    per_item: force the layout (tests run the CUDA layout on the CPU to compare the two); by default CUDA's on
    a CUDA device and inside ``cuda_layout``."""
    if count == 0:
        return
    if per_item is None:
        per_item = cuda_layout_on(device)
    if per_item:
        launch(kernel, count, inputs=_per_item_inputs(inputs_before, inputs_after), device=device)
        return
    threads = _worth_splitting(kernel, count, min(cpu_kernel_threads(), count // SPLIT_MIN_ITEMS)) if split else 1
    if threads <= 1:
        _timed(kernel, count, split, lambda: launch(kernel, 1, inputs=[*inputs_before, 0, count, *inputs_after],
                                                    device=device))
        return
    _launch_ranges(kernel, count, threads, device,
                   lambda low, high: (1, [*inputs_before, low, high - low, *inputs_after]))


def _per_item_inputs(inputs_before: list, inputs_after: list) -> list:
    """The arguments of ``launch_items``'s CUDA layout: one thread per item (first = 0, chunk = 1)."""
    return [*inputs_before, 0, 1, *inputs_after]


def recorded_items(kernel, count: int, device: str, inputs_before: list, inputs_after: list):
    """``launch_items`` in the CUDA layout (a thread per item) with its arguments packed once: returns a
    function of no arguments that launches it, on CUDA in CuPy's current stream. For a launch repeated with
    the same arrays (a round of strain-limit passes): Warp's argument packing is most of a launch's ~0.1 ms
    of host time. The arrays must outlive the returned function."""
    if count == 0:
        return lambda: None
    command = wp.launch(kernel, dim=count, inputs=_per_item_inputs(inputs_before, inputs_after), device=device,
                        record_cmd=True)
    if device == "cpu":
        return command.launch
    stream = _stream_for(device)
    return lambda: command.launch(stream=stream)


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def cpu_kernel_threads() -> int:
    """How many CPU threads ``launch_split`` and ``launch_items(split=True)`` use at most: ``$TANGLE_KERNEL_THREADS``
    when set (then every launch with enough items is cut into that many), else the cores this process may run on
    (then a launch is cut only into ranges worth a thread: ``_worth_splitting``)."""
    configured = os.environ.get("TANGLE_KERNEL_THREADS")
    if configured:
        return max(1, int(configured))
    return max(1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1))


def _thread_pool(threads: int) -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < threads:
            _pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tangle-kernel")
        return _pool


def launch_split(kernel, count: int, device: str, inputs_before: list, inputs_after: list,
                 threads: int | None = None, min_items: int = 1) -> None:
    """``kernel`` over ``count`` independent items whose parameter list has an ``int`` ``first`` between
    ``inputs_before`` and ``inputs_after``; thread t of a launch handles item first + t. On CUDA one launch
    (first = 0). On the CPU the items are cut into ``threads`` (default ``cpu_kernel_threads()``) contiguous
    ranges launched at once from a pool of Python threads: Warp's CPU backend runs a launch on one core and
    releases the GIL while it runs. Items must not write each other's data (each range gives the same
    numbers as one launch). Inside ``cuda_layout`` one launch, as on CUDA. min_items: the fewest items a CPU
    range gets (a range's wake-up on a pool thread costs ~0.1 ms: short launches stay on one thread)."""
    if count == 0:
        return
    wanted = cpu_kernel_threads() if threads is None else threads
    layout = cuda_layout_on(device)
    threads = 1 if layout else _worth_splitting(kernel, count, min(count // max(min_items, 1), wanted))
    if threads <= 1:
        _timed(kernel, count, not layout,
               lambda: launch(kernel, count, inputs=[*inputs_before, 0, *inputs_after], device=device))
        return
    _launch_ranges(kernel, count, threads, device,
                   lambda low, high: (high - low, [*inputs_before, low, *inputs_after]))


# per kernel: its one-thread launches' wall time per item [s], at most SPLIT_SAMPLES of them
_item_seconds: dict[str, list[float]] = {}


def _worth_splitting(kernel, count: int, threads: int) -> int:
    """How many CPU ranges a launch of ``count`` items cut into at most ``threads`` is worth: as many as carry
    SPLIT_RANGE_SECONDS of work each, by the kernel's fastest timed one-thread launch per item; 1 until it has
    SPLIT_SAMPLES of those; ``threads`` itself where ``$TANGLE_KERNEL_THREADS`` sets the count. Ranges give the
    numbers one launch gives, so this changes only the time."""
    if threads <= 1 or os.environ.get("TANGLE_KERNEL_THREADS"):
        return threads                      # a configured thread count cuts every launch (tests compare the cuts)
    samples = _item_seconds.get(kernel.key)
    if samples is None or len(samples) < SPLIT_SAMPLES:
        return 1
    return max(1, min(threads, int(min(samples) * count / SPLIT_RANGE_SECONDS)))


def _timed(kernel, count: int, splittable: bool, run) -> None:
    """``run()``, a one-thread CPU launch of ``kernel`` over ``count`` items, timed for ``_worth_splitting`` while
    the kernel has fewer than SPLIT_SAMPLES timings (``splittable``: a launch that could have been cut)."""
    samples = _item_seconds.setdefault(kernel.key, []) if splittable else None
    if samples is None or len(samples) >= SPLIT_SAMPLES:
        run()
        return
    started = time.perf_counter()
    run()
    samples.append(max(time.perf_counter() - started - LAUNCH_SECONDS, 0.0) / count)


def _launch_ranges(kernel, count: int, threads: int, device: str, dim_and_inputs) -> None:
    """Items [0, count) cut into ``threads`` contiguous ranges launched at once with ``dim_and_inputs(low, high)
    -> (dim, inputs)``: the first on the calling thread (a pool thread's wake-up costs ~0.1 ms, the size of a
    short launch), the others from the thread pool; returns when all have run."""
    bounds = [count * part // threads for part in range(threads + 1)]
    ranges = [(low, high) for low, high in zip(bounds[:-1], bounds[1:]) if high > low]
    pool = _thread_pool(max(len(ranges) - 1, 1))
    futures = []
    for low, high in ranges[1:]:
        dim, inputs = dim_and_inputs(low, high)
        futures.append(pool.submit(launch, kernel, dim, inputs, device))
    dim, inputs = dim_and_inputs(*ranges[0])
    try:
        launch(kernel, dim, inputs, device)
    finally:
        for future in futures:
            future.result()

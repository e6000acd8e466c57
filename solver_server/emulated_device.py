"""``--device cuda-emulated``: the CUDA code paths on Warp's CPU device, with arrays that refuse what CuPy's refuse.

:func:`emulated_cuda_backend` returns a :class:`~solver_server.backend.Backend` named ``"cuda-emulated"`` (so
every ``backend.name != "cpu"`` device branch in the solvers runs) whose ``xp`` hands out :class:`DeviceArray`
objects instead of numpy arrays, and whose kernels launch in CUDA's layouts (a thread per item, one launch per
kernel: ``kernels.interop.cuda_layout``). Every session can test the CUDA paths without a GPU. A DeviceArray
wraps a numpy array but:

- refuses implicit conversion to numpy (``np.asarray(a)``, ``np.array(a)``, ``float(a)`` of a non-scalar,
  scipy functions): ``__array__`` raises, as CuPy's ``ndarray.__array__`` does;
- refuses numpy *functions* (``np.concatenate``, ``np.linalg.norm``, ``np.where`` ...) through
  ``__array_function__``: solver code must call ``xp.<name>`` (CuPy dispatches those, but only for the
  functions it implements, and the solvers must not import numpy for device math anyway);
- refuses arithmetic, ufuncs, ``xp`` calls and item assignment that mix it with a host ``numpy.ndarray``
  (CuPy raises ``TypeError: Unsupported type <class 'numpy.ndarray'>``); numpy ufuncs on device arrays
  only are allowed (CuPy implements ``__array_ufunc__``); Python and numpy scalars mix freely;
- accepts numpy integer/boolean arrays as indices (CuPy copies them to the device);
- inside :func:`substep_guard` (``Simulation`` runs every group's substep in it on this backend) refuses every
  device -> host array copy (``.get()``, ``xp.asnumpy``, ``backend.to_host``): the design allows those only at
  frame boundaries. Synchronizations that are not array copies are counted in :data:`SYNCS`: scalar
  conversions (``float``/``int``/``bool``, ``.item()``, ``.tolist()``), boolean-mask indexing and the functions
  that read device data back to size their output (:data:`HOST_READS`), as on CuPy; host -> device uploads in
  :data:`HOST_TO_DEVICE` (small per-substep drive data is allowed) and every array operation (an ``xp`` call,
  an operator, indexing: on CuPy a launch or an allocation driven from Python) in :data:`OPERATIONS`.

``xp`` is numpy behind a filter: host arrays are accepted only by the upload functions
(``asarray``, ``array``, ``asanyarray``), ``asnumpy`` is the download, and the names in
:data:`NOT_IN_CUPY` are missing. ``sparse`` wraps scipy.sparse so that matrices built from host
data are "uploaded" and ``matrix @ x`` only takes device vectors. ``factorized`` solves with the CPU's
factorization, counted as one device operation (cholespy solves on the GPU on ``--device cuda``).
"""

from __future__ import annotations

import contextlib
import numbers
import operator
import threading
from typing import Any

import numpy as np
import scipy.sparse

from .backend import Backend
from .kernels import cuda_layout

# numpy functions CuPy (13.x) does not provide; solver code must not use them on device arrays.
NOT_IN_CUPY = frozenset({
    "fromiter", "frompyfunc", "nditer", "vectorize", "apply_over_axes", "piecewise", "ndenumerate",
    "ndindex", "asmatrix", "matrix", "object_", "str_", "genfromtxt", "loadtxt", "save", "load",
})


class PortabilityError(AssertionError):
    """Solver code did something CuPy arrays refuse (CuPy raises TypeError; numpy swallows TypeError from
    ``__array__``, so this is an AssertionError)."""


_PHASE = threading.local()   # .inside: the substep this thread runs (a job's worker thread), or unset between substeps


def current_substep() -> str | None:
    """The substep the calling thread is inside (its ``substep_guard`` description), or None."""
    return getattr(_PHASE, "inside", None)


# counted over every thread: substep description -> count
SYNCS: dict[str, int] = {}  # substep description -> device -> host synchronizations counted inside it
HOST_TO_DEVICE: dict[str, int] = {}  # substep description -> uploads (xp.asarray of host data, from_host) inside it
OPERATIONS: dict[str, int] = {}  # substep description -> array operations (xp calls, operators, indexing) inside it
# xp functions that synchronize on CuPy, with the host reads each makes: those whose output size depends on the
# values, and bincount, which reads whether any key is negative and the largest key even with a minlength
HOST_READS = {"nonzero": 1, "flatnonzero": 1, "argwhere": 1, "unique": 1, "extract": 1, "compress": 1, "bincount": 2}


@contextlib.contextmanager
def _for_this_thread(name: str, value):
    """``_PHASE.<name>`` set to ``value`` on the calling thread while the block runs."""
    outer = getattr(_PHASE, name, None)
    setattr(_PHASE, name, value)
    try:
        yield
    finally:
        setattr(_PHASE, name, outer)


def substep_guard(where: str):
    """Refuse device -> host array copies while the block runs (one solver substep, ``where`` names it)."""
    return _for_this_thread("inside", where)


def outside_substep():
    """Within the block the calling thread counts as between substeps (a diagnostic that reads a solver's state after
    each substep of a frame, ``tests/portability/first_divergence.py``)."""
    return _for_this_thread("inside", None)


def _download(what: str) -> None:
    where = current_substep()
    if where is not None:
        raise PortabilityError(f"{what}: a device -> host array copy inside a substep ({where}); the design "
                               "allows host <-> device copies only at frame boundaries")


def refusing_synchronizations():
    """Within the block (on the calling thread), a host synchronization inside a substep raises PortabilityError at
    the line that makes it instead of being counted: the complete guard, for code that must have none."""
    return _for_this_thread("refusing", True)


def _count(table: dict[str, int]) -> None:
    """One more in ``table`` for the substep the calling thread is inside (none between substeps)."""
    where = current_substep()
    if where is not None:
        table[where] = table.get(where, 0) + 1


def _synchronize() -> None:
    if current_substep() is not None and getattr(_PHASE, "refusing", None):
        raise PortabilityError(f"a host synchronization (a scalar read, a boolean mask, a data-sized output) inside "
                               f"a substep that must have none ({current_substep()})")
    _count(SYNCS)


def _operation() -> None:
    """One array operation (on CuPy a kernel launch or an allocation driven from Python)."""
    _count(OPERATIONS)


def _upload() -> None:
    _count(HOST_TO_DEVICE)


def _count_mask(key) -> None:
    """Indexing with a device boolean mask synchronizes on CuPy (the result size is data-dependent)."""
    keys = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, DeviceArray) and k.dtype == bool for k in keys):
        _synchronize()


def _is_host_array(value) -> bool:
    return isinstance(value, np.ndarray)


def _unwrap(value, *, allow_host: bool, where: str):
    """DeviceArray -> numpy (recursively in lists/tuples/dicts); host ndarray refused unless allowed."""
    if isinstance(value, DeviceArray):
        return value._data
    if isinstance(value, DeviceSparse):
        return value._matrix
    if _is_host_array(value) and value.ndim > 0 and not allow_host:
        raise PortabilityError(f"{where}: a host numpy array {value.shape} {value.dtype} was mixed into device "
                               "math (CuPy raises TypeError); upload it once with backend.from_host / xp.asarray")
    if isinstance(value, (list, tuple)):
        items = [_unwrap(item, allow_host=allow_host, where=where) for item in value]
        return type(value)(items) if isinstance(value, tuple) else items
    return value


def _wrap(value):
    if isinstance(value, np.ndarray) and not isinstance(value, np.matrix):
        return DeviceArray(value)
    if isinstance(value, np.generic):  # CuPy reductions return 0-d device arrays, not numpy scalars
        return DeviceArray(np.asarray(value))
    if isinstance(value, tuple):
        return tuple(_wrap(item) for item in value)
    if isinstance(value, list):
        return [_wrap(item) for item in value]
    if scipy.sparse.issparse(value):
        return DeviceSparse(value)
    return value


def _index(key):
    """Indices: device arrays unwrap; numpy index arrays are allowed (CuPy copies them to the device)."""
    return _unwrap(key, allow_host=True, where="indexing")


class DeviceArray:
    """A numpy array pretending to live on a GPU (see the module docstring)."""

    __slots__ = ("_data",)
    __array_priority__ = 1000.0
    created = 0  # how many device arrays were made: proves a run really went through this backend

    def __init__(self, data: np.ndarray):
        self._data = data
        DeviceArray.created += 1

    # --- kernels ---------------------------------------------------------------------------------
    def __dlpack__(self, stream=None):
        """Zero-copy hand-over to a kernel (warp.from_dlpack), as CuPy arrays do: not a host copy."""
        return self._data.__dlpack__()

    def __dlpack_device__(self):
        return self._data.__dlpack_device__()

    # --- refusals -------------------------------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise PortabilityError("implicit conversion of a device array to numpy (np.asarray / np.array / a scipy "
                               "call on it); CuPy refuses this: use backend.to_host at the frame boundary")

    def __array_function__(self, func, types, args, kwargs):
        raise PortabilityError(f"numpy.{func.__name__} was called on a device array; call xp.{func.__name__} "
                               "(solver code must not import numpy for device math)")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        where = f"numpy.{ufunc.__name__}.{method}"
        _operation()
        raw = _unwrap(list(inputs), allow_host=False, where=where)
        if "out" in kwargs:
            kwargs["out"] = _unwrap(kwargs["out"], allow_host=False, where=where)
        result = getattr(ufunc, method)(*raw, **kwargs)
        if method == "at":
            return None
        if "out" in kwargs:  # numpy wrote into the wrapped buffers: hand back the caller's objects
            outs = kwargs_out = tuple(o for o in (kwargs_out_objects(inputs, kwargs)))
            return outs[0] if len(kwargs_out) == 1 else outs
        return _wrap(result)

    # --- attributes and methods -----------------------------------------------------------------
    def __getattr__(self, name):
        if name.startswith("__"):  # no __array_interface__ / __array_struct__ / __dlpack__ back doors to numpy
            raise AttributeError(name)
        attribute = getattr(self._data, name)
        if callable(attribute):
            def method(*args, **kwargs):
                _operation()
                raw_args = _unwrap(list(args), allow_host=False, where=f"ndarray.{name}")
                raw_kwargs = {k: _unwrap(v, allow_host=False, where=f"ndarray.{name}") for k, v in kwargs.items()}
                return _wrap(attribute(*raw_args, **raw_kwargs))
            return method
        return _wrap(attribute)

    def tolist(self):
        """Values read back to Python (CuPy synchronizes): counted inside a substep like ``float``."""
        _synchronize()
        return self._data.tolist()

    def item(self):
        """One value read back (CuPy synchronizes): counted inside a substep like ``float``."""
        _synchronize()
        return self._data.item()

    def get(self) -> np.ndarray:
        """CuPy's device -> host copy."""
        _download("DeviceArray.get()")
        return self._data.copy()

    def __repr__(self):
        return f"DeviceArray({self._data!r})"

    def __len__(self):
        return len(self._data)

    def __iter__(self):
        return (_wrap(item) for item in self._data)

    def __bool__(self):
        _synchronize()
        return bool(self._data)

    def __float__(self):
        _synchronize()
        return float(self._data)

    def __int__(self):
        _synchronize()
        return int(self._data)

    def __index__(self):
        _synchronize()
        return operator.index(self._data)

    def __complex__(self):
        return complex(self._data)

    def __getitem__(self, key):
        _operation()
        _count_mask(key)
        return _wrap(self._data[_index(key)])

    def __setitem__(self, key, value):
        _operation()
        _count_mask(key)
        self._data[_index(key)] = _unwrap(value, allow_host=False, where="item assignment")

    @property
    def T(self):
        return DeviceArray(self._data.T)

    @property
    def shape(self):
        return self._data.shape

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def ndim(self):
        return self._data.ndim

    @property
    def size(self):
        return self._data.size


def kwargs_out_objects(inputs, kwargs):
    """The DeviceArray objects whose buffers were passed as ``out=``."""
    raw_out = kwargs["out"] if isinstance(kwargs["out"], tuple) else (kwargs["out"],)
    return tuple(DeviceArray(buffer) for buffer in raw_out)


def _binary(op, reflected=False):
    def method(self, other):
        if isinstance(other, DeviceSparse):
            return NotImplemented
        _operation()
        raw = _unwrap(other, allow_host=False, where=f"operator {op.__name__}")
        return _wrap(op(raw, self._data) if reflected else op(self._data, raw))
    return method


def _inplace(op):
    def method(self, other):
        _operation()
        raw = _unwrap(other, allow_host=False, where=f"operator {op.__name__}")
        self._data = op(self._data, raw)
        return self
    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or", "xor",
              "lshift", "rshift"):
    _op = getattr(operator, _name if _name not in ("and", "or") else _name + "_")
    setattr(DeviceArray, f"__{_name}__", _binary(_op))
    setattr(DeviceArray, f"__r{_name}__", _binary(_op, reflected=True))
    setattr(DeviceArray, f"__i{_name}__", _inplace(getattr(operator, f"i{_name}")))
for _name in ("lt", "le", "gt", "ge", "eq", "ne"):
    setattr(DeviceArray, f"__{_name}__", _binary(getattr(operator, _name)))
for _name in ("neg", "pos", "abs", "invert"):
    setattr(DeviceArray, f"__{_name}__", (lambda op: lambda self: (_operation(), _wrap(op(self._data)))[1])(
        getattr(operator, _name)))
DeviceArray.__hash__ = None  # arrays are unhashable (as numpy/cupy)


class _UfuncProxy:
    """xp.add etc.: callable plus .at/.reduce/.accumulate/.outer, all device-only."""

    def __init__(self, ufunc):
        self._ufunc = ufunc

    def __call__(self, *args, **kwargs):
        return _call(self._ufunc, self._ufunc.__name__, args, kwargs, allow_host=False)

    def __getattr__(self, name):
        attribute = getattr(self._ufunc, name)
        if not callable(attribute):
            return attribute

        def method(*args, **kwargs):
            return _call(attribute, f"{self._ufunc.__name__}.{name}", args, kwargs, allow_host=False,
                         index_positions=(1,) if name == "at" else ())
        return method


def _call(function, name, args, kwargs, *, allow_host, index_positions=(), counted: bool = True):
    where = f"xp.{name}"
    if counted:
        _operation()
    raw_args = [(_index(a) if i in index_positions else _unwrap(a, allow_host=allow_host, where=where))
                for i, a in enumerate(args)]
    raw_kwargs = {k: _unwrap(v, allow_host=allow_host, where=where) for k, v in kwargs.items()}
    result = function(*raw_args, **raw_kwargs)
    return _wrap(result)


UPLOADS = frozenset({"asarray", "array", "asanyarray"})
# conversions that hand back their device-array argument itself when it already has the asked dtype and layout:
# CuPy launches and allocates nothing then, so only a call that made a new array counts as an operation
PASS_THROUGH = frozenset({"asarray", "ascontiguousarray"})


def _check_repeat(args, kwargs):
    repeats = kwargs.get("repeats", args[1] if len(args) > 1 else None)
    if isinstance(repeats, DeviceArray):
        raise PortabilityError("xp.repeat with a device array of repeats: CuPy accepts only an int or host "
                               "list there; use solver_server.backend.repeat_each")


# CuPy functions that exist but refuse arguments numpy accepts
SIGNATURE_CHECKS = {"repeat": _check_repeat}


class DeviceNamespace:
    """numpy behind the device filter (see the module docstring)."""

    def __init__(self, module=np, prefix=""):
        self._module = module
        self._prefix = prefix

    def __getattr__(self, name):
        if name in NOT_IN_CUPY:
            raise AttributeError(f"xp.{self._prefix}{name} does not exist in CuPy")
        attribute = getattr(self._module, name)
        if isinstance(attribute, type) or isinstance(attribute, (numbers.Number, str)) or attribute is None:
            return attribute
        if isinstance(attribute, np.ufunc):
            return _UfuncProxy(attribute)
        if isinstance(attribute, type(np)):
            return DeviceNamespace(attribute, f"{self._prefix}{name}.")
        if callable(attribute):
            allow_host = name in UPLOADS and not self._prefix

            check = SIGNATURE_CHECKS.get(name) if not self._prefix else None

            host_reads = 0 if self._prefix else HOST_READS.get(name, 0)

            def function(*args, **kwargs):
                if check is not None:
                    check(args, kwargs)
                for _ in range(host_reads):
                    _synchronize()
                if allow_host and args and not isinstance(args[0], DeviceArray):
                    _upload()
                if name in PASS_THROUGH and not self._prefix and args and isinstance(args[0], DeviceArray):
                    result = _call(attribute, name, args, kwargs, allow_host=allow_host, counted=False)
                    if isinstance(result, DeviceArray) and result._data is args[0]._data:
                        return args[0]            # CuPy hands back the argument itself
                    _operation()
                    return result
                return _call(attribute, self._prefix + name, args, kwargs, allow_host=allow_host)
            return function
        return attribute

    @staticmethod
    def asnumpy(array) -> np.ndarray:
        """CuPy's device -> host copy."""
        if isinstance(array, DeviceArray):
            _download("xp.asnumpy")
            return array._data.copy()
        return np.asarray(array)


class DeviceSparse:
    """A scipy sparse matrix "on the device": products take and give device arrays only."""

    __array_priority__ = 2000.0

    def __init__(self, matrix):
        self._matrix = matrix

    def __matmul__(self, other):
        return _wrap(self._matrix @ _unwrap(other, allow_host=False, where="sparse @"))

    def __rmatmul__(self, other):
        return _wrap(_unwrap(other, allow_host=False, where="@ sparse") @ self._matrix)

    def dot(self, other):
        return self @ other

    def __add__(self, other):
        return _wrap(self._matrix + _unwrap(other, allow_host=False, where="sparse +"))

    __radd__ = __add__

    def __sub__(self, other):
        return _wrap(self._matrix - _unwrap(other, allow_host=False, where="sparse -"))

    def __mul__(self, other):
        return _wrap(self._matrix * _unwrap(other, allow_host=False, where="sparse *"))

    __rmul__ = __mul__

    def __neg__(self):
        return DeviceSparse(-self._matrix)

    @property
    def T(self):
        return DeviceSparse(self._matrix.T)

    @property
    def shape(self):
        return self._matrix.shape

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        attribute = getattr(self._matrix, name)
        if callable(attribute):
            def method(*args, **kwargs):
                return _call(attribute, f"sparse.{name}", args, kwargs, allow_host=False)
            return method
        return _wrap(attribute)


class DeviceSparseNamespace:
    """cupyx.scipy.sparse stand-in: constructors accept host scipy matrices (upload) or device arrays."""

    def __getattr__(self, name):
        attribute = getattr(scipy.sparse, name)
        if not callable(attribute) or isinstance(attribute, type) and not name.endswith(("_matrix", "_array")):
            return attribute

        def constructor(*args, **kwargs):
            raw = [a._matrix if isinstance(a, DeviceSparse) else a for a in args]
            if raw and scipy.sparse.issparse(raw[0]):
                return DeviceSparse(attribute(raw[0], *raw[1:], **kwargs))
            return _call(attribute, f"sparse.{name}", raw, kwargs, allow_host=False)
        return constructor


class EmulatedCudaBackend(Backend):
    """Backend whose arrays behave like CuPy's where it matters for portability and whose kernels launch in CUDA's
    layouts (module docstring)."""

    def substep_scope(self, where: str):
        """Around one group's substep: the download guard (named ``where``) and CUDA's launch layouts."""
        return _guarded_in_cuda_layout(where)

    def to_host(self, array) -> np.ndarray:
        if not isinstance(array, DeviceArray):
            raise PortabilityError(f"backend.to_host got a {type(array).__name__}, not a device array")
        _download("backend.to_host")
        return array._data.copy()

    def from_host(self, array, dtype=None):
        if isinstance(array, DeviceArray):
            raise PortabilityError("backend.from_host got a device array (it is already on the device)")
        _upload()
        array = np.asarray(array)
        if dtype is not None:
            array = array.astype(dtype, copy=False)
        return DeviceArray(array.copy())

    def factorized(self, matrix):
        """The CPU's factorization (CHOLMOD through cholespy, as ``--device cuda`` uses on the GPU), its solve one
        device operation on device arrays with no synchronization, as cholespy's CUDA solve is."""
        if isinstance(matrix, DeviceSparse):
            matrix = matrix._matrix
        host_solve = Backend(name="cpu", xp=np, sparse=scipy.sparse).factorized(matrix)

        def solve(rhs):
            _operation()
            return DeviceArray(np.asarray(host_solve(_unwrap(rhs, allow_host=False, where="factorized solve"))))
        return solve

    def device_info(self) -> dict:
        return {"name": "CUDA emulated on the CPU (--device cuda-emulated)", "memory_bytes": 0}


@contextlib.contextmanager
def _guarded_in_cuda_layout(where: str):
    with substep_guard(where), cuda_layout():
        yield


def emulated_cuda_backend() -> EmulatedCudaBackend:
    return EmulatedCudaBackend(name="cuda-emulated", xp=DeviceNamespace(), sparse=DeviceSparseNamespace())

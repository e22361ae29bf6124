"""A strict stand-in for CuPy on the CPU, for the test suite only (raymod never imports it).

``tests/conftest.py`` installs it as ``sys.modules["cupy"]`` when real CuPy is missing or sees
no CUDA device, so the ``gpu`` half of every ``ctx``-parametrised test runs raymod's CuPy code
path here and numpy / CuPy mixing fails in CI as it would on a GPU.

An :class:`ndarray` holds a numpy array (``_host``) but is *not* a ``numpy.ndarray``.

CuPy rules it mirrors
---------------------
- No implicit conversion to numpy: ``np.asarray(x)``, ``np.array(x)`` and ``x.__array__()``
  raise ``TypeError`` (CuPy's message: use ``.get()``).
- A ``numpy.ndarray`` operand (0-d ones too) in an operator, a ufunc (``np.exp(x)`` dispatches
  here through ``__array_ufunc__``), a numpy function (``__array_function__``) or a ``cupy.*``
  function raises ``TypeError``; Python and numpy *scalars* are accepted.
- ``x[...] = host_array`` with a non-scalar numpy array, a list or a tuple raises (CuPy writes
  non-CuPy values with ``fill``, which takes scalars only);
  numpy arrays *as indices* are accepted, as CuPy accepts them.
- Host to device is explicit and allowed: ``cupy.asarray`` / ``cupy.array`` /
  ``cupy.ascontiguousarray`` / ``x.set``. Device to host: ``cupy.asnumpy``, ``x.get()``, and the
  syncing scalar conversions ``float(x)``, ``int(x)``, ``bool(x)``, ``x.item()``, ``x.tolist()``.
- Reductions and integer indexing give 0-d arrays, never numpy scalars.
- ``cuda.Device(i)`` (a context manager, ``.id``), ``cuda.runtime.getDeviceCount()`` (1),
  ``getDevice()``, ``get_current_stream().synchronize()``; ``random`` with numpy's functions
  and ``RandomState``; ``get_array_module``.

CuPy rules it does not mirror
-----------------------------
- Devices, streams and asynchrony: everything runs at once on one "device" 0.
- CuPy's own dtype promotion and kernel set: results are numpy's, and a numpy function CuPy lacks
  still works here.
- ``cupy.fuse``, ``ElementwiseKernel``, ``RawKernel``, cuDNN/cuBLAS handles (raymod uses none).
"""
from __future__ import annotations

import sys
import types

import numpy as np

_HOST_INPUT_OK = frozenset({"asarray", "array", "asanyarray", "ascontiguousarray"})


def _refuse_host(value) -> None:
    raise TypeError(f"Unsupported type {type(value)!r}: a numpy.ndarray operand met a (stand-in) "
                    "CuPy array; move it with cupy.asarray(...) or bring the CuPy one to the "
                    "host with .get()")


def _unwrap(value):
    """The numpy value behind ``value``; numpy arrays are refused, as CuPy refuses them."""
    if isinstance(value, ndarray):
        return value._host
    if isinstance(value, np.ndarray):
        _refuse_host(value)
    if type(value) in (list, tuple):
        return type(value)(_unwrap(v) for v in value)
    return value


def _wrap(value):
    """numpy arrays and numpy scalars from a computation become stand-in arrays."""
    if isinstance(value, np.ndarray):
        return ndarray._of(value)
    if isinstance(value, np.generic):
        return ndarray._of(np.asarray(value))
    if type(value) in (list, tuple):
        return type(value)(_wrap(v) for v in value)
    if isinstance(value, (np.random.Generator, np.random.RandomState)):
        return _Namespace(type(value).__name__, value)  # cupy.random.default_rng(...)'s kind
    return value


def _on_device(function):
    """``function`` (numpy's) taking and giving stand-in arrays."""
    def call(*args, **kwargs):
        return _wrap(function(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))
    call.__name__ = getattr(function, "__name__", "function")
    call.__doc__ = getattr(function, "__doc__", None)
    return call


class _Ufunc:
    """``cupy.add`` and the like: callable, with ``.at`` / ``.reduce`` / ``.outer``..."""

    def __init__(self, ufunc: np.ufunc):
        self._ufunc = ufunc
        self._call = _on_device(ufunc)
        self.__name__ = ufunc.__name__

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __getattr__(self, name):
        value = getattr(self._ufunc, name)
        return _on_device(value) if callable(value) else value


def _index(key):
    """An index: stand-in arrays unwrap, numpy arrays pass (CuPy accepts host indices)."""
    if isinstance(key, ndarray):
        return key._host
    if type(key) is tuple:
        return tuple(_index(k) for k in key)
    return key


class ndarray:  # noqa: N801 - CuPy's name
    """A "device" array: a numpy array behind a type that numpy does not take for its own."""

    __array_priority__ = 100.0

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        self._host = np.empty(shape, dtype=dtype, order=order)

    @classmethod
    def _of(cls, host: np.ndarray, kind: type | None = None) -> "ndarray":
        out = object.__new__(kind or cls)
        out._host = host
        return out

    # --- no implicit host conversion -------------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_unwrap_out(o) for o in out)
        result = getattr(ufunc, method)(*_unwrap(inputs), **{k: v if k == "out" else _unwrap(v)
                                                               for k, v in kwargs.items()})
        if out is not None:
            return out[0] if len(out) == 1 else out
        return _wrap(result)

    def __array_function__(self, func, types_, args, kwargs):
        return _wrap(func(*_unwrap(args), **{k: _unwrap(v) for k, v in kwargs.items()}))

    # --- explicit transfers and syncing scalar conversions ----------------------------------
    def get(self, stream=None, order="C", out=None, blocking=True) -> np.ndarray:
        if out is not None:
            out[...] = self._host
            return out
        return np.array(self._host, order=order)

    def set(self, arr, stream=None) -> None:
        if isinstance(arr, ndarray):
            raise TypeError("ndarray.set takes a numpy array")
        self._host[...] = arr

    def item(self, *args):
        return self._host.item(*args)

    def tolist(self):
        return self._host.tolist()

    def __float__(self):
        return float(self._host)

    def __int__(self):
        return int(self._host)

    def __bool__(self):
        return bool(self._host)

    def __complex__(self):
        return complex(self._host)

    def __index__(self):
        return self._host.__index__()

    # --- array surface -------------------------------------------------------------------
    @property
    def device(self) -> "cuda.Device":
        return cuda.Device(0)

    @property
    def shape(self):
        return self._host.shape

    @shape.setter
    def shape(self, value):
        self._host.shape = value

    @property
    def dtype(self):
        return self._host.dtype

    @property
    def ndim(self):
        return self._host.ndim

    @property
    def size(self):
        return self._host.size

    @property
    def T(self):  # noqa: N802 - numpy's name
        return self._of(self._host.T)

    def view(self, dtype=None, kind=None):
        """A view with another dtype, or as a subclass (``x.view(SubClass)``)."""
        if isinstance(dtype, type) and issubclass(dtype, ndarray):
            dtype, kind = None, dtype
        host = self._host if dtype is None else self._host.view(dtype)
        return self._of(host, kind)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(self._host, name)
        return _on_device(value) if callable(value) else _wrap(value)

    def __len__(self):
        return len(self._host)

    def __iter__(self):
        return (_wrap(row) for row in self._host)

    def __getitem__(self, key):
        return _wrap(self._host[_index(key)])

    def __setitem__(self, key, value):
        # CuPy writes a non-array value with fill(), which takes scalars and 0-d arrays only
        if isinstance(value, np.ndarray) and value.ndim > 0:
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
        if isinstance(value, (list, tuple)):
            raise TypeError(f"Unsupported type {type(value)!r}: write cupy.asarray(...) instead")
        self._host[_index(key)] = _unwrap(value)

    def __repr__(self):
        return repr(self._host).replace("array", "cupy_standin.array", 1)

    def __str__(self):
        return str(self._host)

    def __reduce__(self):
        # CuPy arrays pickle with their contents (copied through the host)
        return (_rebuild, (type(self), self._host))

    __hash__ = None


def _rebuild(kind, host):
    return ndarray._of(host, kind)


def _unwrap_out(value):
    if isinstance(value, ndarray):
        return value._host
    if value is None:
        return None
    _refuse_host(value)


def _operator(ufunc, reflected=False, inplace=False):
    if inplace:
        return lambda self, other: ufunc(self, other, out=(self,))
    if reflected:
        return lambda self, other: ufunc(other, self)
    return lambda self, other: ufunc(self, other)


for _name, _ufunc in [("add", np.add), ("sub", np.subtract), ("mul", np.multiply),
                      ("truediv", np.true_divide), ("floordiv", np.floor_divide),
                      ("mod", np.remainder), ("pow", np.power), ("matmul", np.matmul),
                      ("and", np.bitwise_and), ("or", np.bitwise_or), ("xor", np.bitwise_xor),
                      ("lshift", np.left_shift), ("rshift", np.right_shift)]:
    setattr(ndarray, f"__{_name}__", _operator(_ufunc))
    setattr(ndarray, f"__r{_name}__", _operator(_ufunc, reflected=True))
    setattr(ndarray, f"__i{_name}__", _operator(_ufunc, inplace=True))
for _name, _ufunc in [("lt", np.less), ("le", np.less_equal), ("gt", np.greater),
                      ("ge", np.greater_equal), ("eq", np.equal), ("ne", np.not_equal)]:
    setattr(ndarray, f"__{_name}__", _operator(_ufunc))
for _name, _ufunc in [("neg", np.negative), ("pos", np.positive), ("abs", np.absolute),
                      ("invert", np.invert)]:
    setattr(ndarray, f"__{_name}__", lambda self, _u=_ufunc: _u(self))
ndarray.__divmod__ = lambda self, other: np.divmod(self, other)


# --- module-level functions ---------------------------------------------------------------
def asarray(a, dtype=None, order=None, **_):
    if isinstance(a, ndarray):
        return a if dtype is None or a.dtype == dtype else a.astype(dtype)
    return ndarray._of(np.asarray(_unwrap_nested_ok(a), dtype=dtype, order=order))


def array(obj, dtype=None, copy=True, order="K", ndmin=0, **_):
    host = obj._host if isinstance(obj, ndarray) else _unwrap_nested_ok(obj)
    return ndarray._of(np.array(host, dtype=dtype, copy=copy, order=order, ndmin=ndmin))


def ascontiguousarray(a, dtype=None):
    host = a._host if isinstance(a, ndarray) else np.asarray(a)
    return ndarray._of(np.ascontiguousarray(host, dtype=dtype))


asanyarray = asarray


def _unwrap_nested_ok(value):
    """A host value for asarray/array: lists of stand-in arrays unwrap (CuPy takes them)."""
    if isinstance(value, ndarray):
        return value._host
    if type(value) in (list, tuple):
        return type(value)(_unwrap_nested_ok(v) for v in value)
    return value


def asnumpy(a, stream=None, order="C", out=None, blocking=True) -> np.ndarray:
    if isinstance(a, ndarray):
        return a.get(order=order, out=out)
    return np.asarray(a, order=order)


def get_array_module(*args) -> types.ModuleType:
    return sys.modules[__name__] if any(isinstance(a, ndarray) for a in args) else np


class _Namespace(types.ModuleType):
    """A numpy (sub)module seen through stand-in arrays: ``cupy.linalg``, ``cupy.random``..."""

    def __init__(self, name: str, source):
        super().__init__(name)
        self._source = source

    def __getattr__(self, name):
        value = getattr(self._source, name)
        if isinstance(value, types.ModuleType):
            value = _Namespace(f"{self.__name__}.{name}", value)
        elif isinstance(value, type) and not issubclass(value, (np.generic, np.dtype)):
            value = _device_class(value)
        elif callable(value) and not isinstance(value, type):
            value = _on_device(value)
        setattr(self, name, value)
        return value


def _device_class(cls: type):
    """A numpy class (``RandomState``) whose instances take and give stand-in arrays."""
    def make(*args, **kwargs):
        return _Namespace(cls.__name__, cls(*_unwrap(args), **kwargs))
    return make


linalg = _Namespace(f"{__name__}.linalg", np.linalg)
fft = _Namespace(f"{__name__}.fft", np.fft)
random = _Namespace(f"{__name__}.random", np.random)


def __getattr__(name):
    """``cupy.<name>``: numpy's, on stand-in arrays (constants and dtypes as they are)."""
    value = getattr(np, name)
    if isinstance(value, types.ModuleType):
        return _Namespace(f"{__name__}.{name}", value)
    if isinstance(value, np.ufunc):
        return _Ufunc(value)
    if callable(value) and not isinstance(value, type):
        return _on_device(value)
    return value


# --- cuda ---------------------------------------------------------------------------------
class _Stream:
    def synchronize(self) -> None:
        pass


class _Device:
    """``cupy.cuda.Device(i)``: one device, 0."""

    def __init__(self, device=None):
        self.id = 0 if device is None else int(device)
        if self.id != 0:
            raise RuntimeError(f"cudaErrorInvalidDevice: the CuPy stand-in has one device, "
                               f"not {self.id}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def use(self) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def __eq__(self, other):
        return isinstance(other, _Device) and other.id == self.id

    def __hash__(self):
        return hash(self.id)

    def __repr__(self):
        return f"<CUDA Device {self.id} (stand-in)>"


cuda = types.ModuleType(f"{__name__}.cuda")
cuda.Device = _Device
cuda.Stream = _Stream
cuda.get_current_stream = lambda: _Stream()
cuda.runtime = types.SimpleNamespace(getDeviceCount=lambda: 1, getDevice=lambda: 0,
                                     getDeviceProperties=lambda i: {"name": b"CuPy stand-in"})
cuda.is_available = lambda: True
IS_STANDIN = True
__version__ = "stand-in"


def install() -> types.ModuleType:
    """Register this module as ``cupy`` (and its ``cuda``/``random`` submodules)."""
    module = sys.modules[__name__]
    sys.modules["cupy"] = module
    sys.modules["cupy.cuda"] = cuda
    sys.modules["cupy.random"] = random
    sys.modules["cupy.linalg"] = linalg
    return module

"""Devices: ``rm.cpu(i)``, ``rm.gpu(i)`` and the one place that maps a device to its array module."""
from __future__ import annotations

import contextlib
import functools
import threading
import types
from typing import Iterator

import numpy as np


class _CurrentContext:
    """``Context.default_ctx``: MXNet's deprecated class-level name of the current context."""

    def __get__(self, obj, owner) -> "Context":
        return current_context()


class Context:
    """A device that arrays live on and executors run on.

    Parameters
    ----------
    device_type : {'cpu', 'gpu'} or Context
        The kind of device.
    device_id : int, default 0
        Which device of that kind. Several CPU contexts share the one host and are used,
        as in MXNet, to split a batch over several executors in one process.

    Notes
    -----
    ``with ctx:`` makes ``ctx`` the thread's :func:`current_context` for the block (blocks
    nest); what takes no context (``Symbol.eval``) then uses it. As in MXNet, defaults fixed
    when a function is defined, such as ``Module(context=cpu())``, do not follow it.
    """

    # per thread, as MXNet's: the contexts entered with ``with``, innermost last
    _entered = threading.local()
    __slots__ = ("device_type", "device_id")
    default_ctx = _CurrentContext()

    def __init__(self, device_type: "str | Context", device_id: int = 0):
        if isinstance(device_type, Context):
            device_type, device_id = device_type.device_type, device_type.device_id
        if device_type not in ("cpu", "gpu", "cpu_pinned"):
            raise ValueError(f"device_type must be 'cpu' or 'gpu', got {device_type!r}")
        if not isinstance(device_id, (int, np.integer)) or device_id < 0:
            raise ValueError(f"device_id must be a non-negative int, got {device_id!r}")
        self.device_type = str(device_type)
        self.device_id = int(device_id)

    @property
    def xp(self) -> types.ModuleType:
        """The array module for this device: numpy for CPU, cupy for GPU."""
        return array_module(self)

    def scope(self) -> contextlib.AbstractContextManager:
        """A context manager that makes this device current for array allocation."""
        if self.device_type != "gpu":
            return contextlib.nullcontext()
        return self.xp.cuda.Device(self.device_id)

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Context) and self.device_type == other.device_type
                and self.device_id == other.device_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    def __enter__(self) -> "Context":
        _entered_stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        _entered_stack().pop()

    def __reduce__(self):
        return (Context, (self.device_type, self.device_id))


def cpu(device_id: int = 0) -> Context:
    """A CPU context. ``device_id`` tells apart executors sharing the host."""
    return Context("cpu", device_id)


def gpu(device_id: int = 0) -> Context:
    """A GPU context. Arrays on it are CuPy arrays; using it needs CuPy and a CUDA device."""
    return Context("gpu", device_id)


def _entered_stack() -> list:
    """This thread's stack of contexts entered with ``with ctx:``."""
    stack = getattr(Context._entered, "stack", None)
    if stack is None:
        stack = Context._entered.stack = []
    return stack


def current_context() -> Context:
    """The context of the innermost ``with ctx:`` block of this thread, else ``cpu(0)``."""
    stack = _entered_stack()
    return stack[-1] if stack else cpu(0)


@functools.lru_cache(maxsize=None)
def _cupy() -> types.ModuleType:
    try:
        import cupy
    except ImportError as err:
        raise RuntimeError("a GPU context needs CuPy, which is not installed "
                           "(pip install 'raymod[gpu]')") from err
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as err:  # CUDA driver missing or broken
        raise RuntimeError(f"CuPy is installed but found no usable CUDA device: {err}") from err
    if count == 0:
        raise RuntimeError("CuPy is installed but this machine has no CUDA device")
    return cupy


def array_module(ctx: Context) -> types.ModuleType:
    """numpy for a CPU context, cupy for a GPU one (with a clear error if that cannot work)."""
    if ctx.device_type != "gpu":
        return np
    cupy = _cupy()
    count = cupy.cuda.runtime.getDeviceCount()
    if ctx.device_id >= count:
        raise RuntimeError(f"{ctx} asked for, but this machine has {count} CUDA device(s)")
    return cupy


def gpu_available() -> bool:
    """True when CuPy imports and sees at least one CUDA device."""
    try:
        _cupy()
    except RuntimeError:
        return False
    return True


def num_gpus() -> int:
    """How many CUDA devices CuPy sees (0 without CuPy)."""
    return _cupy().cuda.runtime.getDeviceCount() if gpu_available() else 0


def as_numpy(array) -> np.ndarray:
    """A host numpy copy (or view) of a numpy or cupy array."""
    return array.get() if hasattr(array, "get") and not isinstance(array, np.ndarray) else np.asarray(array)


def context_of(array) -> Context:
    """The context an array lives on."""
    device = getattr(array, "device", None)
    if device is not None and not isinstance(array, np.ndarray):
        return gpu(int(device.id))
    return cpu(0)


def iter_contexts(ctx: "Context | list[Context] | None") -> Iterator[Context]:
    """Normalise ``None`` / one context / a list into contexts."""
    if ctx is None:
        yield current_context()
    elif isinstance(ctx, Context):
        yield ctx
    else:
        yield from ctx

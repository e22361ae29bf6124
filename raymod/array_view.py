"""How raymod hands its arrays to user code.

raymod computes on plain numpy (CPU) and CuPy (GPU) arrays. Every array that user code can
reach (an executor's arguments, gradients, auxiliary states and outputs, a module's
parameters and outputs, the arrays an ``EvalMetric`` or a ``CustomOp`` receives, optimizer
states) passes through :func:`show` once, where raymod hands it out. By default that is the
array itself. While MXNet's compatibility layer is installed (``raymod run``,
``raymod.compat.install()``), it is an ``NDArray`` view of the same memory, so scripts written
for MXNet can call ``.asnumpy()``, ``.context`` or ``.stype`` on whatever they get, and writes
through it land in raymod's own array. Kernels keep computing on the plain arrays
(:func:`plain`), so the views cost nothing per operator.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

import numpy as np

__all__ = ["show", "show_bound", "plain", "set_viewer", "viewer", "keep_bound_plain"]

# array-or-container, context-or-None -> the same with arrays viewed; None: show nothing else
_viewer: Callable[[Any, Any], Any] | None = None
# True in a Ray worker actor: its executors' arrays are read by raymod's own code alone
_bound_plain = False


def show(value: Any, ctx: Any = None) -> Any:
    """``value`` as user code should see it: itself, or with its arrays viewed as NDArrays.

    Parameters
    ----------
    value : array, or list / tuple / dict of arrays
        What raymod hands out.
    ctx : Context, optional
        The context the arrays are bound to (``cpu(1)`` is reported as such, not ``cpu(0)``).
    """
    return value if _viewer is None else _viewer(value, ctx)


def show_bound(value: Any, ctx: Any = None) -> Any:
    """:func:`show` for the arrays an executor holds (arguments, gradients, outputs): plain
    in a process where raymod's own code is their only reader (:func:`keep_bound_plain`)."""
    return value if _bound_plain else show(value, ctx)


def keep_bound_plain(keep: bool = True) -> None:
    """Hand out executors' arrays plain in this process (a Ray worker actor: the worker
    rebinds them to the servers' blocks by identity, and no user code reads them there).
    What user code is given there, a CustomOp's arrays and a metric's, is still shown."""
    global _bound_plain
    _bound_plain = keep


def plain(array: Any) -> Any:
    """The array as its base numpy / CuPy class (a view when it is a subclass such as NDArray;
    the raymod array inside a sparse NDArray).

    Kernels compute on these: subclasses would make every intermediate result a subclass
    instance and route indexing through Python.
    """
    if array is None or type(array) is np.ndarray:
        return array
    unwrap = getattr(type(array), "__raymod_plain__", None)
    if unwrap is not None:  # a view type around a raymod array (the compat sparse arrays)
        return unwrap(array)
    if isinstance(array, np.ndarray):
        return array.view(np.ndarray)
    cupy = sys.modules.get("cupy")
    if cupy is not None and isinstance(array, cupy.ndarray) and type(array) is not cupy.ndarray:
        return array.view(cupy.ndarray)
    return array  # a CuPy array already, or another array type raymod passes through


def set_viewer(fn: Callable[[Any, Any], Any] | None) -> None:
    """Install (or with None, remove) the function :func:`show` applies; used by the
    compatibility layer."""
    global _viewer
    _viewer = fn


def viewer() -> Callable[[Any, Any], Any] | None:
    """The installed viewer, or None."""
    return _viewer

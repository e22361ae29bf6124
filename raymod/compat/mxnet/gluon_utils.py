"""``mx.gluon.utils``' array helpers: split a batch across contexts, clip gradients by norm.

These work on NDArrays (numpy or CuPy arrays viewed as
:class:`~raymod.compat.ndarray.NDArray`) with MXNet 1.9.1's behaviour; the rest of Gluon is
not provided.
"""
from __future__ import annotations

import math
import numbers
import sys
import types
import warnings
from typing import Any, Sequence

import numpy as np

from ...context import Context, as_numpy, context_of
from ..ndarray import _on, _Surface, is_array, wrap
from .ndarray import array as _array

__all__ = ["split_data", "split_and_load", "clip_global_norm"]


def _xp(arr: Any) -> types.ModuleType:
    """numpy or cupy: the module of the array itself (a CuPy array means cupy is imported)."""
    return np if isinstance(arr, np.ndarray) else sys.modules["cupy"]


def _context(arr: Any) -> Context:
    return arr.context if isinstance(arr, _Surface) else context_of(arr)


def _to(ctx: Context, arr: Any) -> Any:
    """``arr`` when it is on ``ctx`` already (MXNet's ``as_in_context``), else a copy there."""
    if _context(arr) == ctx:
        return wrap(arr)
    return _reporting(ctx, _on(ctx, arr, copy=True))


def _reporting(ctx: Context, out: Any) -> Any:
    """The NDArray ``out`` (on ``ctx``'s device) reporting ``ctx`` (host memory of cpu(i))."""
    if ctx != context_of(out):
        out._ctx = ctx
    return out


def split_data(data: Any, num_slice: int, batch_axis: int = 0,
               even_split: bool = True) -> list:
    """``data`` cut into ``num_slice`` consecutive slices along ``batch_axis``.

    With ``even_split`` the axis's length must be a multiple of ``num_slice``; otherwise the
    first ``length % num_slice`` slices get one entry more (and slices past the length are
    empty, as in MXNet). Slices along axis 0 are views of ``data``, along other axes copies.
    Always returns a list of NDArrays.
    """
    if not is_array(data):
        raise TypeError(f"split_data: data must be an NDArray, got {type(data).__name__}")
    if isinstance(num_slice, bool) or not isinstance(num_slice, numbers.Integral) \
            or num_slice < 1:
        raise ValueError(f"split_data: num_slice must be a positive integer, got {num_slice!r}")
    ndim = data.ndim
    if isinstance(batch_axis, bool) or not isinstance(batch_axis, numbers.Integral) \
            or not -ndim <= batch_axis < ndim:
        raise ValueError(f"split_data: batch_axis must be an axis of data of shape "
                         f"{tuple(data.shape)} (an integer in [{-ndim}, {ndim})), "
                         f"got {batch_axis!r}")
    num_slice, axis = int(num_slice), int(batch_axis) % ndim
    size = data.shape[axis]
    if even_split and size % num_slice:
        what = "smaller than" if size < num_slice else "not a multiple of"
        raise ValueError(
            f"split_data: data of shape {tuple(data.shape)} has {size} entries along "
            f"batch_axis {batch_axis}, {what} num_slice={num_slice}, so it cannot be split "
            f"evenly; use a batch size that is a multiple of {num_slice}, or "
            "even_split=False to allow uneven slices")
    step, extra = divmod(size, num_slice)
    bounds = [0]
    for i in range(num_slice):
        bounds.append(bounds[-1] + step + (i < extra))
    slices = []
    for begin, end in zip(bounds, bounds[1:]):
        index = (slice(None),) * axis + (slice(begin, end),)
        part = data[index]
        slices.append(part if axis == 0 else _xp(part).ascontiguousarray(part))
    return [wrap(s, _context(data)) for s in slices]


def split_and_load(data: Any, ctx_list: Sequence[Context], batch_axis: int = 0,
                   even_split: bool = True) -> list:
    """``data`` split along ``batch_axis`` into one slice per context of ``ctx_list``, each
    on its context (a slice already there is not copied).

    ``data`` that is not an NDArray is first made one on ``ctx_list[0]`` (``mx.nd.array``).
    With one context the result is ``[data]`` on it, unsplit.
    """
    if isinstance(ctx_list, Context) or not isinstance(ctx_list, (list, tuple)) \
            or not ctx_list or not all(isinstance(c, Context) for c in ctx_list):
        shown = ctx_list if isinstance(ctx_list, (Context, list, tuple)) else \
            type(ctx_list).__name__
        raise TypeError(f"split_and_load: ctx_list must be a non-empty list of Contexts "
                        f"(e.g. [mx.gpu(0), mx.gpu(1)]), got {shown!r}")
    if not isinstance(data, _Surface):
        data = _reporting(ctx_list[0], _array(data, ctx=ctx_list[0]))
    if len(ctx_list) == 1:
        return [_to(ctx_list[0], data)]
    slices = split_data(data, len(ctx_list), batch_axis, even_split)
    return [_to(ctx, s) for s, ctx in zip(slices, ctx_list)]


def clip_global_norm(arrays: Sequence[Any], max_norm: float, check_isfinite: bool = True):
    """Scale ``arrays`` in place so that their joint 2-norm is at most ``max_norm``.

    The norm is ``sqrt(sum of squares of every element of every array)``, computed on the
    first array's context in float32 (float64 for float64 arrays). Every array is multiplied
    by ``min(1, max_norm / (norm + 1e-8))``. With ``check_isfinite`` a non-finite norm warns
    (the arrays are then NaN or zero, as in MXNet) and the norm is returned as a numpy scalar
    (``asscalar()``, e.g. ``numpy.float32``); without it, as an NDArray of shape (1,) and no
    device synchronisation.
    """
    if is_array(arrays) or not isinstance(arrays, (list, tuple)) or not arrays:
        shown = "an empty list" if isinstance(arrays, (list, tuple)) else \
            type(arrays).__name__
        raise ValueError(f"clip_global_norm: arrays must be a non-empty list of NDArrays, "
                         f"got {shown}")
    for i, arr in enumerate(arrays):
        if not is_array(arr):
            raise TypeError(f"clip_global_norm: arrays[{i}] must be an NDArray, "
                            f"got {type(arr).__name__}")
    if isinstance(max_norm, bool) or not isinstance(max_norm, numbers.Real) \
            or not max_norm > 0:
        raise ValueError(f"clip_global_norm: max_norm must be a positive number, "
                         f"got {max_norm!r}")
    ctx = _context(arrays[0])
    dtype = np.result_type(arrays[0].dtype, np.float32)
    with np.errstate(over="ignore", invalid="ignore"):  # MXNet only warns, below
        total = None
        for arr in arrays:
            flat = _xp(arr).asarray(arr).reshape(-1).astype(dtype, copy=False)
            squares = _on(ctx, _xp(flat).dot(flat, flat), dtype=dtype).reshape(1)
            total = squares if total is None else total + squares
        xp, dt = _xp(total), dtype.type
        total = xp.sqrt(total)
        if check_isfinite and not math.isfinite(as_numpy(total)[0]):
            warnings.warn(UserWarning("clip_global_norm: the total norm is nan or inf, so "
                                      "the clipped arrays are undefined"), stacklevel=2)
        scale = xp.minimum(dt(max_norm) / (total + dt(1e-8)), dt(1))
        for arr in arrays:
            arr *= _on(_context(arr), scale, dtype=arr.dtype).reshape(())
    if check_isfinite:
        return as_numpy(total)[0]
    return _reporting(ctx, wrap(total))

"""MXNet's NDArray surface on numpy (and CuPy) arrays: ``.asnumpy()``, ``.context`` and friends.

An :class:`NDArray` is a numpy array viewed as a subclass that adds the methods MXNet 1.x
scripts call. Viewing is free (no copy) and numpy keeps the subclass through arithmetic,
slicing and reductions, so ``(out * 2)[0].asnumpy()`` works. :func:`wrap` views raymod's
results (plain numpy arrays, in lists, tuples and dicts) this way; nothing else changes.
Arrays on a GPU context are CuPy arrays viewed the same way (CuPy supports subclassing).
raymod's sparse arrays are wrapped as :mod:`raymod.compat.sparse`'s ``CSRNDArray`` and
``RowSparseNDArray``, which count as NDArrays (``isinstance(x, NDArray)``), as in MXNet.
"""
from __future__ import annotations

import functools
import sys
from typing import Any

import numpy as np

from ..context import Context, as_numpy, context_of, current_context
from ..sparse._common import SparseBase
from .errors import not_supported

__all__ = ["NDArray", "wrap", "is_array"]


class _Surface:
    """The NDArray methods, shared by the numpy and CuPy subclasses."""

    def asnumpy(self) -> np.ndarray:
        """A host copy as a plain ``numpy.ndarray``."""
        return np.array(as_numpy(self), copy=True, subok=False)

    def asscalar(self) -> Any:
        """The value of a one-element array as a Python/numpy scalar."""
        if self.size != 1:
            raise ValueError(f"asscalar: the array has shape {self.shape}; it needs exactly "
                             "one element")
        return self.asnumpy().reshape(())[()]

    @property
    def context(self) -> Context:
        """The device context the array lives on (for host memory, the ``cpu(i)`` it was
        bound to)."""
        return getattr(self, "_ctx", None) or context_of(self)

    ctx = context

    @property
    def stype(self) -> str:
        """Storage type: ``'default'`` (dense)."""
        return "default"

    def tostype(self, stype: str) -> Any:
        """The array stored as ``stype``: ``'default'`` (the array itself, as MXNet's
        ``cast_storage`` to the same storage gives an equal array), ``'csr'`` (2-d only) or
        ``'row_sparse'`` (a new sparse array holding the non-zero entries / rows).

        Raises
        ------
        ValueError
            For ``'csr'`` of an array that is not 2-d, or an unknown storage type.
        """
        if stype == "default":
            return self
        from .sparse import STYPE_CLASS  # imports this module

        if stype not in STYPE_CLASS:
            raise ValueError(f"tostype: unknown storage type {stype!r}; one of 'default', "
                             "'csr', 'row_sparse'")
        cls = STYPE_CLASS[stype]
        dense = self.view(np.ndarray) if isinstance(self, np.ndarray) else \
            self.view(sys.modules["cupy"].ndarray)
        # from_dense gathers the non-zeros into new arrays: nothing is shared with self
        return cls._of(cls._raymod_type.from_dense(dense), getattr(self, "_ctx", None))

    def copyto(self, other: Any) -> Any:
        """Copy into ``other`` (an array, returned) or to a new array on ``other`` (a Context)."""
        if isinstance(other, Context):
            return _on(other, self, copy=True)
        if other is self:
            return other
        other[...] = as_numpy(self) if isinstance(other, np.ndarray) else self
        return other

    def as_in_context(self, context: Context) -> Any:
        """The array itself when it is on ``context``, else a copy there."""
        if not isinstance(context, Context):
            raise TypeError(f"as_in_context: context must be a Context, got "
                            f"{type(context).__name__}")
        return self if self.context == context else _on(context, self, copy=True)

    def norm(self, *args: Any, **kwargs: Any) -> Any:
        """The L2 norm of all elements, as a 0-d array; with arguments (``ord``, ``axis``,
        ``keepdims``), the ``norm`` operator's result, as MXNet's ``NDArray.norm``."""
        if args or kwargs:
            from .mxnet import ndarray as nd  # the op functions (they import this module)

            return nd.norm(self, *args, **kwargs)
        xp = np if isinstance(self, np.ndarray) else sys.modules["cupy"]
        return xp.sqrt(xp.sum(xp.square(self, dtype=np.float64))).astype(self.dtype)

    def wait_to_read(self) -> None:
        """Nothing to wait for: numpy computes eagerly (CuPy: synchronise the device)."""
        _synchronize(self)

    wait_to_write = wait_to_read

    def attach_grad(self, *args, **kwargs):
        raise not_supported("NDArray.attach_grad", "autograd (mx.autograd)")

    @property
    def grad(self):
        raise not_supported("NDArray.grad", "autograd (mx.autograd)")

    def backward(self, *args, **kwargs):
        raise not_supported("NDArray.backward", "autograd (mx.autograd)")


class _ArrayType(type):
    """NDArray's metaclass: MXNet's sparse arrays are NDArrays too, so scripts that test
    ``isinstance(x, mx.nd.NDArray)`` accept a ``CSRNDArray``; here those are subclasses of
    raymod's sparse arrays, not of numpy's, and count through this check."""

    def __instancecheck__(cls, instance: Any) -> bool:
        if type.__instancecheck__(cls, instance):
            return True
        # only NDArray itself, not its subclasses; the cheap test first
        return cls is NDArray and isinstance(instance, SparseBase) and _is_sparse_nd(instance)


def _is_sparse_nd(value: Any) -> bool:
    from .sparse import BaseSparseNDArray  # imports this module

    return isinstance(value, BaseSparseNDArray)


class NDArray(_Surface, np.ndarray, metaclass=_ArrayType):
    """A numpy array with MXNet's NDArray methods; ``isinstance(x, numpy.ndarray)`` holds.

    Create one with ``mx.nd.array(...)`` / ``mx.nd.zeros(...)`` or view any numpy array:
    ``a.view(NDArray)``. Adds ``asnumpy``, ``asscalar``, ``context``/``ctx``, ``copyto``,
    ``as_in_context``, ``wait_to_read`` and ``stype``; everything else is numpy's.
    """

    def __array_finalize__(self, source: Any) -> None:
        # slices and results of a cpu(i) array report cpu(i) too
        ctx = getattr(source, "_ctx", None)
        if ctx is not None:
            self._ctx = ctx

    def __getitem__(self, key: Any) -> Any:
        # indexing down to one element gives a 0-d NDArray, as MXNet gives an NDArray
        # (so `a[0][2].asscalar()` works), where numpy would give a bare scalar
        out = super().__getitem__(key)
        return out if isinstance(out, np.ndarray) else np.asarray(out).view(NDArray)

    def __repr__(self) -> str:
        return f"\n{np.asarray(self)!r}\n<NDArray {'x'.join(map(str, self.shape))} @{self.context}>"


def _synchronize(array: Any) -> None:
    if not isinstance(array, np.ndarray) and "cupy" in sys.modules:
        sys.modules["cupy"].cuda.get_current_stream().synchronize()


@functools.lru_cache(maxsize=None)
def _gpu_class() -> type:
    """The CuPy counterpart of :class:`NDArray` (created on first use of a GPU array)."""
    import cupy

    return type("NDArray", (_Surface, cupy.ndarray),
                {"__doc__": "A CuPy array with MXNet's NDArray methods.",
                 "__module__": __name__})


def _view(array: Any) -> Any:
    if isinstance(array, np.ndarray):
        return array.view(NDArray)
    try:
        return array.view(_gpu_class())
    except Exception:  # a CuPy without subclass support: the plain array
        return array


def is_array(value: Any) -> bool:
    """Whether ``value`` is a numpy or CuPy array."""
    if isinstance(value, np.ndarray):
        return True
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(value, cupy.ndarray)


def wrap(value: Any, ctx: Context | None = None) -> Any:
    """``value`` with every numpy/CuPy array in it (lists, tuples, dicts) viewed as NDArray.

    ``ctx``, when given, is the context the arrays report (host arrays bound to ``cpu(1)``
    say so); an array that is already an NDArray is returned as it is. A raymod sparse
    array becomes a ``CSRNDArray`` / ``RowSparseNDArray`` holding that same array, so
    ``x[:] = batch`` through it fills raymod's holder.
    """
    if is_array(value):
        if isinstance(value, _Surface):
            return value
        out = _view(value)
        if ctx is not None and ctx != context_of(value):
            out._ctx = ctx
        return out
    if isinstance(value, SparseBase):  # the same raymod array, as CSRNDArray / RowSparseNDArray
        from .sparse import sparse_view  # imports this module

        return sparse_view(value, ctx)
    if isinstance(value, list):
        return [wrap(v, ctx) for v in value]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(wrap(v, ctx) for v in value)
    if isinstance(value, dict):
        return type(value)((k, wrap(v, ctx)) for k, v in value.items())
    return value


def _on(ctx: Context, value: Any, dtype: Any = None, copy: bool = False) -> Any:
    """``value`` as an NDArray on ``ctx`` (a copy when ``copy`` or when it must move)."""
    xp = ctx.xp
    if xp is np:
        host = as_numpy(value)
        out = np.array(host, dtype=dtype, copy=True) if copy else np.asarray(host, dtype=dtype)
    else:
        with ctx.scope():
            out = xp.array(value, dtype=dtype, copy=True) if copy else xp.asarray(value, dtype)
    return _view(out)


def default_ctx(ctx: Context | None) -> Context:
    """``ctx``, or the current context (``with mx.gpu(0):``, ``set_default_context``) if None."""
    if ctx is None:
        return current_context()
    if not isinstance(ctx, Context):
        raise TypeError(f"ctx must be a Context such as mx.cpu(), got {type(ctx).__name__}")
    return ctx

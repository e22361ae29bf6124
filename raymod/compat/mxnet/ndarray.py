"""``mx.nd`` / ``mx.ndarray``: create, save and load dense arrays, and run operators on them.

Arrays are numpy arrays (CuPy on a GPU context) viewed as
:class:`~raymod.compat.ndarray.NDArray`. Besides the creation functions below, every operator
raymod registers is an imperative function under its MXNet name(s), as in MXNet
(``mx.nd.FullyConnected(data=x, weight=w, bias=b, num_hidden=4)``, ``mx.nd.softmax``,
``mx.nd.sum(x, axis=1, keepdims=True)``, ``mx.nd._plus_scalar(x, scalar=2)``; see
:mod:`raymod.compat.mxnet.imperative`), with ``mx.nd.contrib.<name>`` for the
``_contrib_<name>`` ops, ``mx.nd.op`` and ``mx.nd._internal``. ``concat``, ``stack``,
``split``, ``one_hot``, ``zeros_like`` and ``ones_like`` are those operators too. A name that
no operator has but numpy does is numpy's function (``mx.nd.cumsum``). Results are NDArrays.

Sparse storage as MXNet's: ``mx.nd.sparse`` (:mod:`raymod.compat.mxnet.sparse`) makes
``CSRNDArray`` / ``RowSparseNDArray`` arrays, as do ``zeros(..., stype=)``, ``empty(...,
stype=)``, ``array(scipy_matrix)`` and ``x.tostype('csr')``; the op functions take them (see
:mod:`raymod.compat.mxnet.imperative` for which ops compute on them as they are), and
``save`` / ``load`` keep them sparse. Autograd is not provided.
"""
from __future__ import annotations

import sys
import types
from typing import Any, Sequence

import numpy as np

from ... import ndarray_io
from ... import random as _random
from ...base import MXNetError
from ...context import Context
from ...sparse import is_sparse
from ..errors import not_supported
from ..ndarray import NDArray, _on, _synchronize, default_ctx, is_array, wrap
from ..sparse import BaseSparseNDArray, apply_elementwise
from . import imperative as _imperative

__all__ = ["NDArray", "array", "empty", "zeros", "ones", "full", "arange", "zeros_like",
           "ones_like", "concat", "concatenate", "stack", "split", "one_hot", "save", "load",
           "load_frombuffer", "waitall", "random", "contrib", "op", "sparse"]

_REAL = np.float32  # MXNet's default element type


def _shape(shape: Any) -> tuple:
    return (int(shape),) if np.isscalar(shape) else tuple(int(d) for d in shape)


def array(source_array: Any, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    """A new array holding a copy of ``source_array`` on ``ctx``.

    ``dtype`` defaults to the source's when it is an NDArray, else float32: a numpy
    float64 or int64 source becomes float32, as in MXNet (whose example scripts rely on it:
    wide_deep feeds ``np.array`` of Python floats through ``NDArrayIter``). A
    sparse source (``CSRNDArray``, ``RowSparseNDArray``, a scipy.sparse matrix) gives a
    sparse array of that storage (csr for scipy), as ``mx.nd.sparse.array``.
    """
    if is_sparse(source_array) or hasattr(source_array, "tocsr"):
        return _sparse().array(source_array, ctx=ctx, dtype=dtype)
    if dtype is None:
        dtype = source_array.dtype if isinstance(source_array, NDArray) else _REAL
    return _on(default_ctx(ctx), source_array, dtype=dtype, copy=True)


def _filled(fill: Any, shape: Any, ctx: Context | None, dtype: Any) -> NDArray:
    ctx = default_ctx(ctx)
    with ctx.scope():
        out = ctx.xp.full(_shape(shape), fill, dtype=_REAL if dtype is None else dtype)
    return wrap(out)


def empty(shape: Any, ctx: Context | None = None, dtype: Any = None,
          stype: str | None = None) -> NDArray:
    """An array of ``shape`` (contents unspecified; raymod gives zeros), float32 by default;
    with ``stype`` ``'csr'`` or ``'row_sparse'``, an empty sparse array."""
    if stype not in (None, "default"):
        return _sparse().empty(stype, shape, ctx=ctx, dtype=dtype)
    return _filled(0, shape, ctx, dtype)


def zeros(shape: Any, ctx: Context | None = None, dtype: Any = None, stype: str | None = None,
          **kwargs) -> NDArray:
    """An array of zeros, float32 by default; ``stype`` ``'csr'`` or ``'row_sparse'`` makes
    it a sparse array holding no values (``mx.nd.sparse.zeros``)."""
    if stype not in (None, "default"):
        return _sparse().zeros(stype, shape, ctx=ctx, dtype=dtype, **kwargs)
    _dense_only("mx.nd.zeros", kwargs)
    return _filled(0, shape, ctx, dtype)


def ones(shape: Any, ctx: Context | None = None, dtype: Any = None, **kwargs) -> NDArray:
    """An array of ones, float32 by default."""
    _dense_only("mx.nd.ones", kwargs)
    return _filled(1, shape, ctx, dtype)


def full(shape: Any, val: Any, ctx: Context | None = None, dtype: Any = _REAL,
         out: Any = None) -> NDArray:
    """An array of ``shape`` filled with ``val`` (into ``out`` when given)."""
    if out is not None:
        out[...] = val
        return out
    return _filled(val, shape, ctx, dtype)


def arange(start: float, stop: float | None = None, step: float = 1.0, repeat: int = 1,
           infer_range: Any = None, ctx: Context | None = None, dtype: Any = _REAL) -> NDArray:
    """``numpy.arange(start, stop, step)`` with every value repeated ``repeat`` times."""
    values = np.repeat(np.arange(start, stop, step, dtype=dtype), int(repeat))
    return _on(default_ctx(ctx), values)


def concatenate(arrays: Sequence[Any], axis: int = 0, always_copy: bool = True) -> NDArray:
    """Join arrays along ``axis`` (default 0)."""
    return wrap(_xp(arrays[0]).concatenate(list(arrays), axis=axis))


def save(fname: str, data: Any) -> None:
    """Save an array, a list or a dict of arrays in MXNet's ``.params`` format; csr and
    row_sparse arrays are saved in MXNet's sparse layout (:mod:`raymod.sparse.io`)."""
    if is_array(data) or is_sparse(data):
        data = [data]
    ndarray_io.atomic_write(fname, ndarray_io.dumps(data))


def load(fname: str) -> Any:
    """Load a list or dict of arrays saved by :func:`save` or by MXNet (host arrays; sparse
    records as ``CSRNDArray`` / ``RowSparseNDArray``)."""
    return wrap(ndarray_io.load(fname))


def load_frombuffer(buf: bytes) -> Any:
    """Load a list or dict of arrays from the bytes of a ``.params`` file."""
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise TypeError(f"load_frombuffer needs bytes, got {type(buf).__name__}")
    return wrap(ndarray_io.load_frombuffer(bytes(buf)))


def waitall() -> None:
    """Wait for pending device work (a no-op on numpy)."""
    if "cupy" in sys.modules:
        _synchronize(sys.modules["cupy"].empty(0))


def _xp(value: Any) -> types.ModuleType:
    return np if isinstance(value, np.ndarray) or not is_array(value) else sys.modules["cupy"]


def _dense_only(call: str, kwargs: dict) -> None:
    stype = kwargs.pop("stype", "default")
    if stype not in (None, "default"):  # MXNet's ones/full take no stype either
        raise MXNetError(f"{call}: stype={stype!r} is not supported; only 'default'")
    if kwargs:
        raise TypeError(f"{call} got unexpected argument(s) {sorted(kwargs)}")


def _sparse() -> types.ModuleType:
    from . import sparse  # mx.nd.sparse imports this module's functions

    return sparse


def _draw(kind: str, a: Any, b: Any, shape: tuple, dtype: Any, xp: types.ModuleType) -> Any:
    """Samples drawn as raymod's own code draws them (e.g. SGLD's noise): from the seeded
    generator of the target device, float32 or float64 as ``dtype`` asks, so that after the
    same ``mx.random.seed`` the same numbers come out."""
    gen = _random.device_generator(xp)
    if kind == "integers":
        return gen.integers(a, b, size=shape).astype(dtype)
    if kind == "poisson":
        return gen.poisson(a, size=shape).astype(dtype)
    if kind == "exponential":
        return gen.exponential(a, size=shape).astype(dtype)
    if kind == "gamma":  # shape alpha, scale beta, as MXNet's
        return (gen.standard_gamma(a, size=shape) * b).astype(dtype)
    draw_dtype = np.float64 if np.dtype(dtype) == np.float64 else np.float32
    if kind == "normal":
        values = gen.standard_normal(size=shape, dtype=draw_dtype) * draw_dtype(b) + a
    else:
        values = gen.random(size=shape, dtype=draw_dtype) * draw_dtype(b - a) + a
    return values.astype(dtype)


def _random_fn(kind: str, first: str, second: str, defaults: tuple, default_dtype: Any):
    def fn(a: Any = defaults[0], b: Any = defaults[1], shape: Any = 1,
           dtype: Any = default_dtype, ctx: Context | None = None, out: Any = None,
           **kwargs: Any) -> NDArray:
        a, b = kwargs.pop(first, a), kwargs.pop(second, b)
        if kwargs:
            raise TypeError(f"random.{fn.__name__} got unexpected argument(s) {sorted(kwargs)}")
        if out is not None:  # out's shape, dtype and device; a sparse out takes the draw
            shape, dtype, ctx = out.shape, out.dtype, out.context
        ctx = default_ctx(ctx)
        with ctx.scope():
            values = _draw(kind, a, b, _shape(shape), dtype, ctx.xp)
        if out is None:
            return wrap(values)
        if is_sparse(out):
            wrap(out)[:] = values
        else:
            out[...] = values
        return out
    fn.__doc__ = (f"{kind.capitalize()} samples ({first}, {second}) as an NDArray of "
                  "``shape`` on ``ctx`` (or into ``out``, dense or sparse), from raymod's "
                  "generator (``mx.random.seed``).")
    return fn


def _one_parameter_fn(kind: str, name: str, default: float):
    two = _random_fn(kind, name, "_unused", (default, None), _REAL)

    def fn(value: Any = default, shape: Any = 1, dtype: Any = _REAL,
           ctx: Context | None = None, out: Any = None, **kwargs: Any) -> NDArray:
        return two(kwargs.pop(name, value), None, shape, dtype, ctx, out, **kwargs)
    fn.__doc__ = (f"{kind.capitalize()} samples ({name}) as an NDArray of ``shape`` on "
                  "``ctx``, from raymod's generator (``mx.random.seed``).")
    return fn


random = types.SimpleNamespace(uniform=_random_fn("uniform", "low", "high", (0.0, 1.0), _REAL),
                               normal=_random_fn("normal", "loc", "scale", (0.0, 1.0), _REAL),
                               randint=_random_fn("integers", "low", "high", (0, 2), np.int32),
                               gamma=_random_fn("gamma", "alpha", "beta", (1.0, 1.0), _REAL),
                               poisson=_one_parameter_fn("poisson", "lam", 1.0),
                               exponential=_one_parameter_fn("exponential", "scale", 1.0))


def _randn(*shape: int, loc: float = 0.0, scale: float = 1.0, dtype: Any = _REAL,
           ctx: Context | None = None, **kwargs: Any) -> NDArray:
    """Normal samples of the given shape (MXNet's ``mx.nd.random.randn(2, 3)``)."""
    return random.normal(loc, scale, shape=shape or 1, dtype=dtype, ctx=ctx, **kwargs)


random.randn = _randn
for _name, _fn in vars(random).items():
    _fn.__name__ = _name

# operators that this module's __all__ names (every other one comes from __getattr__), and
# MXNet's op modules
_OPS = _imperative.FUNCTIONS
concat, stack, split = _OPS["concat"], _OPS["stack"], _OPS["split"]
one_hot, zeros_like, ones_like = _OPS["one_hot"], _OPS["zeros_like"], _OPS["ones_like"]
contrib, op, _internal = _imperative.contrib, _imperative.op, _imperative.internal


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    if name == "sparse":
        return _sparse()
    operator = _imperative.get(name)  # every registered op, under MXNet's exact name
    if operator is not None:
        return operator
    fn = getattr(np, name, None)
    if name.startswith("_") or not callable(fn) or isinstance(fn, type):
        raise not_supported(f"mx.nd.{name}", "this imperative operator")

    def call(*args, **kwargs):
        if any(isinstance(a, BaseSparseNDArray) for a in args):
            return _numpy_on_sparse(name, args, kwargs)
        xp = next((_xp(a) for a in args if is_array(a)), np)
        return wrap(getattr(xp, name)(*args, **kwargs))
    call.__name__ = name
    call.__doc__ = (f"numpy's ``{name}`` with an NDArray result (on a sparse array: on its "
                    "stored values when it keeps 0 at 0, as MXNet's sparse unary ops).")
    return call


def _numpy_on_sparse(name: str, args: tuple, kwargs: dict) -> Any:
    """numpy's function ``name`` with a sparse argument: a one-input ufunc runs on the stored
    values when it keeps zeros (the storage is kept), else on a dense copy."""
    fn = getattr(np, name)
    if isinstance(fn, np.ufunc) and fn.nin == 1 and len(args) == 1:
        return apply_elementwise(fn, args[0], **kwargs)
    dense = [a.todense() if isinstance(a, BaseSparseNDArray) else a for a in args]
    xp = next((_xp(a) for a in dense if is_array(a)), np)
    return wrap(getattr(xp, name)(*dense, **kwargs))

"""``mx.nd`` / ``mx.ndarray``: create, save and load dense arrays with MXNet's NDArray surface.

Arrays are numpy arrays (CuPy on a GPU context) viewed as
:class:`~raymod.compat.ndarray.NDArray`. Besides the creation functions below, any numpy
function is reachable under its numpy name (``mx.nd.sum(x, axis=0)``, ``mx.nd.square``,
``mx.nd.dot``), plus MXNet's ``broadcast_*`` / ``elemwise_*`` spellings of the arithmetic;
results are NDArrays. MXNet's imperative neural-network operators (``mx.nd.FullyConnected``,
...), sparse storage (``mx.nd.sparse``) and autograd are not provided.
"""
from __future__ import annotations

import sys
import types
from typing import Any, Sequence

import numpy as np

from ... import ndarray_io
from ... import random as _random
from ...context import Context, as_numpy
from ..errors import Unsupported, not_supported
from ..ndarray import NDArray, _on, _synchronize, default_ctx, is_array, wrap

__all__ = ["NDArray", "array", "empty", "zeros", "ones", "full", "arange", "zeros_like",
           "ones_like", "concat", "concatenate", "stack", "split", "one_hot", "save", "load",
           "load_frombuffer", "waitall", "random"]

_REAL = np.float32  # MXNet's default element type


def _shape(shape: Any) -> tuple:
    return (int(shape),) if np.isscalar(shape) else tuple(int(d) for d in shape)


def array(source_array: Any, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    """A new array holding a copy of ``source_array`` on ``ctx``.

    ``dtype`` defaults to the source's when it is an array, else float32 (as in MXNet).
    """
    if dtype is None:
        dtype = source_array.dtype if is_array(source_array) else _REAL
    return _on(default_ctx(ctx), source_array, dtype=dtype, copy=True)


def _filled(fill: Any, shape: Any, ctx: Context | None, dtype: Any) -> NDArray:
    ctx = default_ctx(ctx)
    with ctx.scope():
        out = ctx.xp.full(_shape(shape), fill, dtype=_REAL if dtype is None else dtype)
    return wrap(out)


def empty(shape: Any, ctx: Context | None = None, dtype: Any = None) -> NDArray:
    """An array of ``shape`` (contents unspecified; raymod gives zeros), float32 by default."""
    return _filled(0, shape, ctx, dtype)


def zeros(shape: Any, ctx: Context | None = None, dtype: Any = None, **kwargs) -> NDArray:
    """An array of zeros, float32 by default. ``stype`` other than 'default' is refused."""
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


def zeros_like(data: Any, **kwargs) -> NDArray:
    """Zeros with ``data``'s shape, dtype and context."""
    return wrap(_xp(data).zeros_like(data))


def ones_like(data: Any, **kwargs) -> NDArray:
    """Ones with ``data``'s shape, dtype and context."""
    return wrap(_xp(data).ones_like(data))


def arange(start: float, stop: float | None = None, step: float = 1.0, repeat: int = 1,
           infer_range: Any = None, ctx: Context | None = None, dtype: Any = _REAL) -> NDArray:
    """``numpy.arange(start, stop, step)`` with every value repeated ``repeat`` times."""
    values = np.repeat(np.arange(start, stop, step, dtype=dtype), int(repeat))
    return _on(default_ctx(ctx), values)


def concat(*data: Any, dim: int = 1, **kwargs) -> NDArray:
    """Join arrays along axis ``dim`` (MXNet's ``concat``; default axis 1)."""
    return wrap(_xp(data[0]).concatenate(data, axis=dim))


def concatenate(arrays: Sequence[Any], axis: int = 0, always_copy: bool = True) -> NDArray:
    """Join arrays along ``axis`` (default 0)."""
    return wrap(_xp(arrays[0]).concatenate(list(arrays), axis=axis))


def stack(*data: Any, axis: int = 0, **kwargs) -> NDArray:
    """Stack arrays along a new ``axis``."""
    return wrap(_xp(data[0]).stack(data, axis=axis))


def split(data: Any, num_outputs: int, axis: int = 1, squeeze_axis: bool = False) -> Any:
    """Split into ``num_outputs`` equal parts along ``axis`` (one array when it is 1)."""
    parts = _xp(data).split(data, int(num_outputs), axis=axis)
    if squeeze_axis:
        parts = [p.squeeze(axis=axis) for p in parts]
    parts = wrap(list(parts))
    return parts[0] if len(parts) == 1 else parts


def one_hot(indices: Any, depth: int, on_value: float = 1.0, off_value: float = 0.0,
            dtype: Any = _REAL) -> NDArray:
    """One-hot rows of length ``depth`` for integer-valued ``indices``."""
    xp = _xp(indices)
    idx = indices.astype(np.int64)
    out = xp.full((*indices.shape, int(depth)), off_value, dtype=dtype)
    valid = (idx >= 0) & (idx < depth)
    xp.put_along_axis(out, xp.where(valid, idx, 0)[..., None],
                      xp.where(valid, on_value, off_value).astype(dtype)[..., None], axis=-1)
    return wrap(out)


def save(fname: str, data: Any) -> None:
    """Save an array, a list or a dict of arrays in MXNet's ``.params`` format."""
    if is_array(data):
        data = [data]
    ndarray_io.save(fname, data)


def load(fname: str) -> Any:
    """Load a list or dict of arrays saved by :func:`save` or by MXNet (host arrays)."""
    return wrap(ndarray_io.load(fname))


def load_frombuffer(buf: bytes) -> Any:
    """Load a list or dict of arrays from the bytes of a ``.params`` file."""
    return wrap(ndarray_io.load_frombuffer(buf))


def waitall() -> None:
    """Wait for pending device work (a no-op on numpy)."""
    if "cupy" in sys.modules:
        _synchronize(sys.modules["cupy"].empty(0))


def _xp(value: Any) -> types.ModuleType:
    return np if isinstance(value, np.ndarray) or not is_array(value) else sys.modules["cupy"]


def _dense_only(call: str, kwargs: dict) -> None:
    stype = kwargs.pop("stype", "default")
    if stype not in (None, "default"):
        raise not_supported(f"{call}(stype={stype!r})", "sparse storage")
    if kwargs:
        raise TypeError(f"{call} got unexpected argument(s) {sorted(kwargs)}")


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
    draw_dtype = np.float64 if np.dtype(dtype) == np.float64 else np.float32
    if kind == "normal":
        values = gen.standard_normal(size=shape, dtype=draw_dtype) * draw_dtype(b) + a
    else:
        values = gen.random(size=shape, dtype=draw_dtype) * draw_dtype(b - a) + a
    return values.astype(dtype)


def _random_fn(kind: str, first: str, second: str, defaults: tuple, default_dtype: Any):
    def fn(a: Any = defaults[0], b: Any = defaults[1], shape: Any = 1,
           dtype: Any = default_dtype, ctx: Context | None = None, **kwargs: Any) -> NDArray:
        a, b = kwargs.pop(first, a), kwargs.pop(second, b)
        if kwargs:
            raise TypeError(f"random.{fn.__name__} got unexpected argument(s) {sorted(kwargs)}")
        ctx = default_ctx(ctx)
        with ctx.scope():
            return wrap(_draw(kind, a, b, _shape(shape), dtype, ctx.xp))
    fn.__doc__ = (f"{kind.capitalize()} samples ({first}, {second}) as an NDArray of "
                  "``shape`` on ``ctx``, from raymod's generator (``mx.random.seed``).")
    return fn


def _one_parameter_fn(kind: str, name: str, default: float):
    two = _random_fn(kind, name, "_unused", (default, None), _REAL)

    def fn(value: Any = default, shape: Any = 1, dtype: Any = _REAL,
           ctx: Context | None = None, **kwargs: Any) -> NDArray:
        return two(kwargs.pop(name, value), None, shape, dtype, ctx, **kwargs)
    fn.__doc__ = (f"{kind.capitalize()} samples ({name}) as an NDArray of ``shape`` on "
                  "``ctx``, from raymod's generator (``mx.random.seed``).")
    return fn


random = types.SimpleNamespace(uniform=_random_fn("uniform", "low", "high", (0.0, 1.0), _REAL),
                               normal=_random_fn("normal", "loc", "scale", (0.0, 1.0), _REAL),
                               randint=_random_fn("integers", "low", "high", (0, 2), np.int32),
                               poisson=_one_parameter_fn("poisson", "lam", 1.0),
                               exponential=_one_parameter_fn("exponential", "scale", 1.0))


def _randn(*shape: int, loc: float = 0.0, scale: float = 1.0, dtype: Any = _REAL,
           ctx: Context | None = None, **kwargs: Any) -> NDArray:
    """Normal samples of the given shape (MXNet's ``mx.nd.random.randn(2, 3)``)."""
    return random.normal(loc, scale, shape=shape or 1, dtype=dtype, ctx=ctx, **kwargs)


random.randn = _randn
for _name, _fn in vars(random).items():
    _fn.__name__ = _name

# MXNet's spellings of numpy's arithmetic
_ALIASES = {"broadcast_add": "add", "broadcast_plus": "add", "elemwise_add": "add",
            "broadcast_sub": "subtract", "broadcast_minus": "subtract",
            "elemwise_sub": "subtract", "broadcast_mul": "multiply", "elemwise_mul": "multiply",
            "broadcast_div": "divide", "elemwise_div": "divide", "broadcast_power": "power",
            "broadcast_maximum": "maximum", "broadcast_minimum": "minimum",
            "broadcast_equal": "equal", "broadcast_greater": "greater",
            "broadcast_lesser": "less"}


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    if name == "sparse":
        return Unsupported("mxnet.ndarray.sparse", "sparse storage")
    fn = getattr(np, _ALIASES.get(name, name), None)
    if name.startswith("_") or not callable(fn) or isinstance(fn, type):
        raise not_supported(f"mx.nd.{name}", "this imperative operator")

    def call(*args, **kwargs):
        xp = next((_xp(a) for a in args if is_array(a)), np)
        return wrap(getattr(xp, fn.__name__)(*args, **kwargs))
    call.__name__ = name
    call.__doc__ = f"numpy's ``{fn.__name__}`` with an NDArray result."
    return call

"""``mx.nd.sparse`` / ``mxnet.ndarray.sparse``: create sparse arrays and run ops on them.

Constructors as MXNet 1.x's: :func:`csr_matrix`, :func:`row_sparse_array`, :func:`zeros`,
:func:`empty`, :func:`array`; the arithmetic functions :func:`add`, :func:`subtract`,
:func:`multiply`, :func:`divide` with MXNet's result storage; and the ops MXNet registers
for sparse storage under their short names (``mx.nd.sparse.dot``, ``.retain``,
``.cast_storage``, ``.square``, ``.Embedding``, ...; see :data:`SPARSE_OPS`), which are
the ``mx.nd`` functions of the same ops: raymod's op computes on the sparse input where it
can (``dot(csr, dense)``, the zero-preserving unary ops on csr, ``retain``), else on a dense
copy (MXNet's storage fallback, a dense result). A name no raymod op has runs numpy's
function, on the stored values when it keeps 0 at 0.
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ...context import Context
from ...sparse import CSRArray, RowSparseArray
from ..ndarray import default_ctx, is_array
from ..sparse import (BaseSparseNDArray, CSRNDArray, NotSupportedForSparseNDArray,
                      RowSparseNDArray, binary, sparse_view)
from . import imperative as _imperative

__all__ = ["csr_matrix", "row_sparse_array", "BaseSparseNDArray", "CSRNDArray",
           "RowSparseNDArray", "add", "subtract", "multiply", "divide", "zeros", "empty",
           "array", "NotSupportedForSparseNDArray"]

_REAL = np.float32
_INDEX = np.int64

#: The op names MXNet 1.9.1 registers with a ``_sparse_`` alias, i.e. what its
#: ``mx.nd.sparse`` / ``mx.sym.sparse`` hold (each is the op of that name, or ``_sparse_<name>``)
SPARSE_OPS = frozenset("""
ElementWiseSum Embedding FullyConnected LinearRegressionOutput LogisticRegressionOutput
MAERegressionOutput abs adagrad_update adam_update add_n arccos arccosh arcsin arcsinh arctan
arctanh broadcast_add broadcast_div broadcast_minus broadcast_mul broadcast_plus broadcast_sub
cast_storage cbrt ceil clip concat cos cosh degrees dot elemwise_add elemwise_div elemwise_mul
elemwise_sub exp expm1 fix floor ftrl_update gamma gammaln log log10 log1p log2 make_loss mean
negative norm radians relu retain rint round rsqrt sgd_mom_update sgd_update sigmoid sign sin
sinh slice sqrt square stop_gradient sum tan tanh trunc where zeros_like
""".split())


def op_name(name: str) -> str | None:
    """The registered op behind ``mx.nd.sparse.<name>`` (``retain`` is ``_sparse_retain``),
    or None when raymod registers none."""
    from ...ops.base import OPS

    for candidate in (f"_sparse_{name}", name):
        if candidate in OPS:
            return candidate
    return None


def __getattr__(name: str) -> Any:
    if name.startswith("__") or name not in SPARSE_OPS:
        raise AttributeError(f"module 'mxnet.ndarray.sparse' has no attribute {name!r}")
    registered = op_name(name)
    if registered is not None:
        return _imperative.get(registered)
    from . import ndarray as nd

    return getattr(nd, name)  # numpy's function (NotSupportedError if numpy has none)


def __dir__() -> list[str]:
    return sorted(set(__all__) | {n for n in SPARSE_OPS if op_name(n)})


# ---- arithmetic ----------------------------------------------------------------------------

def _arith(name: str, lhs: Any, rhs: Any) -> Any:
    if isinstance(lhs, BaseSparseNDArray) or isinstance(rhs, BaseSparseNDArray):
        # as a function, MXNet runs the elemwise op for same-shaped arrays, whose storage
        # rules also let dense * csr stay csr
        return binary(name, lhs, rhs, broadcast_lhs_dense=False)
    import operator

    fn = {"add": operator.add, "sub": operator.sub, "mul": operator.mul,
          "div": operator.truediv}[name]
    return fn(lhs, rhs)


def add(lhs: Any, rhs: Any) -> Any:
    """``lhs + rhs`` (arrays or scalars) with broadcasting, stored as MXNet stores it: two
    csr (two row_sparse) arrays of one shape give csr (row_sparse); with a dense array or a
    non-zero scalar the sum is dense; ``x + 0`` keeps ``x``'s storage."""
    return _arith("add", lhs, rhs)


def subtract(lhs: Any, rhs: Any) -> Any:
    """``lhs - rhs``, with the storage rules of :func:`add`."""
    return _arith("sub", lhs, rhs)


def multiply(lhs: Any, rhs: Any) -> Any:
    """``lhs * rhs``: sparse by a scalar keeps its storage; two csr (row_sparse) arrays give
    csr (row_sparse); a sparse array times a dense array of its shape has the sparse one's
    storage, and a csr times a dense array broadcast to its shape is csr; else dense."""
    return _arith("mul", lhs, rhs)


def divide(lhs: Any, rhs: Any) -> Any:
    """``lhs / rhs``: sparse by a scalar keeps its storage, and so does a csr over a dense
    array broadcast to its shape; otherwise dense (``0 / 0`` is not zero)."""
    return _arith("div", lhs, rhs)


# ---- construction --------------------------------------------------------------------------

def _shape_tuple(shape: Any) -> tuple:
    return (int(shape),) if isinstance(shape, numbers.Integral) else \
        tuple(int(d) for d in shape)


def _check_shape(given: Any, wanted: Any) -> None:
    """ValueError when both shapes are given and differ (MXNet's check)."""
    if given and wanted and tuple(int(d) for d in given) != tuple(int(d) for d in wanted):
        raise ValueError(f"Shape mismatch detected. {tuple(given)} v.s. {tuple(wanted)}")


def _default_dtype(source: Any, dtype: Any) -> Any:
    """``dtype``, else the source's when it is an array (dense, sparse, scipy), else float32."""
    if dtype is not None:
        return np.dtype(dtype)
    if is_array(source) or isinstance(source, (BaseSparseNDArray, np.ndarray)) or \
            hasattr(source, "tocsr"):
        return np.dtype(source.dtype)
    return np.dtype(_REAL)


def _host(value: Any, dtype: Any) -> np.ndarray:
    """``value`` (NDArray, numpy/CuPy array, list) as a host array of ``dtype``."""
    if isinstance(value, BaseSparseNDArray):
        raise TypeError("expected a dense array, got a sparse one")
    if hasattr(value, "get") and not isinstance(value, np.ndarray):
        value = value.get()
    return np.array(value, dtype=dtype, copy=True)


def _placed(cls: type, base: Any, ctx: Context) -> BaseSparseNDArray:
    """A ``cls`` of the host raymod array ``base``, moved to ``ctx``'s device."""
    out = cls._of(base)
    return out.as_in_context(ctx) if ctx.xp is not np else cls._of(base, ctx)


def _empty(stype: str, shape: Any, ctx: Context | None, dtype: Any) -> BaseSparseNDArray:
    ctx = default_ctx(ctx)
    dtype = np.dtype(_REAL if dtype is None else dtype)
    shape = _shape_tuple(shape)
    if stype == "csr":
        if len(shape) != 2:
            raise ValueError(f"a csr array is 2-d, got shape {shape}")
        base = CSRArray.empty(shape, dtype)
        return _placed(CSRNDArray, base, ctx)
    if stype == "row_sparse":
        return _placed(RowSparseNDArray, RowSparseArray.empty(shape, dtype), ctx)
    raise ValueError(f"unknown storage type {stype!r}; one of 'csr', 'row_sparse'")


def zeros(stype: str, shape: Any, ctx: Context | None = None, dtype: Any = None,
          **kwargs: Any) -> Any:
    """An all-zero array of storage ``stype`` (``'csr'``, ``'row_sparse'`` or ``'default'``).

    Parameters
    ----------
    stype : str
        The storage type.
    shape : int or tuple of int
        The shape (2-d for csr).
    ctx : Context, optional
        The device (default: the current context).
    dtype : str or numpy.dtype, optional
        The value type, float32 by default.

    Returns
    -------
    CSRNDArray, RowSparseNDArray or NDArray

    Raises
    ------
    ValueError
        For an unknown storage type.
    """
    if stype == "default":
        from .ndarray import zeros as dense_zeros

        return dense_zeros(shape, ctx=ctx, dtype=dtype, **kwargs)
    if kwargs:
        raise TypeError(f"sparse.zeros got unexpected argument(s) {sorted(kwargs)}")
    return _empty(stype, shape, ctx, dtype)


def empty(stype: str, shape: Any, ctx: Context | None = None, dtype: Any = None) -> Any:
    """An array of storage ``stype`` (``'csr'`` or ``'row_sparse'``) holding no values:
    all zeros, as :func:`zeros`."""
    if stype not in ("csr", "row_sparse"):
        raise ValueError(f"unknown stype: {stype!r}; one of 'csr', 'row_sparse'")
    return _empty(stype, shape, ctx, dtype)


def _from_scipy(matrix: Any, ctx: Context | None, dtype: Any) -> CSRNDArray:
    """A csr array of a scipy matrix in canonical form (duplicates summed, columns sorted)."""
    m = matrix.tocsr(copy=True)
    m.sum_duplicates()  # also sorts the column ids of each row
    dtype = _default_dtype(matrix, dtype)
    base = CSRArray(np.asarray(m.data, dtype=dtype), np.asarray(m.indices, _INDEX),
                    np.asarray(m.indptr, _INDEX), m.shape, check=False)
    return _placed(CSRNDArray, base, default_ctx(ctx))


def array(source_array: Any, ctx: Context | None = None, dtype: Any = None) -> Any:
    """A sparse array with a copy of ``source_array``'s contents.

    Parameters
    ----------
    source_array : CSRNDArray, RowSparseNDArray or scipy.sparse matrix
        The source (a scipy matrix becomes csr, canonicalised).
    ctx : Context, optional
        The device (default: the current context).
    dtype : str or numpy.dtype, optional
        The value type (default: the source's).

    Raises
    ------
    ValueError
        For a dense source (``mx.nd.array`` makes dense arrays, ``tostype`` sparse ones).
    """
    if isinstance(source_array, BaseSparseNDArray) or isinstance(
            source_array, (CSRArray, RowSparseArray)):
        source = sparse_view(source_array)
        ctx = default_ctx(ctx)
        out = source.astype(_default_dtype(source, dtype), copy=True)
        return out.as_in_context(ctx) if out.context != ctx else out
    if hasattr(source_array, "tocsr"):
        return _from_scipy(source_array, ctx, dtype)
    if isinstance(source_array, (np.ndarray, np.generic)) or is_array(source_array):
        raise ValueError(f"Please use mx.nd.array to create an NDArray with source_array of "
                         f"type {type(source_array).__name__}")
    raise ValueError(f"Unexpected source_array type: {type(source_array).__name__}")


def _from_dense(cls: type, arg1: Any, shape: Any, ctx: Context | None,
                dtype: Any) -> BaseSparseNDArray:
    """A dense source (NDArray, numpy array, nested lists): its non-zeros as ``cls`` on
    ``ctx``, dtype the source's (float32 for lists) unless given."""
    dense = _host(arg1, _default_dtype(arg1, dtype))
    _check_shape(dense.shape, shape)
    return _placed(cls, cls._raymod_type.from_dense(dense), default_ctx(ctx))


def csr_matrix(arg1: Any, shape: Any = None, ctx: Context | None = None,
               dtype: Any = None) -> CSRNDArray:
    """A :class:`CSRNDArray` (MXNet's ``mx.nd.sparse.csr_matrix``).

    ``arg1`` may be:

    - ``(data, indices, indptr)``: the csr arrays (NDArrays, numpy arrays or lists). The
      shape defaults to ``(len(indptr) - 1, max(indices) + 1)``; the arrays are not checked
      (``check_format`` does), as in MXNet. dtype: ``data``'s when it is an array, else
      float32.
    - ``(data, (row, col))``: coordinates; repeated ones are summed.
    - ``(M, N)``: an empty ``M x N`` array (float32 unless ``dtype``).
    - a ``CSRNDArray`` or scipy sparse matrix (copied, canonicalised).
    - a dense 2-d array or nested lists (its non-zeros).

    Parameters
    ----------
    arg1 : see above
    shape : tuple of int, optional
        Must match what ``arg1`` implies (ValueError otherwise).
    ctx : Context, optional
        The device (default: the current context).
    dtype : str or numpy.dtype, optional
        The value type.

    Returns
    -------
    CSRNDArray
    """
    if isinstance(arg1, tuple):
        if len(arg1) == 2:
            if isinstance(arg1[1], tuple) and len(arg1[1]) == 2:
                from scipy.sparse import coo_matrix

                data, (row, col) = arg1
                coo = coo_matrix((_host(data, None), (_host(row, None), _host(col, None))),
                                 shape=shape)
                _check_shape(coo.shape, shape)
                return _from_scipy(coo, ctx, dtype)
            _check_shape(arg1, shape)
            return _empty("csr", arg1, ctx, dtype)
        if len(arg1) == 3:
            return _csr_from_arrays(*arg1, shape=shape, ctx=ctx, dtype=dtype)
        raise ValueError(f"Unexpected length of input tuple: {len(arg1)}")
    if isinstance(arg1, CSRNDArray) or isinstance(arg1, CSRArray) or hasattr(arg1, "tocsr"):
        _check_shape(arg1.shape, shape)
        return array(arg1, ctx=ctx, dtype=dtype)
    if isinstance(arg1, (RowSparseNDArray, RowSparseArray)):
        raise ValueError("Unexpected input type: RowSparseNDArray")
    return _from_dense(CSRNDArray, arg1, shape, ctx, dtype)


def _csr_from_arrays(data: Any, indices: Any, indptr: Any, shape: Any, ctx: Context | None,
                     dtype: Any) -> CSRNDArray:
    dtype = _default_dtype(data, dtype)
    data, indices, indptr = _host(data, dtype), _host(indices, _INDEX), _host(indptr, _INDEX)
    if shape is None:
        if indices.shape[0] == 0:
            raise ValueError("invalid shape: cannot infer the columns of a csr array without "
                             "indices; give shape=")
        shape = (len(indptr) - 1, int(indices.max()) + 1)
    shape = _shape_tuple(shape)
    if data.ndim != 1 or indptr.ndim != 1 or indices.ndim != 1 or indptr.shape[0] == 0 or \
            len(shape) != 2:
        raise ValueError(f"invalid shape: data {data.shape}, indices {indices.shape}, indptr "
                         f"{indptr.shape} for a csr array of shape {shape}")
    # unchecked, as MXNet (check_format validates): a malformed definition fails there
    base = CSRArray(data, indices, indptr, shape, check=False)
    return _placed(CSRNDArray, base, default_ctx(ctx))


def row_sparse_array(arg1: Any, shape: Any = None, ctx: Context | None = None,
                     dtype: Any = None) -> RowSparseNDArray:
    """A :class:`RowSparseNDArray` (MXNet's ``mx.nd.sparse.row_sparse_array``).

    ``arg1`` may be:

    - ``(data, indices)``: the held rows and their ascending row ids; the shape defaults to
      ``(indices[-1] + 1,) + data.shape[1:]``. Not checked (``check_format`` does).
    - a shape ``(D0, D1, ...)``: an empty array.
    - a ``RowSparseNDArray`` (copied).
    - a dense array or nested lists (its non-zero rows).

    Parameters
    ----------
    arg1 : see above
    shape : tuple of int, optional
        Must match what ``arg1`` implies (ValueError otherwise).
    ctx : Context, optional
        The device (default: the current context).
    dtype : str or numpy.dtype, optional
        The value type (``data``'s when it is an array, else float32).

    Returns
    -------
    RowSparseNDArray
    """
    if isinstance(arg1, tuple):
        if len(arg1) < 2:
            raise ValueError(f"Unexpected length of input tuple: {len(arg1)}")
        if len(arg1) > 2 or all(isinstance(d, numbers.Integral) for d in arg1):
            _check_shape(arg1, shape)
            return _empty("row_sparse", arg1, ctx, dtype)
        return _rsp_from_arrays(arg1[0], arg1[1], shape=shape, ctx=ctx, dtype=dtype)
    if isinstance(arg1, (RowSparseNDArray, RowSparseArray)):
        _check_shape(arg1.shape, shape)
        return array(arg1, ctx=ctx, dtype=dtype)
    if isinstance(arg1, (CSRNDArray, CSRArray)):
        raise ValueError("Unexpected input type: CSRNDArray")
    return _from_dense(RowSparseNDArray, arg1, shape, ctx, dtype)


def _rsp_from_arrays(data: Any, indices: Any, shape: Any, ctx: Context | None,
                     dtype: Any) -> RowSparseNDArray:
    dtype = _default_dtype(data, dtype)
    data, indices = _host(data, dtype), _host(indices, _INDEX)
    if shape is None:
        if indices.shape[0] == 0:
            raise ValueError("invalid shape: cannot infer the rows of a row_sparse array "
                             "without indices; give shape=")
        shape = (int(indices[-1]) + 1,) + tuple(data.shape[1:])
    shape = _shape_tuple(shape)
    if data.ndim != len(shape) or indices.ndim != 1 or int(np.prod(shape[1:])) == 0:
        raise ValueError(f"invalid shape: data {data.shape}, indices {indices.shape} for a "
                         f"row_sparse array of shape {shape}")
    base = RowSparseArray(data, indices, shape, check=False)
    return _placed(RowSparseNDArray, base, default_ctx(ctx))


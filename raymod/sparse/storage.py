"""Storage types: which one an array has, converting between them, MXNet's constructors."""
from __future__ import annotations

from typing import Any

import numpy as np

from ._common import module_of
from .csr import CSRArray
from .row_sparse import RowSparseArray

STYPES = ("default", "csr", "row_sparse")


def stype_of(array: Any) -> str:
    """``'csr'``, ``'row_sparse'`` or ``'default'`` (a dense array)."""
    return getattr(array, "stype", "default") if is_sparse(array) else "default"


def is_sparse(array: Any) -> bool:
    return isinstance(array, (CSRArray, RowSparseArray))


def check_stype(stype: Any, what: str = "stype") -> str:
    """``stype`` if it names a storage type, else ValueError naming ``what``."""
    if stype is None:
        return "default"
    if stype not in STYPES:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, STYPES))}, got {stype!r}")
    return stype


def cast_storage(array: Any, stype: str):
    """``array`` in storage ``stype`` (the same object when it already is)."""
    stype = check_stype(stype)
    have = stype_of(array)
    if have == stype:
        return array
    dense = array.todense() if have != "default" else array
    if stype == "default":
        return dense
    if stype == "csr":
        return CSRArray.from_dense(dense)
    return RowSparseArray.from_dense(dense)


def zeros(stype: str, shape: Any, dtype: Any = np.float32, xp=np):
    """All zeros in storage ``stype``."""
    stype = check_stype(stype)
    shape = (int(shape),) if np.isscalar(shape) else tuple(int(d) for d in shape)
    if stype == "csr":
        return CSRArray.empty(shape, dtype, xp)
    if stype == "row_sparse":
        return RowSparseArray.empty(shape, dtype, xp)
    return xp.zeros(shape, dtype)


def csr_matrix(arg1: Any, shape: Any = None, dtype: Any = None) -> CSRArray:
    """A csr array from ``(data, indices, indptr)``, ``(data, (row, col))``, a scipy.sparse
    matrix, a csr array or a dense 2-d array (MXNet's ``mx.nd.sparse.csr_matrix``)."""
    if isinstance(arg1, CSRArray):
        out = arg1.copy()
    elif hasattr(arg1, "tocsr"):
        out = CSRArray.from_scipy(arg1)
    elif isinstance(arg1, tuple) and len(arg1) == 3:
        data, indices, indptr = (_host_or_device(a) for a in arg1)
        if shape is None:
            cols = int(np.max(indices)) + 1 if len(indices) else 0
            shape = (len(indptr) - 1, cols)
        out = CSRArray(data, indices, indptr, shape)
    elif isinstance(arg1, tuple) and len(arg1) == 2:  # (data, (row, col)): coordinates
        from scipy.sparse import coo_matrix
        data, (row, col) = arg1
        out = CSRArray.from_scipy(coo_matrix((np.asarray(data), (np.asarray(row),
                                                                 np.asarray(col))), shape=shape))
    elif isinstance(arg1, tuple) and len(arg1) == 2 or _is_shape(arg1):
        out = CSRArray.empty(tuple(arg1), dtype or np.float32)
    else:
        dense = _host_or_device(arg1)
        if dense.ndim != 2:
            raise ValueError(f"csr_matrix: a dense source must be 2-d, got shape {dense.shape}")
        out = CSRArray.from_dense(dense)
    if shape is not None and tuple(shape) != out.shape:
        raise ValueError(f"csr_matrix: shape {tuple(shape)} does not match the data's "
                         f"{out.shape}")
    return out.astype(dtype, copy=False) if dtype is not None else out


def row_sparse_array(arg1: Any, shape: Any = None, dtype: Any = None) -> RowSparseArray:
    """A row_sparse array from ``(data, indices)``, a row_sparse array, a shape (all zeros)
    or a dense array (its non-zero rows) (MXNet's ``mx.nd.sparse.row_sparse_array``)."""
    if isinstance(arg1, RowSparseArray):
        out = arg1.copy()
    elif _is_shape(arg1):
        out = RowSparseArray.empty(tuple(arg1), dtype or np.float32)
    elif isinstance(arg1, tuple) and len(arg1) == 2:
        data, indices = (_host_or_device(a) for a in arg1)
        if shape is None:
            rows = int(np.max(indices)) + 1 if len(indices) else 0
            shape = (rows,) + tuple(data.shape[1:])
        out = RowSparseArray(data, indices, shape)
    else:
        out = RowSparseArray.from_dense(_host_or_device(arg1))
    if shape is not None and tuple(shape) != out.shape:
        raise ValueError(f"row_sparse_array: shape {tuple(shape)} does not match the data's "
                         f"{out.shape}")
    return out.astype(dtype, copy=False) if dtype is not None else out


def retain(array: RowSparseArray, indices: Any) -> RowSparseArray:
    """The rows of ``array`` whose ids are in ``indices`` (MXNet's ``sparse.retain``)."""
    if not isinstance(array, RowSparseArray):
        raise TypeError(f"retain: data must be a row_sparse array, got {stype_of(array)} storage")
    return array.retain(indices)


def _is_shape(value: Any) -> bool:
    return isinstance(value, tuple) and all(isinstance(d, (int, np.integer)) for d in value)


def _host_or_device(value: Any):
    if module_of(value) is not np:
        return value
    return np.asarray(value)

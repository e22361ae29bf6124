"""The products and gathers sparse ops are made of, on scipy.sparse / cupyx kernels.

None of them builds a dense array of a csr operand's or a table's full shape: a product with
a row_sparse table reads only the rows the csr's columns name, and a table's gradient holds
only those rows.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .csr import CSRArray
from .row_sparse import RowSparseArray


def csr_times(csr: CSRArray, rhs: Any):
    """``csr @ rhs`` for a dense or row_sparse 2-d ``rhs``: a dense (rows, rhs cols) array.

    With a row_sparse ``rhs`` the csr's columns are renumbered to the held rows' positions;
    columns whose row is not held contribute zero (an unpulled row is a zero row).
    """
    if isinstance(rhs, RowSparseArray):
        if not rhs.is_full:
            return _compacted(csr, rhs) @ rhs.data
        rhs = rhs.data
    return csr.scipy() @ rhs


def _compacted(csr: CSRArray, table: RowSparseArray):
    """``csr`` with column ``c`` renamed to the position of row ``c`` among ``table``'s held
    rows, dropping the entries whose row is not held: a (rows, held rows) scipy matrix."""
    xp = csr.xp
    pos, held = table.positions(csr.indices)
    data = csr.data
    if held is not None and not bool(held.all()):
        data = xp.where(held, data, 0)
    m = _csr_matrix(xp)((data, pos, csr.indptr), shape=(csr.shape[0], table.indices.shape[0]))
    return m


def csr_t_times(csr: CSRArray, dense: Any, rows: int) -> RowSparseArray:
    """``csr.T @ dense`` as a row_sparse array of ``rows`` rows: only the csr's columns.

    This is the gradient of the table in ``dot(csr, table)``: the rows a batch touched.
    """
    xp = csr.xp
    touched, renamed = xp.unique(csr.indices, return_inverse=True)
    compact = _csr_matrix(xp)((csr.data, renamed.reshape(-1), csr.indptr),
                              shape=(csr.shape[0], touched.shape[0]))
    block = xp.asarray(compact.T @ dense)
    return RowSparseArray(block.astype(dense.dtype, copy=False), touched.astype(np.int64),
                          (rows,) + tuple(dense.shape[1:]), check=False)


def scatter_rows(xp, ids: Any, grads: Any, shape: tuple) -> RowSparseArray:
    """Sum the gradient rows ``grads[i]`` into the table rows ``ids[i]``: a row_sparse array
    holding the rows named (the gradient of a lookup ``table[ids]``)."""
    ids = ids.reshape(-1)
    width = int(np.prod(shape[1:]))
    touched, renamed = xp.unique(ids, return_inverse=True)
    out = xp.zeros((touched.shape[0], width), grads.dtype)
    # flat 1-d add.at: numpy's fast path, one atomic kernel on CuPy
    flat = (renamed.reshape(-1, 1) * width + xp.arange(width)).reshape(-1)
    xp.add.at(out.reshape(-1), flat, grads.reshape(-1))
    return RowSparseArray(out.reshape((touched.shape[0],) + tuple(shape[1:])),
                          touched.astype(np.int64), shape, check=False)


def _csr_matrix(xp):
    if xp is np:
        from scipy.sparse import csr_matrix
    else:  # pragma: no cover - GPU only
        from cupyx.scipy.sparse import csr_matrix
    return csr_matrix

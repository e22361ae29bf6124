"""Row-level work on a stored table: checking row ids, pulling rows, summing sparse pushes.

A row_sparse key is stored dense (a table) by an in-process store, or as row ranges by the
KVServer shards; either way pulls copy out only the rows asked for, and pushes of row_sparse
gradients carry only the rows a batch touched.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..base import MXNetError
from ..context import as_numpy
from ..sparse import RowSparseArray, is_sparse
from ..sparse.row_sparse import sum_rows


def checked_row_ids(row_ids: Any, rows: int, key: Any) -> np.ndarray:
    """``row_ids`` as sorted unique int64 host ids, or ValueError naming the ids at fault.

    Parameters
    ----------
    row_ids : array of int (numpy, cupy, or an NDArray)
        Rows wanted, in any order, repeats allowed.
    rows : int
        Rows of the table.
    key : int or str
        The kvstore key, for the message.
    """
    ids = as_numpy(row_ids.todense() if is_sparse(row_ids) else row_ids)
    if ids.dtype.kind not in "iuf":
        raise ValueError(f"row_sparse_pull: row_ids for key {key!r} must be integers, got "
                         f"dtype {ids.dtype}")
    ids = ids.reshape(-1)
    if ids.dtype.kind == "f":
        if ids.size and not np.array_equal(ids, np.floor(ids)):
            raise ValueError(f"row_sparse_pull: row_ids for key {key!r} must be whole numbers")
    ids = np.unique(ids.astype(np.int64))
    if ids.size and (ids[0] < 0 or ids[-1] >= rows):
        bad = ids[0] if ids[0] < 0 else ids[-1]
        raise ValueError(f"row_sparse_pull: row id {int(bad)} for key {key!r} is outside the "
                         f"table's rows [0, {rows})")
    return ids


def rows_of(table: Any, ids: np.ndarray) -> RowSparseArray:
    """The rows ``ids`` (sorted, unique, checked) of a dense ``table``, copied."""
    return RowSparseArray(table[ids], ids, table.shape, check=False)


def summed(values: list) -> Any:
    """The sum of pushed values in the order given: row_sparse when all of them are."""
    if all(isinstance(v, RowSparseArray) for v in values):
        return sum_rows(values, values[0].shape)
    dense = [v.todense() if is_sparse(v) else v for v in values]
    total = dense[0].copy() if len(dense) > 1 else dense[0]
    for v in dense[1:]:
        total += v
    return total


def assign_rows(table: Any, value: RowSparseArray) -> None:
    """``table[...] = value``: the pushed rows, zeros elsewhere (a push with no updater)."""
    table[...] = 0
    table[value.indices] = value.data


def check_sparse_push(key: Any, values: list, compression: Any) -> None:
    """MXNetError for a push that cannot be sparse: with gradient compression."""
    if compression is not None and any(is_sparse(v) for v in values):
        raise MXNetError(f"push: key {key!r} got a row_sparse gradient, and gradient "
                         "compression compresses dense gradients only")

"""RowSparseArray: some rows of an array, by row id (MXNet's ``stype='row_sparse'``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ._common import SparseBase, index_array, module_of


class RowSparseArray(SparseBase):
    """An array of ``shape`` of which only the rows ``indices`` are held, in ``data``.

    Rows not held are zeros. Gradients of embedding tables and of ``dot(csr, weight)``'s
    weight are row_sparse (the rows a batch touched), and so are the parts of a table a worker
    pulls (the rows its batch needs).

    Parameters
    ----------
    data : array
        The held rows, shape ``(len(indices),) + shape[1:]``.
    indices : array of int
        Their row ids: ascending, unique, below ``shape[0]``.
    shape : tuple of ints
        The dense shape.
    check : bool, default True
        Validate (ValueError naming the argument at fault).

    Notes
    -----
    As a holder bound into an executor, ``x[:] = value`` replaces the held rows with
    ``value``'s (a row_sparse array, or a dense array whose non-zero rows are kept);
    ``x[:] = 0`` drops them all. ``x += other`` adds another row_sparse array's rows.
    """

    stype = "row_sparse"
    _part_names = ("data", "indices")

    def __init__(self, data: Any, indices: Any, shape: tuple, check: bool = True):
        xp = module_of(data)
        self.data = xp.asarray(data)
        self.indices = index_array(xp, indices, "indices")
        self.shape = tuple(int(d) for d in shape)
        if check:
            self.check_format()

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def empty(cls, shape: tuple, dtype: Any = np.float32, xp=np) -> "RowSparseArray":
        """No rows held: all zeros."""
        shape = tuple(int(d) for d in shape)
        return cls(xp.zeros((0,) + shape[1:], dtype), xp.zeros(0, np.int64), shape, check=False)

    @classmethod
    def from_dense(cls, dense: Any) -> "RowSparseArray":
        """The rows of ``dense`` that hold a non-zero value."""
        xp = module_of(dense)
        if dense.ndim == 0:
            raise ValueError("a row_sparse array has at least one dimension")
        flat = dense.reshape(dense.shape[0], -1)
        rows = xp.nonzero((flat != 0).any(axis=1))[0].astype(np.int64)
        return cls(dense[rows], rows, dense.shape, check=False)

    @classmethod
    def full(cls, dense: Any) -> "RowSparseArray":
        """Every row of ``dense`` held (its memory shared, not copied)."""
        xp = module_of(dense)
        return cls(dense, xp.arange(dense.shape[0], dtype=np.int64), dense.shape, check=False)

    def check_format(self) -> None:
        """ValueError when the arrays do not form a valid row_sparse array of ``shape``."""
        if not self.shape or min(self.shape) < 0:
            raise ValueError(f"shape of a row_sparse array must be non-negative ints, "
                             f"got {self.shape}")
        want = (self.indices.shape[0],) + self.shape[1:]
        if tuple(self.data.shape) != want:
            raise ValueError(f"data must have shape (len(indices),) + shape[1:] = {want}, got "
                             f"{tuple(self.data.shape)}")
        n = self.indices.shape[0]
        if n:
            low, high = int(self.indices[0]), int(self.indices[-1])
            if bool((self.xp.diff(self.indices) <= 0).any()):
                raise ValueError("indices (row ids) must be strictly ascending: sorted, unique")
            if low < 0 or high >= self.shape[0]:
                raise ValueError(f"indices (row ids) must lie in [0, {self.shape[0]}) "
                                 f"(shape[0] = {self.shape[0]}), got {low} to {high}")

    # --- properties --------------------------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def table(self):
        """The dense array of every row, when every row is held (the executor's copy of a
        parameter in one process); ValueError otherwise."""
        if not self.is_full:
            raise ValueError(f"this row_sparse array of shape {self.shape} holds "
                             f"{self.indices.shape[0]} of its rows only (pull them all first)")
        return self.data

    @property
    def is_full(self) -> bool:
        """Every row is held (``data`` is the dense array)."""
        return self.indices.shape[0] == self.shape[0]

    # --- conversion --------------------------------------------------------------------------
    def todense(self):
        """A dense array of ``shape`` (the held rows' memory when every row is held)."""
        if self.is_full:
            return self.data
        out = self.xp.zeros(self.shape, self.dtype)
        out[self.indices] = self.data
        return out

    def copy(self) -> "RowSparseArray":
        return RowSparseArray(self.data.copy(), self.indices.copy(), self.shape, check=False)

    def positions(self, row_ids: Any):
        """For each of ``row_ids``: its position in ``indices``, and whether it is held."""
        xp = self.xp
        if self.is_full:
            return row_ids, None
        n = self.indices.shape[0]
        pos = xp.searchsorted(self.indices, row_ids)
        if n == 0:
            return xp.zeros_like(pos), xp.zeros(pos.shape, bool)
        pos = xp.minimum(pos, n - 1)
        return pos, self.indices[pos] == row_ids

    def take(self, row_ids: Any):
        """The rows ``row_ids`` (any shape of ids), dense, zeros for rows not held."""
        if self.indices.shape[0] == 0:  # nothing held: every row asked for is zero
            shape = tuple(getattr(row_ids, "shape", (len(row_ids),))) + self.shape[1:]
            return self.xp.zeros(shape, self.dtype)
        pos, held = self.positions(row_ids)
        rows = self.data[pos]
        if held is not None and not bool(held.all()):  # where, not a product: inf * 0 is nan
            rows = self.xp.where(held.reshape(held.shape + (1,) * (rows.ndim - held.ndim)),
                                 rows, 0).astype(rows.dtype, copy=False)
        return rows

    def retain(self, row_ids: Any) -> "RowSparseArray":
        """Only the held rows among ``row_ids`` (MXNet's ``sparse.retain``)."""
        xp = self.xp
        wanted = xp.unique(index_array(xp, row_ids, "row_ids"))
        pos, held = self.positions(wanted)
        if held is not None:
            pos, wanted = pos[held], wanted[held]
        return RowSparseArray(self.data[pos], wanted, self.shape, check=False)

    # --- arithmetic the executor and the optimizers need --------------------------------------
    def __add__(self, other: Any):
        if isinstance(other, RowSparseArray):
            return _sum_rows([self, other], self.shape)
        if np.isscalar(other) and other == 0:
            return self
        return self.todense() + other  # a dense operand makes a dense sum

    __radd__ = __add__

    def __iadd__(self, other: Any) -> "RowSparseArray":
        self[:] = self + other
        return self

    def __mul__(self, scalar: Any) -> "RowSparseArray":
        if not np.isscalar(scalar):
            return NotImplemented
        return RowSparseArray(self.data * scalar, self.indices, self.shape, check=False)

    __rmul__ = __mul__

    def __setitem__(self, key: Any, value: Any) -> None:
        """``x[:] = value``: hold ``value``'s rows instead (see the class notes)."""
        if not (key is Ellipsis or key == slice(None)):
            raise TypeError(f"a row_sparse array is assigned whole (x[:] = other), got {key!r}")
        if np.isscalar(value):
            if value != 0:
                raise ValueError(f"a row_sparse array can be set to 0 only, got {value!r}")
            value = RowSparseArray.empty(self.shape, self.dtype, self.xp)
        elif not isinstance(value, RowSparseArray):
            value = RowSparseArray.from_dense(self.xp.asarray(value))
        if tuple(value.shape) != self.shape:
            raise ValueError(f"assigning a row_sparse array of shape {value.shape} into one "
                             f"of shape {self.shape}")
        self.data = value.data.astype(self.dtype, copy=False)
        self.indices = value.indices

    def __reduce__(self):
        return (_rebuild, (self.data, self.indices, self.shape))


def _rebuild(data, indices, shape) -> RowSparseArray:
    return RowSparseArray(data, indices, shape, check=False)


def _sum_rows(parts: list, shape: tuple) -> RowSparseArray:
    """The sum of row_sparse arrays, summed in the order given (a fixed order keeps results
    bit-identical however the parts arrived)."""
    first = parts[0]
    parts = [p for p in parts if p.indices.shape[0]]
    if not parts:
        return RowSparseArray.empty(shape, first.dtype, first.xp)
    if len(parts) == 1:
        return parts[0]
    xp = parts[0].xp
    ids = xp.concatenate([p.indices for p in parts])
    rows, where = xp.unique(ids, return_inverse=True)
    out = xp.zeros((rows.shape[0],) + tuple(shape[1:]), parts[0].dtype)
    start = 0
    for p in parts:  # one add per part: the sum order is the parts' order
        n = p.indices.shape[0]
        out[where[start:start + n]] += p.data
        start += n
    return RowSparseArray(out, rows, shape, check=False)


def sum_rows(parts: list, shape: tuple) -> RowSparseArray:
    """Public name of the ordered sum of row_sparse arrays (kvstores and servers use it)."""
    return _sum_rows(list(parts), tuple(shape))

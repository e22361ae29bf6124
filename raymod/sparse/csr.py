"""CSRArray: a 2-d array in compressed sparse row form (MXNet's ``stype='csr'``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ._common import SparseBase, index_array, module_of


class CSRArray(SparseBase):
    """A 2-d sparse array: row ``i`` holds ``data[indptr[i]:indptr[i+1]]`` at the columns
    ``indices[indptr[i]:indptr[i+1]]``.

    Parameters
    ----------
    data : array
        The stored values, 1-d.
    indices : array of int
        Their column ids, ascending within each row and below ``shape[1]``.
    indptr : array of int
        ``shape[0] + 1`` offsets into ``data``, from 0 to ``len(data)``, never decreasing.
    shape : tuple of two ints
        The dense shape.
    check : bool, default True
        Validate the three arrays (ValueError naming the one at fault); raymod's own kernels
        pass False for arrays they built.

    Notes
    -----
    A CSRArray bound into an executor is a holder: ``x[:] = other`` replaces its contents (a
    new batch with another number of non-zeros), so every reference to it sees the new batch.
    """

    stype = "csr"
    _part_names = ("data", "indices", "indptr")

    def __init__(self, data: Any, indices: Any, indptr: Any, shape: tuple, check: bool = True):
        xp = module_of(data)
        self.data = xp.asarray(data)
        self.indices = index_array(xp, indices, "indices")
        self.indptr = index_array(xp, indptr, "indptr")
        self.shape = tuple(int(d) for d in shape)
        if check:
            self.check_format()

    # --- construction ------------------------------------------------------------------------
    @classmethod
    def empty(cls, shape: tuple, dtype: Any = np.float32, xp=np) -> "CSRArray":
        """No stored values: all zeros."""
        return cls(xp.zeros(0, dtype), xp.zeros(0, np.int64),
                   xp.zeros(int(shape[0]) + 1, np.int64), shape, check=False)

    @classmethod
    def from_dense(cls, dense: Any) -> "CSRArray":
        """The non-zero entries of a 2-d dense array."""
        if dense.ndim != 2:
            raise ValueError(f"a csr array is 2-d; got a dense array of shape {dense.shape}")
        xp = module_of(dense)
        rows, cols = xp.nonzero(dense)
        indptr = xp.zeros(dense.shape[0] + 1, np.int64)
        xp.cumsum(xp.bincount(rows, minlength=dense.shape[0]), out=indptr[1:])
        return cls(dense[rows, cols], cols, indptr, dense.shape, check=False)

    @classmethod
    def from_scipy(cls, matrix: Any) -> "CSRArray":
        """A scipy.sparse (or cupyx.scipy.sparse) matrix, in canonical csr form."""
        m = matrix.tocsr()
        if not m.has_sorted_indices:
            m = m.sorted_indices()
        return cls(m.data, m.indices, m.indptr, m.shape, check=False)

    def check_format(self) -> None:
        """ValueError when the arrays do not form a valid csr array of ``shape``."""
        if len(self.shape) != 2 or min(self.shape) < 0:
            raise ValueError(f"shape of a csr array must be 2 non-negative ints, got {self.shape}")
        rows, cols = self.shape
        xp = self.xp
        if self.data.ndim != 1 or self.data.shape != self.indices.shape:
            raise ValueError(f"data and indices must be 1-d of one length, got shapes "
                             f"{tuple(self.data.shape)} and {tuple(self.indices.shape)}")
        if self.indptr.shape != (rows + 1,):
            raise ValueError(f"indptr must have shape[0] + 1 = {rows + 1} entries, got "
                             f"{self.indptr.shape[0]}")
        nnz = self.data.shape[0]
        if int(self.indptr[0]) != 0 or int(self.indptr[-1]) != nnz:
            raise ValueError(f"indptr must run from 0 to len(data) = {nnz}, got "
                             f"{int(self.indptr[0])} to {int(self.indptr[-1])}")
        if rows and bool((xp.diff(self.indptr) < 0).any()):
            raise ValueError("indptr must never decrease")
        if nnz:
            low, high = int(self.indices.min()), int(self.indices.max())
            if low < 0 or high >= cols:
                raise ValueError(f"indices must lie in [0, {cols}) (shape[1] = {cols}), got "
                                 f"values from {low} to {high}")
            step = xp.diff(self.indices)
            row_starts = self.indptr[1:-1]
            inside = xp.ones(nnz - 1, bool) if nnz > 1 else xp.zeros(0, bool)
            if nnz > 1:  # a row's first entry may be below the previous row's last
                starts = row_starts[(row_starts > 0) & (row_starts < nnz)]
                inside[starts - 1] = False
                if bool((step[inside] <= 0).any()):
                    raise ValueError("indices must be strictly ascending within each row "
                                     "(sorted, no repeated column)")

    # --- properties --------------------------------------------------------------------------
    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    @property
    def nnz(self) -> int:
        return int(self.data.shape[0])

    # --- conversion --------------------------------------------------------------------------
    def scipy(self):
        """The same arrays as a scipy.sparse (cupyx.scipy.sparse on GPU) csr_matrix, no copy."""
        if self.xp is np:
            from scipy.sparse import csr_matrix
        else:  # pragma: no cover - GPU only
            from cupyx.scipy.sparse import csr_matrix
        return csr_matrix((self.data, self.indices, self.indptr), shape=self.shape, copy=False)

    def todense(self):
        """A dense array of ``shape``."""
        xp = self.xp
        out = xp.zeros(self.shape, self.dtype)
        rows = xp.repeat(xp.arange(self.shape[0]), xp.diff(self.indptr).astype(np.int64))
        out[rows, self.indices] = self.data
        return out

    def copy(self) -> "CSRArray":
        return CSRArray(self.data.copy(), self.indices.copy(), self.indptr.copy(), self.shape,
                        check=False)

    def row_ids(self):
        """The row of every stored value."""
        xp = self.xp
        return xp.repeat(xp.arange(self.shape[0]), xp.diff(self.indptr).astype(np.int64))

    def unique_columns(self):
        """The ascending column ids present in the array (the rows of a weight it touches)."""
        return self.xp.unique(self.indices)

    # --- rows --------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> "CSRArray":
        if isinstance(key, (int, np.integer)):
            key = slice(int(key), int(key) + 1)
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError(f"a csr array takes row slices with step 1, got {key!r}")
        start, stop, _ = key.indices(self.shape[0])
        stop = max(stop, start)
        lo, hi = int(self.indptr[start]), int(self.indptr[stop])
        return CSRArray(self.data[lo:hi], self.indices[lo:hi], self.indptr[start:stop + 1] - lo,
                        (stop - start, self.shape[1]), check=False)

    def take_rows(self, rows: Any) -> "CSRArray":
        """The rows at ``rows`` (any order, repeats allowed), as a new csr array."""
        xp = self.xp
        rows = index_array(xp, rows, "rows")
        counts = (self.indptr[rows + 1] - self.indptr[rows]).astype(np.int64)
        indptr = xp.zeros(rows.shape[0] + 1, np.int64)
        xp.cumsum(counts, out=indptr[1:])
        # position of each kept value in the source: its row's start plus its offset
        offsets = xp.arange(int(indptr[-1])) - xp.repeat(indptr[:-1], counts)
        src = xp.repeat(self.indptr[rows], counts) + offsets
        return CSRArray(self.data[src], self.indices[src], indptr,
                        (rows.shape[0], self.shape[1]), check=False)

    def __add__(self, other: Any):
        """A csr sum for a csr ``other`` (an executor summing two readers' gradients), else
        the dense sum."""
        if isinstance(other, CSRArray):
            return CSRArray.from_scipy(self.scipy() + other.scipy())
        if np.isscalar(other) and other == 0:
            return self
        return self.todense() + other

    __radd__ = __add__

    def __setitem__(self, key: Any, value: Any) -> None:
        """``x[:] = other``: take another csr array's contents (the holder semantics)."""
        if not (key is Ellipsis or key == slice(None)):
            raise TypeError(f"a csr array is assigned whole (x[:] = other), got key {key!r}")
        if isinstance(value, CSRArray):
            other = value
        elif hasattr(value, "tocsr"):
            other = CSRArray.from_scipy(value)
        else:
            raise TypeError(f"assigning into a csr array needs a csr array, got "
                            f"{type(value).__name__} (cast_storage(x, 'csr') converts a dense one)")
        if other.shape != self.shape:
            raise ValueError(f"assigning a csr array of shape {other.shape} into one of shape "
                             f"{self.shape}")
        self.data = other.data.astype(self.dtype, copy=False)
        self.indices, self.indptr = other.indices, other.indptr

    def __reduce__(self):
        return (_rebuild, (self.data, self.indices, self.indptr, self.shape))


def _rebuild(data, indices, indptr, shape) -> CSRArray:
    return CSRArray(data, indices, indptr, shape, check=False)

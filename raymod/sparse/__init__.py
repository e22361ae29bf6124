"""Sparse storage: CSR for data, row_sparse for parameters and their gradients.

MXNet's two sparse storage types, as arrays that hold numpy (or CuPy) arrays inside:

- :class:`CSRArray` (``stype='csr'``): a 2-d array as ``data``, ``indices`` (column ids,
  ascending within each row) and ``indptr`` (where each row starts). Batches of click logs,
  LibSVM files, bag-of-words rows.
- :class:`RowSparseArray` (``stype='row_sparse'``): an array of which only some rows are held,
  as ``indices`` (ascending unique row ids) and ``data`` (those rows). Embedding tables a batch
  touches a few thousand rows of, and the gradients of such tables.

Neither converts to a dense array behind the caller's back (``numpy.asarray`` on one raises);
:func:`cast_storage` and ``.todense()`` do it when asked.
"""
from .csr import CSRArray
from .row_sparse import RowSparseArray
from .storage import (STYPES, cast_storage, csr_matrix, is_sparse, retain, row_sparse_array,
                      stype_of, zeros)

__all__ = ["CSRArray", "RowSparseArray", "STYPES", "cast_storage", "csr_matrix", "is_sparse",
           "retain", "row_sparse_array", "stype_of", "zeros"]

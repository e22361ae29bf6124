"""``RayDatasetIter``: batches from a ``ray.data.Dataset``, read by workers from its blocks.

A raymod addition in the style of ``mx.io`` iterators (names as ``NDArrayIter`` and
``ArrowIter``). The dataset is materialized once into Ray's object store; the iterator keeps
only the block references and where each block starts. Batches are planned as row ids, as
for every :class:`~raymod.io.RowIter`; a module on Ray workers sends those ids, and each
worker fetches the blocks holding its rows (zero-copy from shared memory where Arrow allows)
and keeps them for later steps. The driver never reads a row unless a batch's arrays are
asked for in the driver process, as in-process training does.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..sparse import CSRArray
from .arrow_iter import (ColumnRows, SparseSpecs, _as_columns, _input_names,
                         _per_row_shape_and_type, batch_descs, column_to_numpy, input_arrays,
                         sparse_desc, sparse_specs, vstack_csr)
from .base import DataDesc, DeferredRows, RowReader, check_rows, contiguous_range
from .sampler import RowIter

__all__ = ["RayDatasetIter", "BlockReader"]


def _is_ray_tensor(typ: pa.DataType) -> bool:
    """Ray Data's own fixed-shape tensor column types (``ArrowTensorType[V2]``)."""
    return (isinstance(typ, pa.ExtensionType) and not isinstance(typ, pa.FixedShapeTensorType)
            and hasattr(typ, "shape") and hasattr(typ, "value_type"))


def _column_desc(typ: pa.DataType, column: str) -> tuple[tuple[int, ...], np.dtype]:
    """Per-row shape and numpy dtype of a column of a Ray Data block."""
    if _is_ray_tensor(typ):
        return tuple(typ.shape), np.dtype(typ.value_type.to_pandas_dtype())
    if isinstance(typ, pa.ExtensionType) and not isinstance(typ, pa.FixedShapeTensorType):
        raise TypeError(f"column {column!r} has type {typ}, which has no fixed per-row shape; "
                        "RayDatasetIter needs scalars, fixed-size lists or fixed-shape tensors")
    return _per_row_shape_and_type(typ, column)


def _block_column(table: pa.Table, column: str) -> np.ndarray:
    """One column of a block as numpy (a read-only view of the block where Arrow allows)."""
    values = table.column(column)
    if _is_ray_tensor(values.type):
        chunks = [c.to_numpy(zero_copy_only=False) for c in values.chunks]
        return chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    return column_to_numpy(values, column)


def _block_rows(table: pa.Table) -> int:
    return table.num_rows


class BlockReader(RowReader):
    """Rows of a materialized Ray dataset, read from its blocks in the object store.

    Picklable (it holds object references and offsets only); the blocks a process reads are
    kept in that process, as numpy views of the Arrow buffers, for the calls that follow.

    Parameters
    ----------
    refs : list of ObjectRef
        The blocks (Arrow tables), in row order.
    offsets : array of int
        ``offsets[b]`` is the first row of block ``b``; ``offsets[-1]`` the row count.
    data_columns, label_columns : list of str
        The columns forming the data and label inputs.
    dtype : numpy dtype, optional
        Cast every column to this type when its block is loaded.
    sparse : dict, optional
        Columns that give csr arrays, as :func:`~raymod.io.arrow_iter.sparse_specs`
        returns them (``{ids_column: (values_column, width)}``).
    sparse_dtypes : dict, optional
        The value type of each of those csr arrays.
    """

    def __init__(self, refs: list, offsets: np.ndarray, data_columns: list[str],
                 label_columns: list[str], dtype: Any = None,
                 sparse: SparseSpecs | None = None,
                 sparse_dtypes: Mapping[str, Any] | None = None):
        self.refs = list(refs)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.data_columns, self.label_columns = list(data_columns), list(label_columns)
        self.dtype = dtype
        self.sparse = dict(sparse or {})
        self.sparse_dtypes = dict(sparse_dtypes or {})
        self._blocks: dict[int, dict[str, Any]] = {}  # numpy or csr arrays
        #: how many blocks this process fetched (the driver's stays 0 in worker training)
        self.blocks_fetched = 0

    def __getstate__(self) -> dict:
        return dict(self.__dict__, _blocks={}, blocks_fetched=0)

    @property
    def num_rows(self) -> int:
        """Rows in the dataset."""
        return int(self.offsets[-1])

    def _load(self, needed: Sequence[int]) -> None:
        missing = [b for b in needed if b not in self._blocks]
        if not missing:
            return
        import ray
        columns = self.data_columns + self.label_columns
        for b, table in zip(missing, ray.get([self.refs[b] for b in missing])):
            arrays = input_arrays(table, columns, self.sparse, self.sparse_dtypes, self.dtype,
                                  _block_column)
            if len(table) != self.offsets[b + 1] - self.offsets[b]:
                raise RuntimeError(f"block {b} has {len(table)} rows, "
                                   f"{self.offsets[b + 1] - self.offsets[b]} expected")
            self._blocks[b] = arrays
            self.blocks_fetched += 1

    def take(self, rows: Sequence[int] | np.ndarray) -> tuple[list, list]:
        """Data and label arrays of ``rows``: views for a run inside one block, else gathered."""
        rows = check_rows(rows, self.num_rows)
        block_of = np.searchsorted(self.offsets, rows, side="right") - 1
        needed = np.unique(block_of).tolist()
        self._load(needed)
        span = contiguous_range(rows)
        if span is not None and len(needed) == 1:
            b = needed[0]
            local = slice(span.start - self.offsets[b], span.stop - self.offsets[b])
            return ([self._blocks[b][c][local] for c in self.data_columns],
                    [self._blocks[b][c][local] for c in self.label_columns])
        local = rows - self.offsets[block_of]
        per_block = [(b, block_of == b) for b in needed]

        def gather(column: str) -> Any:
            first = self._blocks[needed[0]][column]
            if isinstance(first, CSRArray):
                # each block's rows, stacked block after block, then put in the asked order
                parts = [self._blocks[b][column].take_rows(local[mask]) for b, mask in per_block]
                stacked_at = np.concatenate([np.flatnonzero(mask) for _, mask in per_block])
                where = np.empty(rows.size, np.int64)
                where[stacked_at] = np.arange(rows.size)
                return vstack_csr(parts).take_rows(where)
            out = np.empty((rows.size,) + first.shape[1:], dtype=first.dtype)
            for b, mask in per_block:
                out[mask] = self._blocks[b][column][local[mask]]
            return out

        return [gather(c) for c in self.data_columns], [gather(c) for c in self.label_columns]


class RayDatasetIter(DeferredRows, ColumnRows, RowIter):
    """Iterate over columns of a ``ray.data.Dataset``; Ray workers read rows from its blocks.

    Parameters
    ----------
    dataset : ray.data.Dataset
        Any dataset (``ray.data.read_parquet(uri)``, ``ray.data.from_numpy(...)``, a
        transformed dataset...). Only the selected columns are materialized.
    data_columns : str or list of str
        Columns that form the data inputs, in this order.
    label_columns : str or list of str, optional
        Columns that form the label inputs; None or empty for none.
    batch_size : int, default 1
        Rows per batch.
    shuffle : bool, default False
        Visit the rows in a new random order every epoch.
    seed : int, optional
        Shuffle seed; by default drawn from :func:`raymod.random.generator`.
    last_batch_handle : {'pad', 'discard', 'roll_over'}, default 'pad'
        As in :class:`~raymod.io.NDArrayIter`.
    data_name, label_name : str or dict
        Input names, as in :class:`~raymod.io.ArrowIter` (defaults ``'data'`` and
        ``'softmax_label'`` for a single column).
    dtype : numpy dtype, optional
        Cast every selected column to this type when a block is read.
    sparse : dict, optional
        List columns of column ids that give :class:`~raymod.sparse.CSRArray` inputs,
        ``{ids_column: (values_column, width)}`` (or ``(None, width)`` / ``width`` for
        values 1), as in :class:`~raymod.io.ArrowIter`; each block's rows become one csr
        array when the block is read.

    Notes
    -----
    Construction materializes the selected columns into the object store (one pass of Ray
    Data over the source) and counts each block's rows with a small task per block; the
    rows themselves stay in the object store. Row ``i`` is the ``i``-th row of the
    materialized dataset in Ray's block order (set
    ``ray.data.DataContext.get_current().execution_options.preserve_order = True`` to keep
    the files' order). Batches list their row ids in ``index`` and read their arrays on
    first access; in process that is when the module uses them, on Ray workers never on
    the driver. Scalar columns give ``(batch,)`` arrays, fixed-size lists and tensor
    columns ``(batch, d1, ...)`` arrays.

    Examples
    --------
    >>> ds = ray.data.read_parquet("s3://bucket/train/")                   # doctest: +SKIP
    >>> it = rm.io.RayDatasetIter(ds, "image", "label", batch_size=64)     # doctest: +SKIP
    """

    def __init__(self, dataset: Any, data_columns: str | Sequence[str],
                 label_columns: str | Sequence[str] | None = None, batch_size: int = 1,
                 shuffle: bool = False, seed: int | None = None,
                 last_batch_handle: str = "pad",
                 data_name: str | Mapping[str, str] | None = "data",
                 label_name: str | Mapping[str, str] | None = "softmax_label",
                 dtype: Any = None, sparse: Mapping[str, Any] | None = None):
        import ray
        import ray.data
        if not isinstance(dataset, ray.data.Dataset):
            raise TypeError(f"RayDatasetIter dataset must be a ray.data.Dataset, got "
                            f"{type(dataset).__name__}")
        self.data_columns = _as_columns(data_columns)
        self.label_columns = _as_columns(label_columns)
        if not self.data_columns:
            raise ValueError("RayDatasetIter needs at least one data column")
        self.dtype = None if dtype is None else np.dtype(dtype)
        self._sparse = sparse_specs(sparse, self.data_columns + self.label_columns)
        columns = self._columns_to_read()
        names = list(dataset.columns())
        missing = [c for c in columns if c not in names]
        if missing:
            raise ValueError(f"columns {missing} not found; available columns: "
                             f"{', '.join(names)}")
        self._data_names = _input_names(self.data_columns, data_name)
        self._label_names = _input_names(self.label_columns, label_name)
        if sorted(names) != sorted(columns):  # only what batches need goes to the store
            dataset = dataset.select_columns(columns)
        #: the materialized dataset (its blocks stay alive while the iterator does); a
        #: dataset already materialized with just these columns is used as it is
        self.dataset = dataset.materialize()
        schema = self.dataset.schema().base_schema
        if not isinstance(schema, pa.Schema):
            raise TypeError(f"RayDatasetIter needs Arrow blocks; the dataset's schema is "
                            f"{type(schema).__name__}")
        self._descs = {}
        for column in dict.fromkeys(self.data_columns + self.label_columns):
            if column in self._sparse:
                self._descs[column] = sparse_desc(schema, column, self._sparse[column],
                                                  self.dtype)
                continue
            shape, np_type = _column_desc(schema.field(column).type, column)
            self._descs[column] = (shape, self.dtype or np_type)
        refs = self.dataset.to_arrow_refs()
        count = ray.remote(num_cpus=0)(_block_rows)
        rows = ray.get([count.remote(ref) for ref in refs])  # ints only reach the driver
        offsets = np.concatenate([[0], np.cumsum(rows, dtype=np.int64)])
        self._reader = BlockReader(refs, offsets, self.data_columns, self.label_columns,
                                   self.dtype, self._sparse, self._sparse_dtypes())
        self._init_sampler(batch_size, shuffle, last_batch_handle, seed)

    def __getstate__(self) -> dict:
        return dict(self.__dict__, dataset=None)  # the reader's refs keep the blocks

    # --- RowSource ----------------------------------------------------------------------
    @property
    def num_rows(self) -> int:
        """Rows in the dataset."""
        return self._reader.num_rows

    def take(self, rows: Sequence[int] | np.ndarray) -> tuple[list, list]:
        """Data and label arrays for ``rows``, read from the blocks in this process."""
        return self._reader.take(rows)

    def reader(self) -> BlockReader:
        """What Ray workers read rows with: the block references, never the rows."""
        return self._reader

    @property
    def provide_data(self) -> list[DataDesc]:
        """Descriptors of one batch of each data input (batch axis first; csr inputs say
        so in ``stype``)."""
        return batch_descs(self.batch_size, self.data_descs)

    @property
    def provide_label(self) -> list[DataDesc]:
        """Descriptors of one batch of each label input (batch axis first)."""
        return batch_descs(self.batch_size, self.label_descs)

    @property
    def blocks_fetched(self) -> int:
        """How many blocks this process has fetched (0 on a driver whose workers read)."""
        return self._reader.blocks_fetched

"""``ArrowIter``: batches from an Arrow table, a Parquet/CSV/IPC file, a dataset directory or a URI.

A raymod addition in the style of ``mx.io`` iterators. Each column becomes one input: a
scalar column gives a ``(batch,)`` array, a fixed-size-list column (nested lists, or the
``arrow.fixed_shape_tensor`` extension type) gives a ``(batch, d1, d2, ...)`` array.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from .base import DataDesc, check_rows, take_rows
from .sampler import RowIter

if TYPE_CHECKING:
    import pyarrow.dataset as ds

_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".parq": "parquet", ".csv": "csv",
            ".arrow": "ipc", ".feather": "ipc", ".ipc": "ipc"}


def _format_of(path: str) -> str | None:
    name = path.lower()
    if name.endswith(".gz") or name.endswith(".bz2"):
        name = name.rsplit(".", 1)[0]
    return _FORMATS.get(os.path.splitext(name)[1])


def _is_dataset(source: Any) -> bool:
    """Whether ``source`` is a ``pyarrow.dataset.Dataset``, without importing that module
    (it pulls in pandas: a third of every worker process's start) unless one could be."""
    module = sys.modules.get("pyarrow.dataset")
    return module is not None and isinstance(source, module.Dataset)


def _resolve(source: str, filesystem: pafs.FileSystem | None) -> tuple[pafs.FileSystem, str]:
    """Filesystem and path for a local path or a URI (``s3://``, ``gs://``, ``file://``...)."""
    if filesystem is not None:
        return filesystem, source
    if "://" in source:
        return pafs.FileSystem.from_uri(source)
    return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(source))


def _guess_format(fs: pafs.FileSystem, path: str) -> str:
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"ArrowIter source not found: {path!r}")
    if info.type == pafs.FileType.File:
        return _format_of(path) or "parquet"
    for entry in fs.get_file_info(pafs.FileSelector(path, recursive=True)):
        base = os.path.basename(entry.path)
        if entry.type == pafs.FileType.File and not base.startswith((".", "_")):
            fmt = _format_of(base)
            if fmt:
                return fmt
    return "parquet"


def _per_row_shape_and_type(typ: pa.DataType, column: str) -> tuple[tuple[int, ...], Any]:
    """Per-row shape and numpy dtype that a column of Arrow type ``typ`` converts to."""
    if isinstance(typ, pa.FixedShapeTensorType):
        return tuple(typ.shape), typ.value_type.to_pandas_dtype()
    shape = []
    while pa.types.is_fixed_size_list(typ):
        shape.append(typ.list_size)
        typ = typ.value_type
    if pa.types.is_list(typ) or pa.types.is_large_list(typ) or pa.types.is_list_view(typ):
        raise TypeError(f"column {column!r} is a variable-length list ({typ}); ArrowIter needs "
                        "scalars or fixed-size lists (pa.list_(type, size))")
    if pa.types.is_struct(typ) or pa.types.is_map(typ):
        raise TypeError(f"column {column!r} has type {typ}, which has no array form")
    return tuple(shape), np.dtype(typ.to_pandas_dtype())


def column_to_numpy(column: pa.ChunkedArray | pa.Array, name: str = "column") -> np.ndarray:
    """An Arrow column as a numpy array with one leading row axis.

    Fixed-size lists (nested or not) and fixed-shape tensors become an n-d array reshaped
    from the flattened child values. For numeric types without nulls and a single chunk the
    result is a read-only view of the Arrow buffer (no copy); several chunks are first
    combined into one buffer (one copy).

    Parameters
    ----------
    column : pyarrow.ChunkedArray or pyarrow.Array
        The column.
    name : str
        Used in error messages.
    """
    if isinstance(column, pa.ChunkedArray):
        column = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    n = len(column)
    shape, _ = _per_row_shape_and_type(column.type, name)
    values = column
    if isinstance(values.type, pa.FixedShapeTensorType):
        if values.type.permutation not in (None, list(range(len(shape)))):
            return np.asarray(values.to_numpy_ndarray())
        values = values.storage
    while pa.types.is_fixed_size_list(values.type):
        if values.null_count:
            raise ValueError(f"column {name!r} has {values.null_count} null entries")
        values = values.flatten()
    if values.null_count:
        raise ValueError(f"column {name!r} has {values.null_count} null values")
    return values.to_numpy(zero_copy_only=False).reshape((n,) + shape)


def _input_names(columns: list[str], name: str | Mapping[str, str] | None) -> list[str]:
    if isinstance(name, Mapping):
        unknown = set(name) - set(columns)
        if unknown:
            raise ValueError(f"renames given for columns {sorted(unknown)} that are not "
                             f"selected; selected columns: {columns}")
        return [name.get(c, c) for c in columns]
    if name is None or len(columns) != 1:
        return list(columns)
    return [name]


def _as_columns(columns: str | Sequence[str] | None) -> list[str]:
    if columns is None:
        return []
    return [columns] if isinstance(columns, str) else list(columns)


class ColumnRows:
    """Per-row descriptors of an iterator over named columns: ``_descs`` maps a column to
    its ``(shape, dtype)`` and ``data_columns``/``label_columns`` name the inputs' columns."""

    @property
    def data_descs(self) -> list[DataDesc]:
        """Per-row descriptors of the data inputs."""
        return [DataDesc(n, *self._descs[c]) for n, c in zip(self._data_names, self.data_columns)]

    @property
    def label_descs(self) -> list[DataDesc]:
        """Per-row descriptors of the label inputs."""
        return [DataDesc(n, *self._descs[c])
                for n, c in zip(self._label_names, self.label_columns)]


class ArrowIter(ColumnRows, RowIter):
    """Iterate over columns of Arrow data: a table, Parquet/CSV/Arrow files, or a dataset.

    Parameters
    ----------
    source : pyarrow.Table, pyarrow.dataset.Dataset, str or os.PathLike
        In-memory data, or a path or URI (``s3://bucket/dir``, ``file:///...``, anything
        :meth:`pyarrow.fs.FileSystem.from_uri` resolves) of a file or a directory of files.
    data_columns : str or list of str
        Columns that form the data inputs, in this order.
    label_columns : str or list of str, optional
        Columns that form the label inputs; None or empty for none.
    batch_size : int, default 1
        Rows per batch.
    shuffle : bool, default False
        Visit the rows in a new random order every epoch.
    last_batch_handle : {'pad', 'discard', 'roll_over'}, default 'pad'
        As in :class:`~raymod.io.NDArrayIter`.
    data_name : str or dict, default 'data'
        Input name used when there is exactly one data column; with several columns the
        column names are used. A dict ``{column: name}`` renames chosen columns; None keeps
        every column's own name.
    label_name : str or dict, default 'softmax_label'
        Likewise for labels.
    filesystem : pyarrow.fs.FileSystem, optional
        Filesystem ``source`` lives on; by default inferred from the path or URI.
    seed : int, optional
        Shuffle seed; by default drawn from :func:`raymod.random.generator`.
    format : {'parquet', 'csv', 'ipc'}, optional
        File format; by default guessed from file extensions (Parquet when unsure).
    dtype : numpy dtype, optional
        Cast every selected column to this type when loading (one copy); None keeps the
        Arrow types (CSV numbers are then float64 / int64).

    Notes
    -----
    Nothing is read until the first batch (or :meth:`take`) is asked for; then the
    selected columns are read once and kept in memory in this process. A pickled
    ``ArrowIter`` built from a path carries only the path, so each process that unpickles
    it (a worker handed row ids) reads the data itself. Columns read as a single Arrow chunk
    are turned into numpy without a copy, and batches of consecutive rows are views of
    them, hence read-only; shuffled batches are gathered copies.

    Examples
    --------
    >>> it = ArrowIter("train.parquet", "image", "label", batch_size=32)   # doctest: +SKIP
    >>> it.provide_data                                                   # doctest: +SKIP
    [DataDesc[data,(32, 1, 28, 28),float32,NCHW]]
    """

    def __init__(self, source: Any, data_columns: str | Sequence[str],
                 label_columns: str | Sequence[str] | None = None, batch_size: int = 1,
                 shuffle: bool = False, last_batch_handle: str = "pad",
                 data_name: str | Mapping[str, str] | None = "data",
                 label_name: str | Mapping[str, str] | None = "softmax_label",
                 filesystem: pafs.FileSystem | None = None, seed: int | None = None,
                 format: str | None = None, dtype: Any = None):
        self._table: pa.Table | None = None
        self._dataset: ds.Dataset | None = None
        self._fs, self._path, self._format = None, None, format
        if isinstance(source, pa.RecordBatch):
            source = pa.Table.from_batches([source])
        if isinstance(source, pa.Table):
            self._table = source
        elif _is_dataset(source):
            self._dataset = source
        elif isinstance(source, (str, os.PathLike)):
            self._fs, self._path = _resolve(os.fspath(source), filesystem)
            self._format = format or _guess_format(self._fs, self._path)
        else:
            raise TypeError("ArrowIter source must be a pyarrow Table or Dataset, a path or a "
                            f"URI; got {type(source).__name__}")
        self.data_columns = _as_columns(data_columns)
        self.label_columns = _as_columns(label_columns)
        if not self.data_columns:
            raise ValueError("ArrowIter needs at least one data column")
        self.dtype = None if dtype is None else np.dtype(dtype)
        schema = self._schema()
        missing = [c for c in self.data_columns + self.label_columns if c not in schema.names]
        if missing:
            raise ValueError(f"columns {missing} not found; available columns: "
                           f"{', '.join(schema.names)}")
        self._data_names = _input_names(self.data_columns, data_name)
        self._label_names = _input_names(self.label_columns, label_name)
        self._descs = {}
        for column in self.data_columns + self.label_columns:
            shape, np_type = _per_row_shape_and_type(schema.field(column).type, column)
            self._descs[column] = (shape, self.dtype or np_type)
        self._num_rows = self._count_rows()
        self._arrays: dict[str, np.ndarray] | None = None
        self._init_sampler(batch_size, shuffle, last_batch_handle, seed)

    # --- opening the source -------------------------------------------------------------
    def _open(self) -> ds.Dataset | pa.Table:
        if self._table is not None:
            return self._table
        if self._dataset is None:
            import pyarrow.dataset as ds
            self._dataset = ds.dataset(self._path, filesystem=self._fs, format=self._format)
        return self._dataset

    def _schema(self) -> pa.Schema:
        return self._open().schema

    def _count_rows(self) -> int:
        src = self._open()
        return src.num_rows if isinstance(src, pa.Table) else src.count_rows()

    def _load(self) -> dict[str, np.ndarray]:
        if self._arrays is None:
            columns = list(dict.fromkeys(self.data_columns + self.label_columns))
            src = self._open()
            table = src.select(columns) if isinstance(src, pa.Table) else src.to_table(columns)
            arrays = {}
            for column in columns:
                arr = column_to_numpy(table.column(column), column)
                arrays[column] = arr if self.dtype is None else arr.astype(self.dtype, copy=False)
            if len(table) != self._num_rows:
                raise RuntimeError(f"the source changed: it had {self._num_rows} rows when the "
                                   f"iterator was made, {len(table)} now")
            self._arrays = arrays
        return self._arrays

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if self._path is not None:      # re-readable: let the receiver read it itself
            state["_arrays"] = None
            state["_dataset"] = None
        return state

    # --- RowSource ----------------------------------------------------------------------
    @property
    def num_rows(self) -> int:
        """Rows in the source."""
        return self._num_rows

    def take(self, rows: Sequence[int] | np.ndarray) -> tuple[list, list]:
        """Data and label arrays for ``rows`` (row ids in the source's order)."""
        rows = check_rows(rows, self._num_rows)
        arrays = self._load()
        return ([take_rows(arrays[c], rows) for c in self.data_columns],
                [take_rows(arrays[c], rows) for c in self.label_columns])

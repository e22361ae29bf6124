"""``ArrowIter``: batches from an Arrow table, a Parquet/CSV/IPC file, a dataset directory or a URI.

A raymod addition in the style of ``mx.io`` iterators. Each column becomes one input: a
scalar column gives a ``(batch,)`` array, a fixed-size-list column (nested lists, or the
``arrow.fixed_shape_tensor`` extension type) gives a ``(batch, d1, d2, ...)`` array, and a
list column of column ids named in ``sparse`` (with a list column of values, or values 1)
gives a ``(batch, width)`` :class:`~raymod.sparse.CSRArray`.
"""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from ..sparse import CSRArray
from .base import DataDesc, check_rows, contiguous_range, take_rows
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


# --- sparse rows: a list column of column ids (and one of values) as a csr array ----------
#: ``{ids_column: (values_column or None, width)}``, as normalised by :func:`sparse_specs`
SparseSpecs = dict[str, tuple[str | None, int]]


def _is_list_like(typ: pa.DataType) -> bool:
    return (pa.types.is_list(typ) or pa.types.is_large_list(typ)
            or pa.types.is_fixed_size_list(typ))


def sparse_specs(sparse: Mapping[str, Any] | None, columns: Sequence[str]) -> SparseSpecs:
    """``sparse`` (see :class:`ArrowIter`) as ``{ids_column: (values_column, width)}``,
    checked against the input ``columns``; ``{}`` for None."""
    out: SparseSpecs = {}
    for ids, spec in (sparse or {}).items():
        if ids not in columns:
            raise ValueError(f"sparse names column {ids!r}, which is not one of the data or "
                             f"label columns {list(columns)}")
        values, width = (None, spec) if np.isscalar(spec) else tuple(spec)
        if isinstance(width, bool) or not isinstance(width, (int, np.integer)) or width <= 0:
            raise ValueError(f"sparse[{ids!r}]: the width must be a positive int, got "
                             f"{width!r}")
        if values is not None and not isinstance(values, str):
            raise TypeError(f"sparse[{ids!r}]: the values column must be a column name or "
                            f"None, got {values!r}")
        out[ids] = (values, int(width))
    return out


def sparse_desc(schema: pa.Schema, ids: str, spec: tuple[str | None, int],
                dtype: Any) -> tuple[tuple[int, ...], np.dtype]:
    """Per-row shape ``(width,)`` and value dtype of the csr input made of column ``ids``
    (and ``spec``'s values column), after checking both columns' Arrow types."""
    values, width = spec
    typ = schema.field(ids).type
    if not (_is_list_like(typ) and pa.types.is_integer(typ.value_type)):
        raise TypeError(f"sparse column {ids!r} must be a list of integers (column ids), got "
                        f"{typ}")
    if values is None:
        return (width,), np.dtype(dtype or np.float32)
    if values not in schema.names:
        raise ValueError(f"sparse[{ids!r}]: values column {values!r} not found; available "
                         f"columns: {', '.join(schema.names)}")
    vtyp = schema.field(values).type
    if not (_is_list_like(vtyp) and (pa.types.is_floating(vtyp.value_type)
                                     or pa.types.is_integer(vtyp.value_type))):
        raise TypeError(f"sparse values column {values!r} must be a list of numbers, got "
                        f"{vtyp}")
    return (width,), np.dtype(dtype or vtyp.value_type.to_pandas_dtype())


def _one_chunk(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return column


def _lengths(lists: pa.Array) -> np.ndarray:
    """Entries of each list (0 for a null list)."""
    return pc.fill_null(pc.list_value_length(lists), 0).to_numpy().astype(np.int64, copy=False)


def lists_to_csr(ids: pa.ChunkedArray | pa.Array, values: pa.ChunkedArray | pa.Array | None,
                 width: int, dtype: Any, name: str = "column") -> CSRArray:
    """A ``(rows, width)`` csr array whose row ``i`` holds ``values[i]`` at ``ids[i]``.

    Built from the lists' lengths and flattened children (no loop over rows): ``indptr`` is
    the running sum of the lengths, ``indices`` the flattened ids, ``data`` the flattened
    values (1 where ``values`` is None). Null lists are empty rows. Ids are sorted within each
    row where they are not, and an id repeated within a row adds its values up.

    Parameters
    ----------
    ids : pyarrow list array (or chunked)
        Column ids per row, each in ``[0, width)``.
    values : pyarrow list array (or chunked), optional
        The values, one list per row of the same length as its ids.
    width : int
        Columns of the array.
    dtype : numpy dtype
        Type of the stored values.
    name : str
        The ids column's name, for messages.
    """
    ids = _one_chunk(ids)
    counts = _lengths(ids)
    flat_ids = ids.flatten()
    if flat_ids.null_count:
        raise ValueError(f"sparse column {name!r} has {flat_ids.null_count} null ids")
    cols = flat_ids.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    if values is None:
        data = np.ones(cols.size, dtype)
    else:
        values = _one_chunk(values)
        value_counts = _lengths(values)
        if not np.array_equal(value_counts, counts):
            row = int(np.flatnonzero(value_counts != counts)[0])
            raise ValueError(f"sparse column {name!r}: row {row} has {counts[row]} ids and "
                             f"{value_counts[row]} values")
        flat = values.flatten()
        if flat.null_count:
            raise ValueError(f"sparse column {name!r}: its values hold {flat.null_count} "
                             "nulls")
        data = flat.to_numpy(zero_copy_only=False).astype(dtype, copy=False)
    if cols.size and (cols.min() < 0 or cols.max() >= width):
        at = int(np.flatnonzero((cols < 0) | (cols >= width))[0])
        row = int(np.searchsorted(np.cumsum(counts), at, side="right"))
        raise ValueError(f"sparse column {name!r}: row {row} holds column id {cols[at]}, "
                         f"outside [0, {width}) (the width given)")
    indptr = np.zeros(counts.size + 1, np.int64)
    np.cumsum(counts, out=indptr[1:])
    if cols.size > 1:
        step = np.diff(cols)
        starts = indptr[1:-1]
        inside = np.ones(step.size, bool)
        inside[starts[(starts > 0) & (starts < cols.size)] - 1] = False
        if not (step[inside] > 0).all():  # unsorted or repeated ids: sort, then add repeats
            row = np.repeat(np.arange(counts.size), counts)
            order = np.lexsort((cols, row))
            cols, data, row = cols[order], data[order], row[order]
            first = np.ones(cols.size, bool)
            first[1:] = (cols[1:] != cols[:-1]) | (row[1:] != row[:-1])
            if not first.all():
                keep = np.flatnonzero(first)
                data = np.add.reduceat(data, keep).astype(dtype, copy=False)
                cols, row = cols[keep], row[keep]
                np.cumsum(np.bincount(row, minlength=counts.size), out=indptr[1:])
    return CSRArray(data, cols, indptr, (counts.size, width), check=False)


def input_arrays(table: pa.Table, columns: Sequence[str], sparse: SparseSpecs,
                 sparse_dtypes: Mapping[str, Any], dtype: Any = None,
                 to_numpy: Callable[[pa.Table, str], np.ndarray] | None = None) -> dict:
    """The arrays of the input ``columns`` of ``table``.

    Parameters
    ----------
    table : pyarrow.Table
        Holds the columns (and the values columns of the sparse ones).
    columns : list of str
        The inputs' columns.
    sparse : dict
        :func:`sparse_specs` of the columns that give csr arrays (:func:`lists_to_csr`).
    sparse_dtypes : dict
        The value type of each of those.
    dtype : numpy dtype, optional
        Cast of every dense column.
    to_numpy : callable, optional
        ``to_numpy(table, column)`` for a dense column; by default :func:`column_to_numpy`.
    """
    arrays = {}
    for column in dict.fromkeys(columns):
        if column in sparse:
            values, width = sparse[column]
            arrays[column] = lists_to_csr(
                table.column(column), None if values is None else table.column(values), width,
                sparse_dtypes[column], column)
            continue
        arr = (to_numpy(table, column) if to_numpy is not None
               else column_to_numpy(table.column(column), column))
        arrays[column] = arr if dtype is None else arr.astype(dtype, copy=False)
    return arrays


def take_any(array: Any, rows: np.ndarray) -> Any:
    """Rows ``rows`` of a dense array (as :func:`~raymod.io.base.take_rows`) or of a
    :class:`~raymod.sparse.CSRArray` (a slice for a contiguous range)."""
    if isinstance(array, CSRArray):
        span = contiguous_range(rows)
        return array[span] if span is not None else array.take_rows(rows)
    return take_rows(array, rows)


def vstack_csr(parts: Sequence[CSRArray]) -> CSRArray:
    """The rows of ``parts`` (csr arrays of one width), one after the other."""
    indptr = [np.zeros(1, np.int64)]
    start = 0
    for part in parts:
        indptr.append(part.indptr[1:] + start)
        start += part.nnz
    return CSRArray(np.concatenate([p.data for p in parts]),
                    np.concatenate([p.indices for p in parts]), np.concatenate(indptr),
                    (sum(p.shape[0] for p in parts), parts[0].shape[1]), check=False)


def with_stype(desc: DataDesc, stype: str) -> DataDesc:
    """``desc`` marked with storage type ``stype`` (``desc.stype``; ``'default'`` when
    unmarked). raymod's DataDesc has no such field: the mark is an attribute of this
    descriptor, and pickling the descriptor drops it."""
    desc.stype = stype
    return desc


def batch_descs(batch_size: int, descs: Sequence[DataDesc]) -> list[DataDesc]:
    """Batch descriptors (``(batch_size,) + shape``) of per-row ones, keeping their stype."""
    out = []
    for d in descs:
        desc = DataDesc(d.name, (batch_size,) + tuple(d.shape), d.dtype)
        stype = getattr(d, "stype", "default")
        out.append(with_stype(desc, stype) if stype != "default" else desc)
    return out


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
    its ``(shape, dtype)``, ``data_columns``/``label_columns`` name the inputs' columns and
    ``_sparse`` (:func:`sparse_specs`) those that give csr inputs (``stype = 'csr'``)."""

    _sparse: SparseSpecs = {}

    def _desc(self, name: str, column: str) -> DataDesc:
        desc = DataDesc(name, *self._descs[column])
        return with_stype(desc, "csr") if column in self._sparse else desc

    @property
    def data_descs(self) -> list[DataDesc]:
        """Per-row descriptors of the data inputs."""
        return [self._desc(n, c) for n, c in zip(self._data_names, self.data_columns)]

    @property
    def label_descs(self) -> list[DataDesc]:
        """Per-row descriptors of the label inputs."""
        return [self._desc(n, c) for n, c in zip(self._label_names, self.label_columns)]

    def _columns_to_read(self) -> list[str]:
        """Every column the inputs are made of: theirs, and the values of sparse ones."""
        values = [v for v, _ in self._sparse.values() if v is not None]
        return list(dict.fromkeys(self.data_columns + self.label_columns + values))

    def _sparse_dtypes(self) -> dict[str, np.dtype]:
        """The value type of each csr input's column."""
        return {c: self._descs[c][1] for c in self._sparse}


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
    sparse : dict, optional
        Columns of ``data_columns`` / ``label_columns`` that hold the column ids of sparse
        rows, each mapped to ``(values_column, width)``: the input is then a
        :class:`~raymod.sparse.CSRArray` of ``(batch, width)`` whose row ``i`` holds the
        values of ``values_column`` (a list column, one value per id) at the ids of row
        ``i``. ``(None, width)``, or just ``width``, gives values 1 (a bag of ids). Ids must
        lie in ``[0, width)``; unsorted ids are sorted, an id repeated in a row adds its
        values up, and a null list is an empty row. The values keep their Arrow type unless
        ``dtype`` is given (float32 for values 1). The input's descriptors carry
        ``stype = 'csr'``.

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
    >>> clicks = ArrowIter("clicks.parquet", "feature_ids", "clicked", batch_size=512,
    ...                    sparse={"feature_ids": ("feature_values", 1_000_001)})  # doctest: +SKIP
    >>> clicks.next().data[0]                                             # doctest: +SKIP
    <CSRArray 512x1000001 float32 nnz=...>
    """

    def __init__(self, source: Any, data_columns: str | Sequence[str],
                 label_columns: str | Sequence[str] | None = None, batch_size: int = 1,
                 shuffle: bool = False, last_batch_handle: str = "pad",
                 data_name: str | Mapping[str, str] | None = "data",
                 label_name: str | Mapping[str, str] | None = "softmax_label",
                 filesystem: pafs.FileSystem | None = None, seed: int | None = None,
                 format: str | None = None, dtype: Any = None,
                 sparse: Mapping[str, Any] | None = None):
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
        self._sparse = sparse_specs(sparse, self.data_columns + self.label_columns)
        self._data_names = _input_names(self.data_columns, data_name)
        self._label_names = _input_names(self.label_columns, label_name)
        self._descs = {}
        for column in self.data_columns + self.label_columns:
            if column in self._sparse:
                self._descs[column] = sparse_desc(schema, column, self._sparse[column],
                                                  self.dtype)
                continue
            shape, np_type = _per_row_shape_and_type(schema.field(column).type, column)
            self._descs[column] = (shape, self.dtype or np_type)
        self._num_rows = self._count_rows()
        self._arrays: dict[str, Any] | None = None
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

    def _load(self) -> dict[str, Any]:
        if self._arrays is None:
            columns = self._columns_to_read()
            src = self._open()
            table = src.select(columns) if isinstance(src, pa.Table) else src.to_table(columns)
            arrays = input_arrays(table, self.data_columns + self.label_columns, self._sparse,
                                  self._sparse_dtypes(), self.dtype)
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
        return ([take_any(arrays[c], rows) for c in self.data_columns],
                [take_any(arrays[c], rows) for c in self.label_columns])

    @property
    def provide_data(self) -> list[DataDesc]:
        """Descriptors of one batch of each data input (batch axis first; csr inputs say
        so in ``stype``)."""
        return batch_descs(self.batch_size, self.data_descs)

    @property
    def provide_label(self) -> list[DataDesc]:
        """Descriptors of one batch of each label input (batch axis first)."""
        return batch_descs(self.batch_size, self.label_descs)

"""``CSVIter``: MXNet's C++ iterator over CSV files of numbers, one sample per line."""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from .base import check_rows, take_rows
from .native_batches import NativeIter, check_shape, label_row_shape

DTYPES = ("float32", "int32", "int64")


def read_csv(path: str, width: int, dtype: np.dtype, name: str) -> np.ndarray:
    """The numbers of a headerless CSV file as a ``(lines, width)`` array of ``dtype``."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    if not os.path.isfile(path) and "://" not in path:
        raise FileNotFoundError(f"{name}: no such file {path!r}")
    column_type = pa.float64() if dtype.kind == "f" else pa.int64()
    table = pacsv.read_csv(
        path, read_options=pacsv.ReadOptions(autogenerate_column_names=True),
        convert_options=pacsv.ConvertOptions(column_types={f"f{i}": column_type
                                                           for i in range(width)}))
    if table.num_columns != width:
        raise ValueError(f"{name} {path!r} has {table.num_columns} values a line; the shape "
                         f"given asks for {width}")
    if table.num_rows == 0:
        raise ValueError(f"{name} {path!r} holds no lines")
    columns = [c.to_numpy(zero_copy_only=False) for c in table.columns]
    return np.stack(columns, axis=1).astype(dtype)


class CSVIter(NativeIter):
    """Batches from CSV files of numbers: each line one sample, reshaped to ``data_shape``.

    Parameters
    ----------
    data_csv : str
        Path of the data file (no header; every line ``prod(data_shape)`` numbers).
    data_shape : tuple of int
        Shape of one sample.
    label_csv : str, optional
        Path of the label file, one line per data line; without it every label is 0.
    label_shape : tuple of int, default (1,)
        Shape of one label.
    batch_size : int, default 1
        Samples per batch.
    round_batch : bool, default True
        Fill the last batch from the start of the file (and start the next epoch after the
        lines so used); otherwise leave it short, ``pad`` counting the missing samples.
    dtype : {'float32', 'int32', 'int64'}, default 'float32'
        Element type of data and labels.
    part_index, num_parts : int, default 0 and 1
        Accepted as MXNet accepts them; MXNet 1.9.1's CSVIter reads the whole file
        whatever they are, and so does this one.
    data_name, label_name : str, default 'data' and 'softmax_label'
        Input names of the batches.
    prefetch_buffer, ctx : optional
        Accepted for MXNet's signature; batches are read in this process.

    Notes
    -----
    The files are read once, whole, at construction (with ``pyarrow.csv``).
    """

    def __init__(self, data_csv: str, data_shape: Sequence[int], label_csv: str | None = None,
                 label_shape: Sequence[int] = (1,), batch_size: int = 1,
                 round_batch: bool = True, dtype: str = "float32", part_index: int = 0,
                 num_parts: int = 1, data_name: str = "data",
                 label_name: str = "softmax_label", prefetch_buffer: int = 4,
                 ctx: str = "gpu", **kwargs: Any):
        if kwargs:
            raise TypeError(f"CSVIter got unexpected arguments {sorted(kwargs)}")
        if str(dtype) not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)}; got {dtype!r}")
        self._check_part(part_index, num_parts)
        self.data_shape = check_shape(data_shape, "data_shape")
        self.label_shape = check_shape(label_shape, "label_shape")
        self.dtype = np.dtype(str(dtype))
        data = read_csv(os.fspath(data_csv), int(np.prod(self.data_shape)), self.dtype,
                        "data_csv")
        if label_csv is None:
            label = np.zeros((len(data), int(np.prod(self.label_shape))), self.dtype)
        else:
            label = read_csv(os.fspath(label_csv), int(np.prod(self.label_shape)), self.dtype,
                             "label_csv")
            if len(label) != len(data):
                raise ValueError(f"label_csv has {len(label)} lines, data_csv {len(data)}; "
                                 "they must match")
        self._data = data.reshape((len(data),) + self.data_shape)
        self._label = label.reshape((len(label),) + label_row_shape(self.label_shape))
        self._data_name, self._label_name = data_name, label_name
        self._init_wrap_around(batch_size, False, round_batch, None)

    @property
    def num_rows(self) -> int:
        """Lines in the data file."""
        return len(self._data)

    def take(self, rows: Any) -> tuple[list, list]:
        """Data and label of ``rows`` (line numbers)."""
        rows = check_rows(rows, self.num_rows)
        return [take_rows(self._data, rows)], [take_rows(self._label, rows)]

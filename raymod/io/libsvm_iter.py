"""``LibSVMIter``: MXNet's C++ iterator over LibSVM text files, as dense batches.

A LibSVM line is ``label index:value index:value ...`` with 0-based column indices. The file is
held in compressed-row form (values, column indices, row starts); each batch is made dense
when it is asked for, so only ``batch_size x prod(data_shape)`` values are ever dense.
"""
from __future__ import annotations

import os
from typing import Any, Sequence

import numpy as np

from .base import check_rows
from .native_batches import NativeIter, check_shape, label_row_shape


class SparseRows:
    """Rows of a LibSVM file in compressed-row form, plus each line's leading label."""

    def __init__(self, path: str, width: int, name: str):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{name}: no such file {path!r}")
        labels, indptr, indices, values = [], [0], [], []
        with open(path) as f:
            for number, line in enumerate(f, 1):
                fields = line.split()
                if not fields:
                    continue
                try:
                    labels.append(float(fields[0]))
                    pairs = [field.split(":") for field in fields[1:]]
                    cols = [int(c) for c, _ in pairs]
                    vals = [float(v) for _, v in pairs]
                except ValueError:
                    raise ValueError(f"{name} {path}:{number}: expected 'label index:value "
                                     f"...', got {line.strip()!r}") from None
                bad = [c for c in cols if not 0 <= c < width]
                if bad:
                    raise ValueError(f"{name} {path}:{number}: column index {bad[0]} is "
                                     f"outside [0, {width}) (the shape given)")
                indices.extend(cols)
                values.extend(vals)
                indptr.append(len(indices))
        if not labels:
            raise ValueError(f"{name} {path!r} holds no lines")
        self.width = width
        self.labels = np.asarray(labels, np.float32)
        self.indptr = np.asarray(indptr, np.int64)
        self.indices = np.asarray(indices, np.int64)
        self.values = np.asarray(values, np.float32)

    def __len__(self) -> int:
        return len(self.labels)

    def dense(self, rows: np.ndarray) -> np.ndarray:
        """Rows ``rows`` as a dense ``(len(rows), width)`` float32 array."""
        out = np.zeros((len(rows), self.width), np.float32)
        starts, stops = self.indptr[rows], self.indptr[rows + 1]
        counts = stops - starts
        where = np.repeat(np.arange(len(rows)), counts)
        # the positions of every selected entry, row after row
        entries = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(counts.sum())
        out[where, self.indices[entries]] = self.values[entries]
        return out


def check_dense_fits(batch_size: int, width: int, name: str) -> None:
    """A MemoryError naming ``name`` when one dense batch would not fit the free memory."""
    need = int(batch_size) * int(width) * 4
    try:
        free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not reported here: nothing to check
        return
    if need > free:
        raise MemoryError(f"a dense batch of {name} needs {need / 2**30:.1f} GiB "
                          f"(batch_size {batch_size} x {width} float32), more than the "
                          f"{free / 2**30:.1f} GiB free; use a smaller batch_size or shape")


class LibSVMIter(NativeIter):
    """Batches from LibSVM files, made dense (raymod has no sparse arrays).

    Parameters
    ----------
    data_libsvm : str
        Path of the data file: ``label index:value ...`` per line, 0-based indices.
    data_shape : tuple of int
        Shape of one sample: ``(num_features,)``.
    label_libsvm : str, optional
        Path of a LibSVM file of labels (their leading numbers ignored), one line per data
        line, read with ``label_shape``; without it the data lines' leading numbers are the
        labels.
    label_shape : tuple of int, default (1,)
        Shape of one label.
    batch_size : int, default 1
        Samples per batch.
    round_batch : bool, default True
        As :class:`CSVIter` (MXNet 1.9.1 refuses False for this iterator; here it works).
    num_parts, part_index : int, default 1 and 0
        Accepted for MXNet's signature; the whole file is read.
    data_name, label_name : str, default 'data' and 'softmax_label'
        Input names of the batches.
    prefetch_buffer : int, optional
        Accepted for MXNet's signature.

    Raises
    ------
    MemoryError
        When one dense batch (``batch_size x prod(data_shape)`` float32) would not fit the
        free memory.
    """

    def __init__(self, data_libsvm: str, data_shape: Sequence[int],
                 label_libsvm: str | None = None, label_shape: Sequence[int] = (1,),
                 batch_size: int = 1, round_batch: bool = True, num_parts: int = 1,
                 part_index: int = 0, data_name: str = "data",
                 label_name: str = "softmax_label", prefetch_buffer: int = 4, **kwargs: Any):
        if kwargs:
            raise TypeError(f"LibSVMIter got unexpected arguments {sorted(kwargs)}")
        self._check_part(part_index, num_parts)
        self.data_shape = check_shape(data_shape, "data_shape")
        self.label_shape = check_shape(label_shape, "label_shape")
        width = int(np.prod(self.data_shape))
        check_dense_fits(batch_size, width, "data")
        self._sparse = SparseRows(os.fspath(data_libsvm), width, "data_libsvm")
        self._labels: SparseRows | None = None
        if label_libsvm is not None:
            self._labels = SparseRows(os.fspath(label_libsvm),
                                      int(np.prod(self.label_shape)), "label_libsvm")
            if len(self._labels) != len(self._sparse):
                raise ValueError(f"label_libsvm has {len(self._labels)} lines, data_libsvm "
                                 f"{len(self._sparse)}; they must match")
        elif self.label_shape != (1,):
            raise ValueError(f"label_shape {self.label_shape} needs a label_libsvm file; the "
                             "data lines hold one label each")
        self._data_name, self._label_name = data_name, label_name
        self._init_wrap_around(batch_size, False, round_batch, None)

    @property
    def num_rows(self) -> int:
        """Lines in the data file."""
        return len(self._sparse)

    def take(self, rows: Any) -> tuple[list, list]:
        """Dense data and labels of ``rows`` (line numbers)."""
        rows = check_rows(rows, self.num_rows)
        data = self._sparse.dense(rows).reshape((len(rows),) + self.data_shape)
        if self._labels is None:
            label = self._sparse.labels[rows]
        else:
            label = self._labels.dense(rows).reshape(
                (len(rows),) + label_row_shape(self.label_shape))
        return [data], [label]

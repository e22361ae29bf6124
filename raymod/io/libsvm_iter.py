"""``LibSVMIter``: MXNet's C++ iterator over LibSVM text files, as CSR batches.

A LibSVM line is ``label index:value index:value ...`` with 0-based, ascending column
indices. The iterator's part of the file is read once into compressed-row arrays; each batch
is a :class:`~raymod.sparse.CSRArray` of ``(batch_size, num_features)``, never a dense array,
as MXNet 1.9.1's ``LibSVMIter`` hands out ``CSRNDArray`` batches (src/io/iter_libsvm.cc). The
label is a dense ``(batch_size,)`` vector of the lines' leading numbers, or, with a
``label_libsvm`` file, a CSR batch of that file's rows.

Parsing is vectorised: a file is cut into chunks of whole lines, each chunk's tokens are
found with numpy and all its numbers are converted by one Arrow cast. A chunk the fast parser
does not take (unusual spacing, a malformed line, a column out of range) is parsed again line
by line, which is what names the file and line of an error.
"""
from __future__ import annotations

import os
import re
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..sparse import CSRArray
from .arrow_iter import batch_descs, take_any, with_stype
from .base import DataDesc, StoredArrays, check_rows
from .native_batches import NativeIter, check_shape

#: bytes per chunk of the fast parser: bounds its temporaries (a few times the chunk)
CHUNK_BYTES = 8 << 20

_BLANK, _NEWLINE, _COLON = 32, 10, 58
_SEPARATOR = np.zeros(256, bool)
_SEPARATOR[[9, 10, 32, 58]] = True  # tab, newline, space, colon: everything else is a token
_COMMENT = re.compile(rb"#[^\n]*")


# --- which bytes of the file are this part's (dmlc's InputSplit) ----------------------------
def _record_start_after(f: Any, pos: int) -> int:
    """Bytes from ``pos`` to the start of the next line: past the first end-of-line byte
    at or after ``pos`` and any end-of-line bytes that follow it (dmlc's
    ``LineSplitter::SeekRecordBegin``); to the end of the file when there is none."""
    f.seek(pos)
    skipped, found = 0, False
    while True:
        block = f.read(1 << 16)
        if not block:
            return skipped
        i = 0
        if not found:
            hits = [j for j in (block.find(b"\n"), block.find(b"\r")) if j >= 0]
            if not hits:
                skipped += len(block)
                continue
            i, found = min(hits) + 1, True
        while i < len(block) and block[i] in b"\r\n":
            i += 1
        if i < len(block):
            return skipped + i
        skipped += len(block)


def part_range(path: str, part_index: int, num_parts: int) -> tuple[int, int]:
    """The bytes ``[begin, end)`` of ``path`` that part ``part_index`` of ``num_parts`` reads.

    As dmlc's ``InputSplit`` (which MXNet's LibSVMIter reads through): the file is cut into
    ``num_parts`` byte ranges of ``ceil(size / num_parts)`` bytes, and each cut moves forward
    to the next line start. A line therefore belongs to the part whose byte range holds the
    byte just before it; parts cover every line once, but need not hold equal line counts.
    """
    size = os.path.getsize(path)
    step = -(-size // num_parts)
    begin, end = min(step * part_index, size), min(step * (part_index + 1), size)
    if begin == end:
        return begin, end
    with open(path, "rb") as f:
        if end != size:
            end += _record_start_after(f, end)
        if begin != 0:
            begin += _record_start_after(f, begin)
    return begin, end


def _lines_before(path: str, pos: int) -> int:
    """How many lines of ``path`` end before byte ``pos`` (``\\r\\n`` ends one line)."""
    if pos == 0:
        return 0
    with open(path, "rb") as f:
        prefix = f.read(pos).replace(b"\r\n", b"\n")
    return prefix.count(b"\n") + prefix.count(b"\r")


def _count_records(path: str, pos: int) -> int:
    """How many LibSVM rows (lines holding more than blanks and a comment) end before byte
    ``pos`` of ``path``: the row number this process's part starts at."""
    if pos == 0:
        return 0
    with open(path, "rb") as f:
        text = _normalise(f.read(pos))
    return sum(1 for line in text.split(b"\n") if line.strip())


def _normalise(buf: bytes) -> bytes:
    """``\\r\\n`` and ``\\r`` line ends as ``\\n``; ``#`` comments (to the line end) removed,
    as dmlc's LibSVM parser skips them."""
    if b"\r" in buf:
        buf = buf.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    if b"#" in buf:
        buf = _COMMENT.sub(b"", buf)
    return buf


# --- parsing ---------------------------------------------------------------------------------
class _Chunk:
    """Rows parsed from one chunk: labels, entries per row, column ids and values."""

    def __init__(self, labels: np.ndarray, counts: np.ndarray, cols: np.ndarray,
                 values: np.ndarray):
        self.labels, self.counts, self.cols, self.values = labels, counts, cols, values


def _parse_fast(chunk: memoryview, width: int) -> _Chunk | None:
    """The rows of ``chunk`` (whole, normalised lines), or None for anything unusual: a
    malformed line, leading blanks, a column outside ``[0, width)``, a repeated column.

    Every maximal run of non-separator bytes is a token; the byte before a token says what it
    is (newline or start: the label; colon: a value; blank: a column id, which must be
    followed by exactly one colon and a value).
    """
    b = np.frombuffer(chunk, np.uint8)
    n = b.size
    sep = _SEPARATOR[b]
    edges = np.flatnonzero(sep[1:] != sep[:-1]) + 1
    if not sep[0]:
        edges = np.concatenate([[0], edges])
    if not sep[-1]:
        edges = np.concatenate([edges, [n]])
    if edges.size == 0:  # blank lines only
        return _Chunk(*(np.zeros(0, t) for t in (np.float32, np.int64, np.int64, np.float32)))
    starts, ends = edges[0::2], edges[1::2]
    before = np.full(starts.size, _NEWLINE, np.uint8)
    inner = starts > 0
    before[inner] = b[starts[inner] - 1]
    after = np.full(ends.size, _NEWLINE, np.uint8)
    inner = ends < n
    after[inner] = b[ends[inner]]
    label, value = before == _NEWLINE, before == _COLON
    col = ~(label | value)
    # the structure: col ':' value pairs after each label, one colon, nothing else
    if not (label[0] and not col[-1] and np.array_equal(after == _COLON, col)
            and np.array_equal(value[1:], col[:-1])
            and np.array_equal(starts[1:][col[:-1]], ends[:-1][col[:-1]] + 1)):
        return None
    offsets = np.zeros(starts.size + 1, np.int64)
    np.cumsum(ends - starts, out=offsets[1:])
    tokens = pa.LargeStringArray.from_buffers(starts.size, pa.py_buffer(offsets),
                                         pa.py_buffer(np.ascontiguousarray(b[~sep])))
    try:  # one cast for every number; float64 first, as Python's float() would read them
        numbers = pc.cast(tokens, pa.float64()).to_numpy()
    except pa.ArrowInvalid:
        return None
    colf = numbers[col]
    if colf.size and (colf.min() < 0 or colf.max() >= width
                      or not np.array_equal(colf, np.floor(colf))):
        return None
    row = np.cumsum(label) - 1
    labels = numbers[label].astype(np.float32)
    counts = np.bincount(row[col], minlength=labels.size).astype(np.int64)
    return _sorted(_Chunk(labels, counts, colf.astype(np.int64),
                          numbers[value].astype(np.float32)))


def _sorted(rows: _Chunk) -> _Chunk | None:
    """``rows`` with the column ids of each row ascending (MXNet expects files so; a csr
    array requires it); None when a row names a column twice."""
    cols = rows.cols
    if cols.size < 2:
        return rows
    step = np.diff(cols)
    boundary = np.cumsum(rows.counts)[:-1]
    boundary = boundary[(boundary > 0) & (boundary < cols.size)] - 1
    inside = np.ones(step.size, bool)
    inside[boundary] = False
    if (step[inside] > 0).all():
        return rows
    row = np.repeat(np.arange(rows.counts.size), rows.counts)
    order = np.lexsort((cols, row))
    cols, values = cols[order], rows.values[order]
    if (np.diff(cols)[inside] == 0).any():
        return None
    return _Chunk(rows.labels, rows.counts, cols, values)


def _parse_lines(chunk: memoryview, width: int, where: str, first_line: int) -> _Chunk:
    """The rows of ``chunk``, line by line: the slow path, which names the line at fault."""
    labels, counts, cols, values = [], [], [], []
    for number, line in enumerate(bytes(chunk).decode("utf-8", "replace").split("\n"),
                                  first_line):
        fields = line.split()
        if not fields:
            continue
        try:
            # dmlc's extensions: 'label:weight' (the weight is not used) and 'qid:n'
            label = float(fields[0].split(":", 1)[0])
            if len(fields) > 1 and fields[1].startswith("qid:"):
                int(fields[1][4:])
                del fields[1]
            pairs = [field.split(":") for field in fields[1:]]
            row_cols = [int(c) for c, _ in pairs]
            row_vals = [float(v) for _, v in pairs]
        except ValueError:
            raise ValueError(f"{where}:{number}: expected 'label index:value ...', got "
                             f"{line.strip()!r}") from None
        bad = [c for c in row_cols if not 0 <= c < width]
        if bad:
            raise ValueError(f"{where}:{number}: column index {bad[0]} is outside [0, {width}) "
                             "(the shape given)")
        if len(set(row_cols)) != len(row_cols):
            seen = set()
            twice = next(c for c in row_cols if c in seen or seen.add(c))
            raise ValueError(f"{where}:{number}: column index {twice} appears more than once")
        labels.append(label)
        counts.append(len(row_cols))
        cols.extend(row_cols)
        values.extend(row_vals)
    rows = _sorted(_Chunk(np.asarray(labels, np.float32), np.asarray(counts, np.int64),
                          np.asarray(cols, np.int64), np.asarray(values, np.float32)))
    assert rows is not None  # repeats were refused above
    return rows


class LibSVMRows:
    """Rows of one part of a LibSVM file in compressed-row form, plus each row's label.

    Parameters
    ----------
    path : str
        The file.
    width : int
        Columns of a row: every column id must lie in ``[0, width)``.
    name : str
        The argument the file came from, for messages (``'data_libsvm'``).
    part_index, num_parts : int, default 0 and 1
        Which part of the file to read (:func:`part_range`).

    Attributes
    ----------
    csr : CSRArray
        ``(rows, width)`` float32: the rows' entries.
    labels : numpy.ndarray
        ``(rows,)`` float32: each line's leading number.
    begin, end : int
        The bytes ``[begin, end)`` of the file that the part holds.
    """

    def __init__(self, path: str, width: int, name: str, part_index: int = 0,
                 num_parts: int = 1):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{name}: no such file {path!r}")
        self.begin, self.end = part_range(path, part_index, num_parts)
        with open(path, "rb") as f:
            f.seek(self.begin)
            buf = _normalise(f.read(self.end - self.begin))
        where = f"{name} {path}"
        first_line: int | None = None  # the part's first line number, counted if needed
        chunks, pos, lines = [], 0, 0
        view = memoryview(buf)
        while pos < len(buf):
            stop = buf.find(b"\n", min(pos + CHUNK_BYTES, len(buf)) - 1)
            stop = len(buf) if stop < 0 else stop + 1
            rows = _parse_fast(view[pos:stop], width)
            if rows is None:
                if first_line is None:
                    first_line = _lines_before(path, self.begin) + 1
                rows = _parse_lines(view[pos:stop], width, where, first_line + lines)
            chunks.append(rows)
            lines += buf.count(b"\n", pos, stop)
            pos = stop
        labels = np.concatenate([c.labels for c in chunks]) if chunks else np.zeros(0)
        if not labels.size:
            part = f" (part {part_index} of {num_parts})" if num_parts > 1 else ""
            raise ValueError(f"{name} {path!r}{part} holds no lines")
        counts = np.concatenate([c.counts for c in chunks])
        indptr = np.zeros(counts.size + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        cols = np.concatenate([c.cols for c in chunks])
        values = np.concatenate([c.values for c in chunks])
        for array in (cols, values, labels):
            array.setflags(write=False)  # batches are views: keep the file's rows intact
        self.width = width
        self.labels = labels.astype(np.float32, copy=False)
        self.csr = CSRArray(values, cols, indptr, (counts.size, width), check=False)

    def __len__(self) -> int:
        return self.csr.shape[0]


class LibSVMTable:
    """What a :class:`LibSVMIter` hands out: its part's data rows and their labels, and
    ``take`` to gather rows of both (picklable, so Ray workers can hold a copy)."""

    def __init__(self, data: CSRArray, label: CSRArray | np.ndarray):
        self.data, self.label = data, label

    def take(self, rows: np.ndarray) -> tuple[list, list]:
        """CSR data and (dense or CSR) labels of ``rows``."""
        rows = check_rows(rows, self.data.shape[0])
        return [take_any(self.data, rows)], [take_any(self.label, rows)]


class LibSVMIter(NativeIter):
    """Batches of LibSVM files as CSR arrays (MXNet's ``LibSVMIter``).

    Parameters
    ----------
    data_libsvm : str
        Path of the data file: ``label index:value ...`` per line, 0-based column indices
        (ascending in MXNet's files; sorted here when they are not). Blank lines and ``#``
        comments are skipped, and dmlc's ``label:weight`` and ``qid:n`` are read (both
        unused), as MXNet's parser does; such lines take the slower line-by-line path.
    data_shape : tuple of int
        ``(num_features,)``: one dimension, as MXNet requires.
    label_libsvm : str, optional
        Path of a LibSVM file of labels, one line per data line (its leading numbers are
        ignored): the labels are then CSR batches of ``label_shape`` columns. Without it the
        data lines' leading numbers are the labels, a dense ``(batch_size,)`` vector.
    label_shape : tuple of int, default (1,)
        ``(1,)`` without ``label_libsvm``; ``(n,)`` with ``n > 1`` with it (MXNet's rule).
    batch_size : int, default 1
        Rows per batch.
    round_batch : bool, default True
        Fill the last batch from the start of the part and report the filler count as
        ``pad``; the next epoch then starts after the rows used to fill (MXNet's
        wrap-around). MXNet refuses False for this iterator; here it gives a short last
        batch padded with the previous batch's rows, as ``CSVIter`` does.
    num_parts, part_index : int, default 1 and 0
        Read only part ``part_index`` of ``num_parts`` of the data file, cut by bytes at line
        starts as MXNet's InputSplit does (:func:`part_range`): every line belongs to
        exactly one part, parts need not hold equal line counts, and a part with no line
        is a ValueError (MXNet's iterator stops before its first batch). A label file is
        matched line by line to the data rows of the part (MXNet cuts it by its own bytes,
        which pairs rows of different lines, or fails, whenever line lengths differ).
    data_name, label_name : str, default 'data' and 'softmax_label'
        Input names of the batches.
    prefetch_buffer : int, optional
        Accepted for MXNet's signature.

    Notes
    -----
    ``provide_data`` (and ``provide_label`` with a label file) carry ``stype = 'csr'`` as
    an attribute of their :class:`~raymod.io.DataDesc`. A malformed line, a column outside
    ``data_shape`` and a row that names a column twice (MXNet keeps both entries, which no
    valid csr array holds) are ValueErrors naming the file and line.

    Examples
    --------
    >>> it = LibSVMIter(data_libsvm="train.libsvm", data_shape=(1000001,),
    ...                 batch_size=8192)                                   # doctest: +SKIP
    >>> it.next().data[0]                                                  # doctest: +SKIP
    <CSRArray 8192x1000001 float32 nnz=...>
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
        if len(self.data_shape) != 1:
            raise ValueError(f"data_shape must have one dimension (num_features,), got "
                             f"{self.data_shape}")
        if label_libsvm is not None:
            if len(self.label_shape) != 1 or self.label_shape[0] < 2:
                raise ValueError(f"label_shape must be (n,) with n > 1 when label_libsvm is "
                                 f"given, got {self.label_shape}")
        elif self.label_shape != (1,):
            raise ValueError(f"label_shape {self.label_shape} needs a label_libsvm file; the "
                             "data lines hold one label each")
        part_index, num_parts = int(part_index), int(num_parts)
        data_path = os.fspath(data_libsvm)
        rows = LibSVMRows(data_path, self.data_shape[0], "data_libsvm", part_index, num_parts)
        label: CSRArray | np.ndarray = rows.labels
        if label_libsvm is not None:
            labels = LibSVMRows(os.fspath(label_libsvm), self.label_shape[0], "label_libsvm")
            # this part's rows are rows [first, need) of the whole data file
            first = _count_records(data_path, rows.begin)
            need = first + len(rows)
            to_the_end = rows.end == os.path.getsize(data_path)  # then the file has `need`
            if len(labels) < need or (to_the_end and len(labels) != need):
                raise ValueError(f"label_libsvm has {len(labels)} lines, data_libsvm "
                                 f"{need if to_the_end else f'at least {need}'}; they must "
                                 "match")
            label = labels.csr[first:need]
        self._table = LibSVMTable(rows.csr, label)
        self._data_name, self._label_name = data_name, label_name
        self._init_wrap_around(batch_size, False, round_batch, None)

    @property
    def num_rows(self) -> int:
        """Data rows in this part of the file."""
        return self._table.data.shape[0]

    def take(self, rows: Any) -> tuple[list, list]:
        """CSR data and the labels of ``rows`` (row numbers within the part)."""
        return self._table.take(rows)

    def reader(self) -> StoredArrays:
        """What Ray workers read rows with: the part's rows, put in the object store once."""
        import ray
        return StoredArrays(ray.put(([self._table.data], [self._table.label])))

    # --- descriptors, with their storage type ------------------------------------------
    @property
    def data_descs(self) -> list[DataDesc]:
        """One row's data descriptor: ``(num_features,)``, csr."""
        return [with_stype(DataDesc(self._data_name, self.data_shape, self.dtype), "csr")]

    @property
    def label_descs(self) -> list[DataDesc]:
        """One row's label descriptor: a scalar, or ``label_shape`` as csr."""
        if isinstance(self._table.label, CSRArray):
            return [with_stype(DataDesc(self._label_name, self.label_shape, self.dtype), "csr")]
        return [DataDesc(self._label_name, (), self.dtype)]

    @property
    def provide_data(self) -> list[DataDesc]:
        """The data descriptor of a batch: ``(batch_size, num_features)``, csr."""
        return batch_descs(self.batch_size, self.data_descs)

    @property
    def provide_label(self) -> list[DataDesc]:
        """The label descriptor of a batch: ``(batch_size,)``, or csr ``(batch_size, n)``."""
        return batch_descs(self.batch_size, self.label_descs)

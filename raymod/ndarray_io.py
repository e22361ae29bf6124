"""Arrays to and from MXNet's binary ``.params`` format: ``rm.nd.save`` / ``rm.nd.load``.

A file is a list of arrays, optionally named. Layout (all little-endian)::

    u64 0x112 (list magic)   u64 0 (reserved)   u64 count
    count x record
    u64 name count (0 or count)   name count x (u64 length, utf-8 bytes)

and one record (MXNet's NDArray "V2" layout; "V3" differs only in its magic and is what
MXNet writes under numpy shape semantics)::

    u32 magic (0xF993FAC9 V2, 0xF993FACA V3)   i32 storage type (0 = dense)
    i32 ndim   ndim x i64 dims                 i32 dev_type   i32 dev_id
    i32 dtype flag                             raw C-order data

In V2 (MXNet's legacy shape semantics) a shape with ndim 0 or a zero dimension means
"no array" and the record stops after the shape. So a file holding a 0-d or zero-size
array is written all in V3, as ``mx.npx.save`` does (MXNet reads it with ``mx.npx.load``,
not ``mx.nd.load``, and refuses files that mix V2 and V3); any other file is all V2,
readable by ``mx.nd.load``. csr and row_sparse arrays are MXNet's sparse records (storage
type 2 / 1, see :mod:`raymod.sparse.io`), which MXNet reads in V2 only. Reading never executes
anything: a malformed file raises :class:`~raymod.base.MXNetError`.
"""
from __future__ import annotations

import os
import struct
import tempfile
from typing import Any, Mapping

import numpy as np

from .array_view import plain
from .sparse import is_sparse

from .base import MXNetError
from .context import as_numpy

__all__ = ["save", "load", "load_frombuffer"]

LIST_MAGIC = 0x112
V2_MAGIC = 0xF993FAC9
V3_MAGIC = 0xF993FACA
_MAX_NDIM = 32
_CPU_DEV_TYPE = 1
# MXNet's dtype flags (mshadow's type enum)
_FLAG_TO_DTYPE = {0: np.dtype("<f4"), 1: np.dtype("<f8"), 2: np.dtype("<f2"), 3: np.dtype("u1"),
                  4: np.dtype("<i4"), 5: np.dtype("i1"), 6: np.dtype("<i8"), 7: np.dtype("?")}
_KIND_TO_FLAG = {(dt.kind, dt.itemsize): flag for flag, dt in _FLAG_TO_DTYPE.items()}


def _flag_of(dtype: np.dtype) -> int | None:
    """MXNet's dtype flag for a numpy dtype (any byte order), or None."""
    return _KIND_TO_FLAG.get((dtype.kind, dtype.itemsize))


# ---- writing -------------------------------------------------------------------------------

def _host(value: Any, where: str) -> Any:
    """``value`` as a host numpy array whose dtype MXNet can store (a sparse array as the
    raymod array it is)."""
    value = plain(value)
    if is_sparse(value):
        return value
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if not (hasattr(value, "shape") and hasattr(value, "dtype")):
        raise TypeError(f"save: {where} must be a numpy or cupy array, got {type(value).__name__}")
    arr = as_numpy(value)
    if _flag_of(arr.dtype) is None:
        raise TypeError(f"save: {where} has dtype {arr.dtype}, which the .params format cannot "
                        "hold; supported: float32, float64, float16, uint8, int32, int8, int64, "
                        "bool")
    return arr


def _needs_v3(arr: np.ndarray) -> bool:
    """Whether legacy (V2) shape semantics would read ``arr``'s shape as 'no array'."""
    return arr.ndim == 0 or 0 in arr.shape


def _record(arr: np.ndarray, magic: int) -> bytes:
    """One NDArray record with the given magic (V2 or V3)."""
    flag = _flag_of(arr.dtype)
    head = struct.pack(f"<Iii{arr.ndim}q", magic, 0, arr.ndim, *arr.shape)
    tail = struct.pack("<iii", _CPU_DEV_TYPE, 0, flag)
    data = np.ascontiguousarray(arr, dtype=_FLAG_TO_DTYPE[flag]).tobytes()
    return head + tail + data


def _encode(data: Any) -> bytes:
    """The bytes of a ``.params`` file holding ``data`` (array, list of arrays, or dict)."""
    if isinstance(data, Mapping):
        for key in data:
            if not isinstance(key, str):
                raise TypeError(f"save: dict keys must be str, got {key!r}")
        names, arrays = list(data.keys()), [_host(v, f"value of {k!r}") for k, v in data.items()]
    elif isinstance(data, (list, tuple)):
        names, arrays = [], [_host(v, f"item {i}") for i, v in enumerate(data)]
    else:
        names, arrays = [], [_host(data, "data")]
    from .sparse.io import encode_record
    parts = [struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))]
    # MXNet loads a file only if all its records share one shape semantics
    dense = [a for a in arrays if not is_sparse(a)]
    magic = V3_MAGIC if any(_needs_v3(a) for a in dense) else V2_MAGIC
    if magic == V3_MAGIC and len(dense) < len(arrays):
        raise MXNetError("save: a 0-d or zero-size dense array needs MXNet's V3 layout, in "
                         "which sparse arrays cannot be saved; save them to separate files")
    parts += [encode_record(a, magic) if is_sparse(a) else _record(a, magic) for a in arrays]
    parts.append(struct.pack("<Q", len(names)))
    for name in names:
        raw = name.encode("utf-8")
        parts.append(struct.pack("<Q", len(raw)) + raw)
    return b"".join(parts)


def dumps(data: Any) -> bytes:
    """The bytes of a ``.params`` file holding ``data`` (what :func:`save` writes)."""
    return _encode(data)


def atomic_write(fname: str | os.PathLike, payload: bytes | str) -> None:
    """Write ``payload`` to ``fname`` through a temporary file and ``os.replace``.

    Readers never see a half-written file: either the old content or the new one.
    """
    fname = os.fspath(fname)
    folder = os.path.dirname(os.path.abspath(fname))
    mode = "wb" if isinstance(payload, (bytes, bytearray)) else "w"
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="-" + os.path.basename(fname), dir=folder)
    try:
        with os.fdopen(fd, mode) as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, fname)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def save(fname: str | os.PathLike, data: Any) -> None:
    """Save arrays to ``fname`` in MXNet's binary format (``mx.nd.save``).

    Parameters
    ----------
    fname : str
        Output path. The file is written to a temporary name first and moved into
        place, so it is never left half-written.
    data : array, list of arrays, or dict of str to array
        numpy or cupy arrays (cupy arrays are copied to the host). A dict keeps its
        names, e.g. ``{'arg:fc1_weight': w}``; a list or a single array is saved unnamed.

    Notes
    -----
    Arrays are recorded as living on ``cpu(0)``, so MXNet loads them on the CPU whatever
    device they came from. Supported dtypes: float32, float64, float16, uint8, int32,
    int8, int64, bool.

    Examples
    --------
    >>> rm.nd.save('w.params', {'w': np.ones((2, 3), np.float32)})
    >>> rm.nd.load('w.params')['w'].shape
    (2, 3)
    """
    atomic_write(fname, _encode(data))


# ---- reading -------------------------------------------------------------------------------

class _Reader:
    """A bounds-checked cursor over the bytes of a ``.params`` file."""

    def __init__(self, buf: bytes, source: str):
        self.buf, self.pos, self.source = memoryview(buf), 0, source

    def fail(self, what: str) -> MXNetError:
        return MXNetError(f"invalid NDArray file {self.source}: {what} (at byte {self.pos})")

    def take(self, size: int, what: str) -> memoryview:
        if size < 0 or self.pos + size > len(self.buf):
            raise self.fail(f"truncated while reading {what} ({size} bytes needed, "
                            f"{len(self.buf) - self.pos} left)")
        chunk = self.buf[self.pos:self.pos + size]
        self.pos += size
        return chunk

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))

    @property
    def left(self) -> int:
        return len(self.buf) - self.pos


def _read_record(r: _Reader, index: int) -> np.ndarray:
    (magic,) = r.unpack("<I", f"magic of array {index}")
    if magic not in (V2_MAGIC, V3_MAGIC):
        raise r.fail(f"array {index} has magic 0x{magic:08X}, expected 0x{V2_MAGIC:08X} (V2) or "
                     f"0x{V3_MAGIC:08X} (V3); files from MXNet before 0.9 are not supported")
    (stype,) = r.unpack("<i", f"storage type of array {index}")
    if stype in (1, 2):  # row_sparse, csr
        from .sparse.io import decode_record
        out = decode_record(r, stype, magic, index)
        return np.empty((0,), np.float32) if out is None else out
    if stype != 0:
        raise r.fail(f"array {index} has storage type {stype}; known: 0 (dense), "
                     "1 (row_sparse), 2 (csr)")
    (ndim,) = r.unpack("<i", f"ndim of array {index}")
    if ndim == -1 and magic == V3_MAGIC:
        return np.empty((0,), np.float32)  # an unknown-shape ("none") array
    if not 0 <= ndim <= _MAX_NDIM:
        raise r.fail(f"array {index} has ndim {ndim}")
    shape = r.unpack(f"<{ndim}q", f"shape of array {index}")
    if any(d < 0 for d in shape):
        raise r.fail(f"array {index} has negative dimensions {shape}")
    if magic == V2_MAGIC and (ndim == 0 or 0 in shape):
        # legacy shape semantics: this is MXNet's empty ("none") NDArray; nothing follows
        return np.empty((0,), np.float32)
    _dev_type, _dev_id, flag = r.unpack("<iii", f"context and dtype of array {index}")
    dtype = _FLAG_TO_DTYPE.get(flag)
    if dtype is None:
        raise r.fail(f"array {index} has dtype flag {flag}, which raymod does not support "
                     f"(known: {sorted(_FLAG_TO_DTYPE)})")
    count = 1
    for d in shape:  # Python ints: a header's dims may multiply past int64
        count *= d
    need = count * dtype.itemsize
    if need > r.left:  # before allocating anything for it
        raise r.fail(f"array {index} has shape {shape} of {dtype}, which needs {need} bytes of "
                     f"data, but only {r.left} bytes are left in the file")
    raw = r.take(need, f"data of array {index} (shape {shape}, {dtype})")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def _decode(buf: bytes, source: str = "<buffer>") -> list | dict:
    r = _Reader(buf, source)
    if r.left < 24:
        raise r.fail("too short for the list header")
    magic, _reserved, count = r.unpack("<QQQ", "list header")
    if magic != LIST_MAGIC:
        raise r.fail(f"list magic is 0x{magic:X}, expected 0x{LIST_MAGIC:X}: not an MXNet "
                     "NDArray file")
    if count * 12 > r.left:
        raise r.fail(f"header claims {count} arrays, more than the file can hold")
    arrays = [_read_record(r, i) for i in range(count)]
    (num_names,) = r.unpack("<Q", "name count")
    if num_names not in (0, count):
        raise r.fail(f"{num_names} names for {count} arrays")
    names = []
    for i in range(num_names):
        (length,) = r.unpack("<Q", f"length of name {i}")
        try:
            names.append(bytes(r.take(length, f"name {i}")).decode("utf-8"))
        except UnicodeDecodeError as err:
            raise r.fail(f"name {i} is not utf-8 ({err})") from None
    if r.left:
        raise r.fail(f"{r.left} unexpected bytes after the names")
    if not names:
        return arrays
    if len(set(names)) != len(names):
        raise r.fail("duplicate array names")
    return dict(zip(names, arrays))


def load_frombuffer(buf: bytes | bytearray | memoryview) -> list | dict:
    """Read arrays from the bytes of a ``.params`` file (``mx.nd.load_frombuffer``).

    Parameters
    ----------
    buf : bytes
        The file's content.

    Returns
    -------
    list of numpy.ndarray or dict of str to numpy.ndarray
        A dict when the arrays were saved with names, else a list.
    """
    if not isinstance(buf, (bytes, bytearray, memoryview)):
        raise TypeError(f"load_frombuffer needs bytes, got {type(buf).__name__}")
    return _decode(bytes(buf))


def load(fname: str | os.PathLike) -> list | dict:
    """Load arrays saved by :func:`save` or by MXNet's ``mx.nd.save`` (``mx.nd.load``).

    Parameters
    ----------
    fname : str
        Path of the file.

    Returns
    -------
    list of numpy.ndarray or dict of str to numpy.ndarray
        A dict (in file order) when the arrays were saved with names, else a list. Arrays
        are host numpy arrays whatever device they were saved from.

    Raises
    ------
    MXNetError
        If the file is not a well-formed NDArray file (wrong magic, truncated, sparse
        storage, unknown dtype, trailing bytes).
    """
    with open(fname, "rb") as f:
        return _decode(f.read(), repr(os.fspath(fname)))

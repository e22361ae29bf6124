"""csr and row_sparse arrays in MXNet's binary ``.params`` layout (``mx.nd.save`` / ``load``).

:mod:`raymod.ndarray_io` reads and writes dense records; this module adds MXNet's sparse
record (``NDArray::Save`` / ``NDArray::Load`` of MXNet 1.9.1, ``src/ndarray/ndarray.cc``),
all little-endian::

    u32 magic (0xF993FAC9, V2: MXNet refuses sparse records in V3)
    i32 storage type (1 = row_sparse, 2 = csr)
    storage shape: i32 ndim, ndim x i64      (the values array's shape: csr (nnz,),
                                              row_sparse (held rows,) + shape[1:])
    shape:         i32 ndim, ndim x i64      (ndim 0: "no array", the record ends here)
    i32 dev_type   i32 dev_id                (1, 0: cpu(0))
    i32 dtype flag of the values
    per index array i (csr: 0 indptr, 1 indices; row_sparse: 0 indices):
        i32 dtype flag (6 = int64), shape: i32 ndim, ndim x i64
    raw values (storage shape, C order), then each index array's raw bytes, in order

:func:`encode_record` makes one record; :func:`decode_record` reads one after its magic and
storage type. :mod:`raymod.ndarray_io` calls them for the sparse records of a file.
"""
from __future__ import annotations

import struct
from typing import Any

import numpy as np

from .. import ndarray_io as _io
from .csr import CSRArray
from .row_sparse import RowSparseArray
from .storage import is_sparse

__all__ = ["STYPE_CODES", "encode_record", "decode_record"]

#: MXNet's storage type codes (``NDArrayStorageType``)
STYPE_CODES = {"default": 0, "row_sparse": 1, "csr": 2}
_INDEX_FLAG = 6  # int64, the only index type MXNet writes
_MAX_NDIM = 32


def _host(array: Any) -> np.ndarray:
    return array.get() if hasattr(array, "get") and not isinstance(array, np.ndarray) \
        else np.asarray(array)


def _shape_bytes(shape: tuple) -> bytes:
    return struct.pack(f"<i{len(shape)}q", len(shape), *shape)


def encode_record(array: Any, magic: int = _io.V2_MAGIC) -> bytes:
    """The bytes of one MXNet NDArray record holding the csr or row_sparse ``array``.

    Parameters
    ----------
    array : CSRArray or RowSparseArray
        A raymod sparse array (or a compat CSRNDArray / RowSparseNDArray), host or device.
    magic : int, default V2
        The record magic; MXNet reads sparse records only under V2 (legacy shape semantics).

    Raises
    ------
    TypeError
        For a dense array, or values of a dtype the format cannot hold.
    """
    if not is_sparse(array):
        raise TypeError(f"encode_record: expected a csr or row_sparse array, got "
                        f"{type(array).__name__}")
    base = getattr(array, "_base", array)  # the raymod array inside a compat wrapper
    values = np.ascontiguousarray(_host(base.data))
    flag = _io._flag_of(values.dtype)
    if flag is None:
        raise TypeError(f"encode_record: values of dtype {values.dtype} do not fit the .params "
                        "format")
    aux = [base.indptr, base.indices] if isinstance(base, CSRArray) else [base.indices]
    aux = [np.ascontiguousarray(_host(a), dtype="<i8") for a in aux]
    shape = tuple(int(d) for d in base.shape)
    parts = [struct.pack("<Ii", magic, STYPE_CODES[base.stype]),
             _shape_bytes(tuple(values.shape)), _shape_bytes(shape),
             struct.pack("<iii", _io._CPU_DEV_TYPE, 0, flag)]
    parts += [struct.pack("<i", _INDEX_FLAG) + _shape_bytes(a.shape) for a in aux]
    parts.append(values.astype(_io._FLAG_TO_DTYPE[flag], copy=False).tobytes())
    parts += [a.tobytes() for a in aux]
    return b"".join(parts)


def _read_shape(r: Any, what: str) -> tuple:
    (ndim,) = r.unpack("<i", f"ndim of {what}")
    if not 0 <= ndim <= _MAX_NDIM:
        raise r.fail(f"{what} has ndim {ndim}")
    shape = r.unpack(f"<{ndim}q", what)
    if any(d < 0 for d in shape):
        raise r.fail(f"{what} has negative dimensions {shape}")
    return shape


def _read_raw(r: Any, shape: tuple, dtype: np.dtype, what: str) -> np.ndarray:
    count = 1
    for d in shape:  # Python ints: a corrupt header cannot overflow
        count *= d
    need = count * dtype.itemsize
    if need > r.left:  # before allocating anything
        raise r.fail(f"{what} of shape {shape} ({dtype}) needs {need} bytes, only {r.left} "
                     "are left")
    raw = r.take(need, what)
    return np.frombuffer(raw, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))


def decode_record(r: Any, stype: int, magic: int, index: int) -> Any:
    """The sparse array of one record, read after its magic and storage type.

    Parameters
    ----------
    r : raymod.ndarray_io._Reader
        The cursor (``unpack``, ``take``, ``fail``, ``left``), at the storage shape.
    stype : int
        The record's storage type code: 1 (row_sparse) or 2 (csr).
    magic : int
        The record's magic (V3 sparse records are refused, as MXNet does).
    index : int
        The record's position in the file, for messages.

    Returns
    -------
    CSRArray, RowSparseArray, or None
        None for MXNet's "no array" record (a shape of ndim 0).

    Raises
    ------
    MXNetError
        (from ``r.fail``) for a malformed record: unknown storage type or dtype, an index
        array that is not int64, shapes that do not fit the storage, truncated data.
    """
    name = {1: "row_sparse", 2: "csr"}.get(stype)
    if name is None:
        raise r.fail(f"array {index} has storage type {stype}; known: 0 (dense), "
                     "1 (row_sparse), 2 (csr)")
    if magic != _io.V2_MAGIC:
        raise r.fail(f"array {index} is a {name} record under V3 (numpy shape) semantics, "
                     "which MXNet does not write")
    storage = _read_shape(r, f"storage shape of array {index}")
    shape = _read_shape(r, f"shape of array {index}")
    if not shape:
        return None  # MXNet's none array: nothing follows
    _dev_type, _dev_id, flag = r.unpack("<iii", f"context and dtype of array {index}")
    dtype = _io._FLAG_TO_DTYPE.get(flag)
    if dtype is None:
        raise r.fail(f"array {index} has dtype flag {flag}, which raymod does not support")
    naux = 2 if name == "csr" else 1
    aux_shapes = []
    for i in range(naux):
        (aux_flag,) = r.unpack("<i", f"index type {i} of array {index}")
        if aux_flag != _INDEX_FLAG:
            raise r.fail(f"array {index} has index array {i} of dtype flag {aux_flag}; "
                         "only int64 (6) is supported")
        aux_shapes.append(_read_shape(r, f"shape of index array {i} of array {index}"))
    values = _read_raw(r, storage, dtype, f"values of array {index}")
    aux = [_read_raw(r, s, np.dtype("<i8"), f"index array {i} of array {index}")
           for i, s in enumerate(aux_shapes)]
    try:
        if name == "csr":
            if len(shape) != 2:
                raise ValueError(f"a csr array is 2-d, got shape {shape}")
            indptr, indices = aux
            if indptr.shape[0] == 0:  # MXNet's freshly zeroed csr holds no indptr at all
                indptr = np.zeros(shape[0] + 1, np.int64)
            return CSRArray(values.reshape(-1), indices, indptr, shape)
        return RowSparseArray(values.reshape((aux[0].shape[0],) + tuple(shape[1:])), aux[0],
                              shape)
    except ValueError as err:
        raise r.fail(f"array {index} is not a valid {name} array: {err}") from None

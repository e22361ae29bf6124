"""csr / row_sparse arrays in MXNet's .params layout (raymod.sparse.io), and
mx.nd.save / mx.nd.load of them."""
import struct

import numpy as np
import pytest

import raymod.compat.mxnet as mx
from raymod.base import MXNetError
from raymod import ndarray_io
from raymod.sparse import io as sparse_io
from raymod.compat.sparse import CSRNDArray, RowSparseNDArray
from raymod.ndarray_io import _Reader
from raymod.sparse import CSRArray, RowSparseArray

V2, V3 = 0xF993FAC9, 0xF993FACA


def shape_bytes(*dims):
    return struct.pack(f"<i{len(dims)}q", len(dims), *dims)


def csr():
    # [[0, 1, 0], [2, 0, 0], [0, 0, 0], [0, 0, 3]]
    return CSRArray(np.array([1, 2, 3], np.float32), [1, 0, 2], [0, 1, 2, 2, 3], (4, 3))


def rsp():
    return RowSparseArray(np.array([[1, 2], [3, 4]], np.float64), [0, 2], (4, 2))


# MXNet's NDArray::Save for a csr array: magic, stype 2, storage shape (nnz,), shape, cpu(0),
# values dtype, then per index array (indptr, indices) its dtype (6, int64) and shape, then
# the values and the index arrays' bytes
CSR_RECORD = (struct.pack("<Ii", V2, 2) + shape_bytes(3) + shape_bytes(4, 3)
              + struct.pack("<iii", 1, 0, 0)
              + struct.pack("<i", 6) + shape_bytes(5) + struct.pack("<i", 6) + shape_bytes(3)
              + struct.pack("<3f", 1, 2, 3) + struct.pack("<5q", 0, 1, 2, 2, 3)
              + struct.pack("<3q", 1, 0, 2))
# row_sparse: stype 1, storage shape (held rows,) + shape[1:], one index array (indices)
RSP_RECORD = (struct.pack("<Ii", V2, 1) + shape_bytes(2, 2) + shape_bytes(4, 2)
              + struct.pack("<iii", 1, 0, 1) + struct.pack("<i", 6) + shape_bytes(2)
              + struct.pack("<4d", 1, 2, 3, 4) + struct.pack("<2q", 0, 2))


def test_records_are_mxnets_layout():
    assert sparse_io.encode_record(csr()) == CSR_RECORD
    assert sparse_io.encode_record(rsp()) == RSP_RECORD
    wrapped = mx.nd.sparse.csr_matrix(([1, 2, 3], [1, 0, 2], [0, 1, 2, 2, 3]), shape=(4, 3))
    assert sparse_io.encode_record(wrapped) == CSR_RECORD
    with pytest.raises(TypeError, match="csr or row_sparse"):
        sparse_io.encode_record(np.ones(3))


def _decode(record):
    r = _Reader(record, "<test>")
    magic, stype = r.unpack("<Ii", "head")
    out = sparse_io.decode_record(r, stype, magic, 0)
    assert r.left == 0
    return out


def test_records_decode_to_raymod_arrays():
    a = _decode(CSR_RECORD)
    assert type(a) is CSRArray and a.shape == (4, 3) and a.dtype == np.float32
    assert a.indptr.tolist() == [0, 1, 2, 2, 3] and a.indices.tolist() == [1, 0, 2]
    b = _decode(RSP_RECORD)
    assert type(b) is RowSparseArray and b.dtype == np.float64
    assert b.indices.tolist() == [0, 2] and b.data.tolist() == [[1, 2], [3, 4]]
    # a csr array MXNet zeroed holds no indptr at all: all zeros
    zeroed = (struct.pack("<Ii", V2, 2) + shape_bytes(0) + shape_bytes(2, 5)
              + struct.pack("<iii", 1, 0, 0) + struct.pack("<i", 6) + shape_bytes(0)
              + struct.pack("<i", 6) + shape_bytes(0))
    z = _decode(zeroed)
    assert z.shape == (2, 5) and z.nnz == 0 and z.indptr.tolist() == [0, 0, 0]


@pytest.mark.parametrize("record, message", [
    (CSR_RECORD[:-4], "truncated|needs"),
    (CSR_RECORD.replace(struct.pack("<i", 6), struct.pack("<i", 4), 1), "int64"),
    (struct.pack("<I", V3) + CSR_RECORD[4:], "V3"),
    (struct.pack("<Ii", V2, 7) + CSR_RECORD[8:], "storage type 7"),
    # indices out of the 3 columns: not a valid csr array
    (CSR_RECORD[:-8] + struct.pack("<q", 9), "not a valid csr"),
])
def test_malformed_records_raise_mxnet_error(record, message):
    with pytest.raises(MXNetError, match=message):
        _decode(record)


def test_files_mix_dense_and_sparse(tmp_path):
    dense = np.arange(6, dtype=np.float32).reshape(2, 3)
    raw = ndarray_io.dumps({"a": csr(), "b": dense, "c": rsp()})
    assert raw[:24] == struct.pack("<QQQ", 0x112, 0, 3)
    assert CSR_RECORD in raw and RSP_RECORD in raw
    back = ndarray_io.load_frombuffer(raw)
    assert list(back) == ["a", "b", "c"] and type(back["a"]) is CSRArray
    np.testing.assert_array_equal(back["b"], dense)
    assert ndarray_io.load_frombuffer(ndarray_io.dumps([dense]))[0].tolist() == dense.tolist()
    with pytest.raises(MXNetError, match="V3"):
        ndarray_io.dumps([np.float32(1.0), csr()])  # a 0-d array needs V3, sparse needs V2
    with pytest.raises(MXNetError, match="unexpected bytes"):
        ndarray_io.load_frombuffer(raw + b"\0")


def test_nd_save_and_load_keep_sparse_classes(tmp_path):
    a = mx.nd.sparse.csr_matrix(np.array([[0, 1.5], [0, 0]], np.float32))
    b = mx.nd.sparse.row_sparse_array(([[1, 2, 3]], [1]), shape=(3, 3), dtype="int64")
    d = mx.nd.array([1, 2])
    fname = str(tmp_path / "mixed.params")
    mx.nd.save(fname, [a, d, b])
    loaded = mx.nd.load(fname)
    assert [type(x) for x in loaded] == [CSRNDArray, mx.nd.NDArray, RowSparseNDArray]
    assert loaded[0].asnumpy().tolist() == [[0, 1.5], [0, 0]]
    assert loaded[2].dtype == np.int64 and loaded[2].asnumpy().tolist() == [[0, 0, 0],
                                                                           [1, 2, 3], [0, 0, 0]]
    mx.nd.save(fname, a)  # one array
    assert type(mx.nd.load(fname)[0]) is CSRNDArray
    with open(fname, "rb") as f:
        raw = f.read()
    assert type(mx.nd.load_frombuffer(raw)[0]) is CSRNDArray
    empty = mx.nd.sparse.zeros("row_sparse", (4, 2))
    mx.nd.save(fname, {"e": empty})
    assert mx.nd.load(fname)["e"].indices.shape == (0,)

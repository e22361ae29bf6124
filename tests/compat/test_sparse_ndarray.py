"""MXNet's sparse NDArrays in the compatibility layer: CSRNDArray / RowSparseNDArray over
raymod's CSRArray / RowSparseArray, their constructors, methods and arithmetic (with the
result storage MXNet 1.9.1 gives), and pickling."""
import pickle

import numpy as np
import pytest
import scipy.sparse as spsp

import raymod.compat.mxnet as mx
from raymod.base import MXNetError
from raymod.compat.sparse import CSRNDArray, RowSparseNDArray, sparse_view, unwrap
from raymod.sparse import CSRArray, RowSparseArray

# [[0, 1, 0], [2, 0, 0], [0, 0, 0], [0, 0, 3]]
DENSE = np.array([[0, 1, 0], [2, 0, 0], [0, 0, 0], [0, 0, 3]], np.float32)
DATA, INDICES, INDPTR = [1, 2, 3], [1, 0, 2], [0, 1, 2, 2, 3]
# rows 0 and 2 of a 4 x 2 array
RSP_DENSE = np.array([[1, 2], [0, 0], [3, 4], [0, 0]], np.float32)


def csr():
    return mx.nd.sparse.csr_matrix((DATA, INDICES, INDPTR), shape=(4, 3))


def rsp():
    return mx.nd.sparse.row_sparse_array(([[1, 2], [3, 4]], [0, 2]), shape=(4, 2))


# --- construction -----------------------------------------------------------------------------
def test_csr_matrix_from_its_three_arrays():
    a = csr()
    assert type(a) is CSRNDArray and isinstance(a, CSRArray) and isinstance(a, mx.nd.NDArray)
    assert a.stype == "csr" and a.shape == (4, 3) and a.dtype == np.float32 and a.nnz == 3
    assert a.context == mx.cpu(0) and a._num_aux == 2
    assert type(a.data) is mx.nd.NDArray and a.data.tolist() == [1, 2, 3]
    assert a.indices.dtype == np.int64 and a.indices.tolist() == [1, 0, 2]
    assert a.indptr.tolist() == [0, 1, 2, 2, 3]
    np.testing.assert_array_equal(a.asnumpy(), DENSE)
    assert type(a.asnumpy()) is np.ndarray
    # the shape is inferred as (len(indptr) - 1, max(indices) + 1)
    assert mx.nd.sparse.csr_matrix((DATA, INDICES, INDPTR)).shape == (4, 3)
    # dtype follows an array's data, else float32; an explicit one wins
    f64 = mx.nd.sparse.csr_matrix((np.array(DATA, np.float64), INDICES, INDPTR), shape=(4, 3))
    assert f64.dtype == np.float64 and f64.data.dtype == np.float64
    i32 = mx.nd.sparse.csr_matrix((DATA, INDICES, INDPTR), shape=(4, 3), dtype="int32")
    assert i32.dtype == np.int32 and i32.asnumpy().tolist() == DENSE.astype(int).tolist()


def test_csr_matrix_other_sources():
    coo = mx.nd.sparse.csr_matrix(([5.0, 1.0, 2.0], ([1, 0, 1], [2, 0, 2])), shape=(2, 3))
    assert coo.asnumpy().tolist() == [[1, 0, 0], [0, 0, 7]]  # repeated (1, 2) summed
    empty = mx.nd.sparse.csr_matrix((2, 5), dtype="float64", ctx=mx.cpu(1))
    assert empty.shape == (2, 5) and empty.nnz == 0 and empty.dtype == np.float64
    assert empty.context == mx.cpu(1) and empty.indptr.tolist() == [0, 0, 0]
    from_list = mx.nd.sparse.csr_matrix([[0, 4], [5, 0]])
    assert from_list.dtype == np.float32 and from_list.data.tolist() == [4, 5]
    from_nd = mx.nd.sparse.csr_matrix(mx.nd.array(DENSE, dtype="float64"), ctx=mx.cpu(2))
    assert from_nd.dtype == np.float64 and from_nd.context == mx.cpu(2)
    # scipy: canonicalised (columns sorted, duplicates summed)
    messy = spsp.csr_matrix((np.array([2.0, 1.0, 3.0]), np.array([2, 0, 0]),
                             np.array([0, 3, 3])), shape=(2, 3))
    canon = mx.nd.array(messy)
    assert type(canon) is CSRNDArray and canon.dtype == np.float64
    assert canon.indices.tolist() == [0, 2] and canon.data.tolist() == [4, 2]
    assert mx.nd.sparse.array(messy, dtype="float32").dtype == np.float32
    copy = mx.nd.sparse.csr_matrix(canon)
    assert copy.asnumpy().tolist() == canon.asnumpy().tolist()
    assert unwrap(copy).data is not unwrap(canon).data


def test_constructor_errors_as_mxnet():
    with pytest.raises(ValueError, match="Shape mismatch"):
        mx.nd.sparse.csr_matrix(mx.nd.ones((2, 2)), shape=(3, 2))
    with pytest.raises(ValueError, match="Shape mismatch"):
        mx.nd.sparse.csr_matrix((2, 2), shape=(3, 2))
    with pytest.raises(ValueError, match="Shape mismatch"):
        mx.nd.sparse.row_sparse_array((2, 2), shape=(3, 2))
    with pytest.raises(ValueError, match="unknown storage type"):
        mx.nd.sparse.zeros("invalid_stype", (2, 2))
    with pytest.raises(ValueError, match="Unexpected input type: RowSparseNDArray"):
        mx.nd.sparse.csr_matrix(rsp())
    with pytest.raises(ValueError, match="2-d"):
        mx.nd.array([1, 2, 3]).tostype("csr")
    with pytest.raises(ValueError, match="invalid shape"):
        mx.nd.sparse.csr_matrix(([], [], [0, 0]))  # no indices: no column count to infer
    with pytest.raises(ValueError, match="mx.nd.array"):
        mx.nd.sparse.array(np.ones((2, 2)))


def test_row_sparse_array_constructors():
    a = rsp()
    assert type(a) is RowSparseNDArray and isinstance(a, RowSparseArray)
    assert a.stype == "row_sparse" and a.shape == (4, 2) and a._num_aux == 1
    assert a.data.tolist() == [[1, 2], [3, 4]] and a.indices.tolist() == [0, 2]
    assert a.indices.dtype == np.int64
    np.testing.assert_array_equal(a.asnumpy(), RSP_DENSE)
    inferred = mx.nd.sparse.row_sparse_array(([[1, 2], [3, 4]], [0, 2]))
    assert inferred.shape == (3, 2)  # (indices[-1] + 1,) + data.shape[1:]
    empty = mx.nd.sparse.row_sparse_array((np.int32(3), np.int64(5)), dtype="int32")
    assert empty.shape == (3, 5) and empty.indices.shape == (0,) and empty.dtype == np.int32
    assert mx.nd.sparse.row_sparse_array((2, 3, 4)).shape == (2, 3, 4)
    from_dense = mx.nd.sparse.row_sparse_array(RSP_DENSE.astype(np.float64), ctx=mx.cpu(1))
    assert from_dense.indices.tolist() == [0, 2] and from_dense.dtype == np.float64
    assert from_dense.context == mx.cpu(1)
    zeros = mx.nd.sparse.zeros("row_sparse", (5, 2), dtype="float16")
    assert zeros.dtype == np.float16 and zeros.asnumpy().tolist() == [[0, 0]] * 5
    assert mx.nd.zeros((3, 3), stype="row_sparse").stype == "row_sparse"
    assert mx.nd.empty((3, 3), stype="csr").stype == "csr"
    assert mx.nd.sparse.empty("csr", (3, 3)).nnz == 0
    assert mx.nd.sparse.zeros("default", (2,)).stype == "default"


# --- methods ----------------------------------------------------------------------------------
def test_data_views_conversion_and_copies():
    a = csr()
    a.data[0] = 10  # views of the held arrays (MXNet gives copies; a view costs nothing)
    assert a.asnumpy()[0, 1] == 10
    s = a.asscipy()
    assert isinstance(s, spsp.csr_matrix) and s.toarray()[0, 1] == 10
    s.data[0] = -1  # a copy
    assert a.asnumpy()[0, 1] == 10
    dense = a.tostype("default")
    assert type(dense) is mx.nd.NDArray and dense[0, 1] == 10
    assert a.tostype("csr") is not a and a.tostype("csr").asnumpy()[0, 1] == 10
    with pytest.raises(ValueError, match="csr to row_sparse"):
        a.tostype("row_sparse")
    with pytest.raises(ValueError, match="row_sparse to csr"):
        rsp().tostype("csr")
    b = rsp()
    full = mx.nd.sparse.row_sparse_array(np.ones((2, 2), np.float32))
    full.todense()[0, 0] = 5  # every row held: still a copy
    assert full.asnumpy()[0, 0] == 1
    c = b.copy()
    c.data[0, 0] = 7
    assert b.data[0, 0] == 1 and type(c) is RowSparseNDArray
    assert mx.nd.zeros((2, 2), stype="row_sparse").tostype("row_sparse").stype == "row_sparse"


def test_astype_copyto_and_contexts():
    a = mx.nd.sparse.zeros("csr", (2, 3), dtype="int32")
    assert a.astype("int32", copy=False) is a and a.astype(np.int32, copy=False) is a
    assert a.astype("int32") is not a and a.astype("float32", copy=False).dtype == np.float32
    b = csr()
    on1 = b.copyto(mx.cpu(1))
    assert type(on1) is CSRNDArray and on1.context == mx.cpu(1)
    assert on1.as_in_context(mx.cpu(1)) is on1
    dense = mx.nd.zeros((4, 3))
    assert b.copyto(dense) is dense and dense.asnumpy().tolist() == DENSE.tolist()
    target = mx.nd.sparse.zeros("csr", (4, 3))
    assert b.copyto(target) is target and target.nnz == 3
    with pytest.raises(TypeError, match="stype row_sparse"):
        b.copyto(mx.nd.sparse.zeros("row_sparse", (4, 3)))
    dense_source = mx.nd.array(RSP_DENSE)
    rows = mx.nd.sparse.zeros("row_sparse", (4, 2))
    assert dense_source.copyto(rows) is rows and rows.indices.tolist() == [0, 2]


def test_csr_row_slices():
    a = csr()
    assert a[1].asnumpy().tolist() == [[2, 0, 0]] and a[1].shape == (1, 3)
    assert a[-1].asnumpy().tolist() == [[0, 0, 3]]
    assert a[1:3].asnumpy().tolist() == [[2, 0, 0], [0, 0, 0]]
    assert a[-3:].indptr.tolist() == [0, 1, 1, 2]
    assert a[:] is a
    part = a[0:2]
    part.data[0] = 9  # a new array
    assert a.data[0] == 1
    with pytest.raises(ValueError, match="continuous slicing"):
        a[::2]
    with pytest.raises(ValueError, match="Multi-dimension"):
        a[0, 1]
    b = rsp()
    assert b[:] is b
    with pytest.raises(ValueError, match=r"only supports \[:\]"):
        b[1:2]


def test_whole_assignment():
    a = mx.nd.sparse.zeros("csr", (4, 3))
    a[:] = csr()
    assert a.asnumpy().tolist() == DENSE.tolist()
    a[:] = np.eye(4, 3, dtype=np.float64)  # dense: its non-zeros, in a's dtype
    assert a.indices.tolist() == [0, 1, 2] and a.dtype == np.float32
    a[:] = mx.nd.ones((4, 3)) * 2
    assert a.nnz == 12 and a.asnumpy().sum() == 24
    a[:] = spsp.csr_matrix(DENSE)
    assert a.asnumpy().tolist() == DENSE.tolist()
    with pytest.raises(ValueError, match="numeric types"):
        a[:] = 1
    with pytest.raises(ValueError, match="only x\\[:\\]"):
        a[1:] = csr()
    b = mx.nd.sparse.zeros("row_sparse", (3, 2))
    b[:] = 2.5  # every row held, as MXNet's _set_value
    assert b.indices.tolist() == [0, 1, 2] and b.asnumpy().tolist() == [[2.5, 2.5]] * 3
    b[:] = 0
    assert b.indices.shape == (0,)
    b[...] = np.array([[0, 0], [1, 0], [0, 0]])
    assert b.indices.tolist() == [1]
    with pytest.raises(ValueError, match="shape"):
        b[:] = rsp()


def test_writes_through_a_view_reach_the_raymod_holder():
    holder = CSRArray.empty((2, 3))
    view = sparse_view(holder)
    assert type(view) is CSRNDArray and unwrap(view) is holder
    view[:] = np.array([[0, 5, 0], [0, 0, 6]], np.float32)
    assert holder.nnz == 2 and holder.todense().tolist() == [[0, 5, 0], [0, 0, 6]]
    assert sparse_view(view) is view
    table = RowSparseArray.empty((3, 2))
    sparse_view(table)[:] = RSP_DENSE[:3]
    assert table.indices.tolist() == [0, 2]


def test_check_format_raises_mxnet_error():
    shape = (3, 4)
    for indices, indptr in (([0, 2, 1], [0, 5, 2, 3]),  # indptr past nnz / decreasing
                            ([2, 1, 1], [0, 2, 2, 3]),  # columns not ascending in a row
                            ([1, 2, 1], [0, 2, 2, 4]),  # indptr does not end at nnz
                            ([0, 2, 1], [0, -2, 2, 3])):
        a = mx.nd.sparse.csr_matrix(([7, 8, 9], indices, indptr), shape=shape)
        with pytest.raises(MXNetError):
            a.check_format()
    for indices in ([1, 4], [1, 0], [1, -2]):
        b = mx.nd.sparse.row_sparse_array(([[1, 2], [3, 4]], indices), shape=(3, 2))
        with pytest.raises(MXNetError):
            b.check_format()
    csr().check_format()
    rsp().check_format(full_check=False)


def test_methods_mxnet_leaves_out_raise():
    a = rsp()
    for call in (lambda: a.reshape((8,)), lambda: a._slice(0, 1), lambda: a._at(0)):
        with pytest.raises(mx.base.NotSupportedForSparseNDArray):
            call()


# --- arithmetic -------------------------------------------------------------------------------
def _check(result, stype, expected):
    assert result.stype == stype, (result.stype, stype)
    np.testing.assert_allclose(result.asnumpy(), np.asarray(expected, np.float32), rtol=1e-6)


def test_arithmetic_with_scalars_keeps_storage_where_mxnet_does():
    a = csr()
    _check(a * 2, "csr", DENSE * 2)
    _check(2 * a, "csr", DENSE * 2)
    _check(a / 2, "csr", DENSE / 2)
    _check(a + 0, "csr", DENSE)
    _check(a - 0, "csr", DENSE)
    _check(0 + a, "csr", DENSE)
    _check(a + 1, "default", DENSE + 1)
    _check(1 - a, "default", 1 - DENSE)
    _check(a ** 2, "default", DENSE ** 2)
    _check(-a, "csr", -DENSE)
    assert (a * 2).data.tolist() == [2, 4, 6]  # only the stored values computed
    with np.errstate(divide="ignore"):
        _check(1 / mx.nd.sparse.csr_matrix(np.ones((2, 2))), "default", np.ones((2, 2)))
    # a comparison stays sparse when it is false at 0, with MXNet's 1.0 / 0.0 values
    _check(a > 0, "csr", DENSE > 0)
    _check(a == 1, "csr", DENSE == 1)
    _check(0 < a, "csr", DENSE > 0)
    _check(a >= 0, "default", np.ones((4, 3)))
    _check(a != 1, "default", DENSE != 1)
    _check(0.5 > a, "default", DENSE < 0.5)
    assert (a > 0).dtype == np.float32
    b = rsp()
    _check(b * 3, "row_sparse", RSP_DENSE * 3)
    _check(b + 2, "default", RSP_DENSE + 2)
    _check(b < 2, "default", RSP_DENSE < 2)
    _check(b > 2, "row_sparse", RSP_DENSE > 2)


def test_arithmetic_between_arrays():
    a, ones = csr(), mx.nd.sparse.csr_matrix(np.ones((4, 3), np.float32))
    _check(a + a, "csr", DENSE * 2)
    _check(a - ones, "csr", DENSE - 1)
    _check(a * ones, "csr", DENSE)
    _check(a / ones, "default", DENSE)
    _check(a > ones, "default", DENSE > 1)
    dense = mx.nd.array(np.arange(12, dtype=np.float32).reshape(4, 3))
    _check(a + dense, "default", DENSE + dense.asnumpy())
    _check(a * dense, "csr", DENSE * dense.asnumpy())
    # a dense left operand is MXNet's dense NDArray op (broadcast_mul): a dense result ...
    _check(dense * a, "default", DENSE * dense.asnumpy())
    _check(dense - a, "default", dense.asnumpy() - DENSE)
    # ... where the function sparse.multiply runs elemwise_mul, sparse for dense * csr
    _check(mx.nd.sparse.multiply(dense, a), "csr", DENSE * dense.asnumpy())
    _check(mx.nd.sparse.add(a, a), "csr", DENSE * 2)
    _check(mx.nd.sparse.subtract(a, 1), "default", DENSE - 1)
    _check(mx.nd.sparse.divide(a, 4), "csr", DENSE / 4)
    assert mx.nd.sparse.add(2, 3) == 5
    # broadcasting: csr * (or /) a dense array broadcast to its shape stays csr
    row = mx.nd.array([[1, 2, 3]])
    _check(a * row, "csr", DENSE * [[1, 2, 3]])
    _check(a / row, "csr", DENSE / [[1, 2, 3]])
    _check(a + row, "default", DENSE + [[1, 2, 3]])
    b = rsp()
    other = mx.nd.sparse.row_sparse_array(([[10, 10], [1, 1]], [1, 2]), shape=(4, 2))
    _check(b + other, "row_sparse", RSP_DENSE + other.asnumpy())
    assert (b + other).indices.tolist() == [0, 1, 2]  # the union of the held rows
    _check(b - other, "row_sparse", RSP_DENSE - other.asnumpy())
    product = b * other
    assert product.stype == "row_sparse" and product.indices.tolist() == [2]
    _check(product, "row_sparse", RSP_DENSE * other.asnumpy())
    _check(b * mx.nd.ones((4, 2)) * 2, "row_sparse", RSP_DENSE * 2)
    _check(b + mx.nd.ones((4, 2)), "default", RSP_DENSE + 1)
    _check(a + mx.nd.sparse.row_sparse_array(DENSE), "default", DENSE * 2)  # mixed storage


def test_inplace_arithmetic_keeps_the_object_and_its_storage():
    a = csr()
    held = unwrap(a)
    a += a
    assert unwrap(a) is held and a.stype == "csr" and a.asnumpy().tolist() == (DENSE * 2).tolist()
    a *= 0.5
    a -= csr()
    assert a.nnz == 0 or not a.asnumpy().any()
    b = rsp()
    b += mx.nd.ones((4, 2))  # a dense sum stored back as row_sparse: every row non-zero
    assert b.stype == "row_sparse" and b.indices.tolist() == [0, 1, 2, 3]
    b /= 2
    assert b.asnumpy().tolist() == ((RSP_DENSE + 1) / 2).tolist()


def test_fluent_methods_run_the_ops():
    a = csr()
    _check(a.square(), "csr", DENSE ** 2)
    _check(a.sqrt(), "csr", np.sqrt(DENSE))
    _check(a.sum(axis=0), "default", DENSE.sum(axis=0))
    _check(a.cos(), "default", np.cos(DENSE))  # cos(0) = 1: dense
    _check(a.degrees(), "csr", np.degrees(DENSE))  # numpy's, on the stored values
    _check(mx.nd.sparse.arcsin(a / 4), "csr", np.arcsin(DENSE / 4))
    _check(a.T, "default", DENSE.T)
    _check(a.clip(0, 2), "csr", np.clip(DENSE, 0, 2))  # 0 inside the range: stays csr
    assert a.norm().asscalar() == pytest.approx(np.sqrt(14))
    assert mx.nd.array(DENSE).norm(ord=2, axis=1).asnumpy().tolist() == \
        pytest.approx(np.linalg.norm(DENSE, axis=1).tolist())
    with pytest.raises(AttributeError):
        a.no_such_method


def test_numpy_arithmetic_defers_to_the_sparse_array():
    a = csr()
    host = np.ones((4, 3), np.float32)
    _check(host + a, "default", DENSE + 1)
    assert (host == a).stype == "default"


def test_pickle_keeps_the_class_contents_and_context():
    for array in (csr(), rsp(), mx.nd.sparse.zeros("csr", (2, 2)),
                  mx.nd.sparse.row_sparse_array(RSP_DENSE, ctx=mx.cpu(3))):
        back = pickle.loads(pickle.dumps(array))
        assert type(back) is type(array) and back.context == array.context
        np.testing.assert_array_equal(back.asnumpy(), array.asnumpy())
        assert back.dtype == array.dtype


def test_repr_names_class_shape_and_context():
    assert repr(csr()) == "\n<CSRNDArray 4x3 @cpu(0)>"
    assert repr(mx.nd.sparse.zeros("row_sparse", (2, 5), ctx=mx.cpu(1))) == \
        "\n<RowSparseNDArray 2x5 @cpu(1)>"

"""Sparse arrays through the compatibility layer's op functions (mx.nd.<op>, mx.nd.sparse.<op>),
mx.sym.sparse, the import paths, and raymod's sparse holders handed to user code."""
import numpy as np
import pytest

import raymod as rm
import raymod.compat.mxnet as mx
from raymod.array_view import show
from raymod.compat.sparse import CSRNDArray, RowSparseNDArray, unwrap
from raymod.sparse import CSRArray, RowSparseArray

DENSE = np.array([[0, 1, 0], [2, 0, 0], [0, 0, 0], [0, 0, 3]], np.float32)
W = np.arange(6, dtype=np.float32).reshape(3, 2)  # [[0, 1], [2, 3], [4, 5]]


def csr():
    return mx.nd.sparse.csr_matrix(([1, 2, 3], [1, 0, 2], [0, 1, 2, 2, 3]), shape=(4, 3))


def test_dot_with_a_csr_lhs():
    out = mx.nd.dot(csr(), mx.nd.array(W))
    assert type(out) is mx.nd.NDArray
    assert out.asnumpy().tolist() == [[2, 3], [0, 2], [0, 0], [12, 15]]
    # dense rhs held as row_sparse (rows 0 and 2 only): the rows not held are zeros
    table = mx.nd.sparse.row_sparse_array(([[0, 1], [4, 5]], [0, 2]), shape=(3, 2))
    assert mx.nd.sparse.dot(csr(), table).asnumpy().tolist() == [[0, 0], [0, 2], [0, 0],
                                                                  [12, 15]]
    grad = mx.nd.sparse.dot(csr(), mx.nd.ones((4, 2)), transpose_a=True)
    assert type(grad) is RowSparseNDArray  # csr.T @ dense: the columns the csr holds
    assert grad.indices.tolist() == [0, 1, 2] and grad.data.tolist() == [[2, 2], [1, 1], [3, 3]]


def test_ops_that_compute_on_sparse_inputs_keep_their_storage():
    a = csr()
    sq = mx.nd.square(a)
    assert type(sq) is CSRNDArray and sq.data.tolist() == [1, 4, 9]
    assert unwrap(sq).data is not unwrap(a).data
    assert mx.nd.sparse.relu(-a).nnz == 3 and not mx.nd.sparse.relu(-a).asnumpy().any()
    rows = mx.nd.sparse.row_sparse_array(([[1, 2], [3, 4], [5, 6]], [0, 2, 3]), shape=(5, 2))
    kept = mx.nd.sparse.retain(rows, mx.nd.array([3, 0, 4], dtype="int64"))
    assert type(kept) is RowSparseNDArray and kept.indices.tolist() == [0, 3]
    assert kept.data.tolist() == [[1, 2], [5, 6]]
    assert mx.nd._internal._square_sum(rows, axis=1).asnumpy().tolist() == [5, 0, 25, 61, 0]
    per_row = mx.nd._internal._square_sum(rows, axis=1, keepdims=True)
    assert per_row.stype == "row_sparse" and per_row.indices.tolist() == [0, 2, 3]
    looked_up = mx.nd.sparse.Embedding(mx.nd.array([2, 0]), rows, input_dim=5, output_dim=2)
    assert looked_up.asnumpy().tolist() == [[3, 4], [1, 2]]


def test_cast_storage_gives_new_arrays():
    a = csr()
    same = mx.nd.cast_storage(a, stype="csr")
    assert type(same) is CSRNDArray and same is not a
    assert unwrap(same).data is not unwrap(a).data  # MXNet's results never share memory
    dense = mx.nd.sparse.cast_storage(a, stype="default")
    assert type(dense) is mx.nd.NDArray and dense.asnumpy().tolist() == DENSE.tolist()
    rows = mx.nd.cast_storage(mx.nd.array(DENSE), stype="row_sparse")
    assert type(rows) is RowSparseNDArray and rows.indices.tolist() == [0, 1, 3]
    full = mx.nd.sparse.row_sparse_array(np.ones((2, 2), np.float32))
    back = mx.nd.cast_storage(full, stype="default")
    back[0, 0] = 7
    assert full.asnumpy()[0, 0] == 1


def test_other_ops_fall_back_to_dense_inputs_and_results():
    a = csr()
    total = mx.nd.broadcast_add(a, mx.nd.sparse.row_sparse_array(DENSE))
    assert type(total) is mx.nd.NDArray and total.asnumpy().tolist() == (DENSE * 2).tolist()
    assert mx.nd.sum(a, axis=1).asnumpy().tolist() == [1, 2, 0, 3]
    part = mx.nd.slice(a, begin=(1, 0), end=(4, 2))
    assert part.asnumpy().tolist() == [[2, 0], [0, 0], [0, 0]]
    # out= may be sparse: the dense result is stored in its storage
    out = mx.nd.sparse.zeros("csr", (2, 2))
    assert mx.nd.broadcast_add(mx.nd.ones((2, 2)), mx.nd.ones((2, 2)) * 2, out=out) is out
    assert out.stype == "csr" and out.nnz == 4 and out.asnumpy().tolist() == [[3, 3], [3, 3]]
    dense_out = mx.nd.zeros((4, 3))
    mx.nd.square(a, out=dense_out)
    assert dense_out.asnumpy().tolist() == (DENSE ** 2).tolist()


def test_sparse_namespace_holds_mxnets_sparse_names_only():
    assert mx.nd.sparse.dot is mx.nd.dot and mx.nd.sparse.square is mx.nd.square
    assert mx.nd.sparse.retain.__name__ == "_sparse_retain"
    assert "retain" in dir(mx.nd.sparse) and "csr_matrix" in dir(mx.nd.sparse)
    with pytest.raises(AttributeError, match="Convolution"):
        mx.nd.sparse.Convolution  # no sparse alias in MXNet


def test_symbol_sparse_builds_the_same_ops():
    data, weight = mx.sym.Variable("data", stype="csr"), mx.sym.Variable("w")
    out = mx.sym.sparse.dot(data, weight)
    assert out.list_arguments() == ["data", "w"] and out.name.startswith("dot")
    assert mx.sym.sparse.retain(weight, mx.sym.Variable("idx")).list_arguments() == ["w", "idx"]
    assert mx.sym._internal._square_sum(weight, axis=1).list_arguments() == ["w"]
    assert mx.sym.op.square(weight).list_arguments() == ["w"]
    assert mx.sym.sparse.cbrt(weight).list_arguments() == ["w"]
    with pytest.raises(AttributeError):
        mx.sym.sparse.Convolution
    with pytest.raises(AttributeError):
        mx.sym._internal.square  # not an internal name


def test_import_paths_under_install():
    rm.compat.install()
    try:
        import mxnet
        import mxnet.ndarray.sparse as nd_sparse
        import mxnet.symbol.sparse as sym_sparse
        from mxnet.ndarray.sparse import CSRNDArray as Imported

        assert nd_sparse is mxnet.nd.sparse and Imported is CSRNDArray
        assert sym_sparse is mxnet.sym.sparse
        assert mxnet.base.mx_real_t is np.float32
    finally:
        rm.compat.uninstall()


def test_holders_are_shown_as_sparse_ndarrays_that_fill_them():
    holder = CSRArray.empty((2, 3))
    rm.compat.install()
    try:
        shown = show([holder, {"w": RowSparseArray.empty((3, 2))}])
    finally:
        rm.compat.uninstall()
    assert type(shown[0]) is CSRNDArray and unwrap(shown[0]) is holder
    assert type(shown[1]["w"]) is RowSparseNDArray


def test_executor_arrays_with_sparse_storage():
    rm.compat.install()
    try:
        data = mx.sym.Variable("data", stype="csr")
        weight = mx.sym.Variable("w", stype="row_sparse")
        exe = mx.sym.sparse.dot(data, weight).simple_bind(mx.cpu(), data=(4, 3), w=(3, 2))
        batch, table = exe.arg_dict["data"], exe.arg_dict["w"]
        assert type(batch) is CSRNDArray and type(table) is RowSparseNDArray
        batch[:] = csr()  # fills the executor's own holder
        table[:] = W
        assert exe.arg_dict["data"].nnz == 3
        out = exe.forward(is_train=True)[0]
        assert out.asnumpy().tolist() == [[2, 3], [0, 2], [0, 0], [12, 15]]
        exe.backward(mx.nd.ones((4, 2)))
        grad = exe.grad_dict["w"]
        assert type(grad) is RowSparseNDArray
        assert grad.indices.tolist() == [0, 1, 2] and grad.data.tolist() == [[2, 2], [1, 1],
                                                                              [3, 3]]
        # forward(name=array) with a sparse NDArray: the holder takes its contents
        exe.forward(is_train=False, data=mx.nd.sparse.csr_matrix(np.eye(4, 3, dtype="f")))
        assert exe.outputs[0].asnumpy().tolist() == [[0, 1], [2, 3], [4, 5], [0, 0]]
    finally:
        rm.compat.uninstall()


def test_test_utils_checkers_with_sparse_inputs_and_gradients():
    from raymod.compat.mxnet import test_utils as tu

    rng = np.random.RandomState(0)
    weight = rng.rand(4, 2)
    data = tu.rand_ndarray((3, 4), "csr", density=0.5)
    assert data.stype == "csr" and data.shape == (3, 4)
    out = mx.sym.sparse.dot(mx.sym.Variable("d", stype="csr"), mx.sym.Variable("w"))
    tu.check_symbolic_forward(out, {"d": data, "w": weight}, [data.asnumpy() @ weight])
    grads = tu.check_symbolic_backward(
        out, {"d": data, "w": weight}, [np.ones((3, 2))],
        {"w": data.asnumpy().T @ np.ones((3, 2))}, grad_req={"d": "null", "w": "write"},
        grad_stypes={"w": "row_sparse"})
    assert type(grads["w"]) is RowSparseNDArray
    with pytest.raises(AssertionError):  # a wrong expectation is caught
        tu.check_symbolic_forward(out, {"d": data, "w": weight}, [data.asnumpy() @ weight + 1])
    rows = tu.rand_ndarray((5, 3), "row_sparse", density=1)
    tu.check_numeric_gradient(mx.sym._internal._square_sum(mx.sym.Variable("data"), axis=1),
                              [rows], grad_stype_dict={"data": "row_sparse"}, numeric_eps=1e-2,
                              rtol=0.1, atol=0.1)
    csr_rows, (indptr, indices, values) = tu.rand_sparse_ndarray((32, 100), "csr", density=0.1,
                                                                 distribution="powerlaw")
    assert values.shape[0] == 320 and np.diff(indptr.asnumpy())[:4].tolist() == [2, 4, 8, 16]

"""Sparse operators: forward against the dense computation, gradients against central
differences of the same graph with dense variables, and the storage of every result."""
import numpy as np
import pytest

import raymod as rm
from raymod.sparse import CSRArray, RowSparseArray, cast_storage
from raymod.test_utils import numeric_gradients

RNG = np.random.default_rng(7)


def sparse_data(rows, cols, density=0.3):
    d = (RNG.random((rows, cols)) < density) * RNG.standard_normal((rows, cols))
    d[0] = 0  # an empty row
    return d


def run(sym, stypes, values, out_grads):
    """Bind ``sym`` with the given storage, load ``values`` (dense, cast to each stype), run
    forward and backward; return the outputs and the gradients."""
    shapes = {k: v.shape for k, v in values.items()}
    ex = sym.simple_bind(rm.cpu(), type_dict={k: np.float64 for k in values},
                         stype_dict=stypes, **shapes)
    for k, v in values.items():
        target = ex.arg_dict[k]
        if isinstance(target, RowSparseArray):
            target[:] = RowSparseArray.full(v.copy())
        elif isinstance(target, CSRArray):
            target[:] = cast_storage(v, "csr")
        else:
            target[...] = v
    outs = ex.forward(is_train=True)
    ex.backward(out_grads)
    return outs, ex.grad_dict


def _dense_outs(sym, values):
    ex = sym.bind(rm.cpu(), {k: v.astype(np.float64) for k, v in values.items()},
                  grad_req="null")
    return [np.asarray(o) for o in ex.forward()]


def gradient_check(sym, stypes, values, wanted_sparse, rtol=1e-5, atol=1e-7):
    heads = [RNG.standard_normal(o.shape) for o in _dense_outs(sym, values)]
    outs, grads = run(sym, stypes, values, heads)
    dense_outs = _dense_outs(sym, values)
    for o, want in zip(outs, dense_outs):
        got = o.todense() if hasattr(o, "todense") else np.asarray(o)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    numeric = numeric_gradients(sym, values, heads, names=list(wanted_sparse),
                                max_elements=40)
    for name, sparse in wanted_sparse.items():
        g = grads[name]
        assert isinstance(g, RowSparseArray) == sparse, (name, type(g))
        dense = g.todense() if sparse else np.asarray(g)
        picks, values_ = numeric[name]
        np.testing.assert_allclose(dense.reshape(-1)[picks], values_, rtol=1e-4, atol=1e-6)
    return outs, grads


def test_dot_csr_times_table_gives_a_gradient_of_the_batch_columns_only():
    x = sparse_data(5, 12)
    w = RNG.standard_normal((12, 3))
    sym = rm.sym.dot(rm.sym.Variable("x"), rm.sym.Variable("w"))
    _, grads = gradient_check(sym, {"x": "csr", "w": "row_sparse"}, {"x": x, "w": w},
                              {"w": True})
    present = np.flatnonzero((x != 0).any(axis=0))
    np.testing.assert_array_equal(grads["w"].indices, present)


def test_dot_csr_with_a_dense_weight_still_gives_row_sparse_gradient():
    x = sparse_data(4, 9)
    w = RNG.standard_normal((9, 2))
    sym = rm.sym.dot(rm.sym.Variable("x"), rm.sym.Variable("w"))
    gradient_check(sym, {"x": "csr"}, {"x": x, "w": w}, {"w": True})


def test_dot_transpose_a_of_csr_is_row_sparse():
    x = sparse_data(6, 8)
    g = RNG.standard_normal((6, 3))
    sym = rm.sym.dot(rm.sym.Variable("x"), rm.sym.Variable("g"), transpose_a=True)
    outs, grads = gradient_check(sym, {"x": "csr"}, {"x": x, "g": g}, {"g": False})
    assert isinstance(outs[0], RowSparseArray)


def test_dot_with_pulled_rows_reads_unpulled_rows_as_zeros():
    x = cast_storage(sparse_data(4, 10), "csr")
    w = RNG.standard_normal((10, 2)).astype(np.float32)
    pulled = RowSparseArray(w[[1, 4, 7]], [1, 4, 7], w.shape)
    out = rm.ops.get_op("dot")().forward(np, [x, pulled], [], False)[0][0]
    keep = np.zeros((10, 1), np.float32)
    keep[[1, 4, 7]] = 1
    np.testing.assert_allclose(out, x.todense() @ (w * keep), rtol=1e-6)


def test_embedding_sparse_grad_sums_repeated_ids():
    ids = np.array([[1, 3], [3, 7], [1, 1]], np.float64)
    w = RNG.standard_normal((9, 4))
    for variant in (dict(sparse_grad=True), dict(sparse_grad=False)):
        sym = rm.sym.Embedding(rm.sym.Variable("ids"), rm.sym.Variable("w"), input_dim=9,
                               output_dim=4, **variant)
        _, grads = gradient_check(sym, {"w": "row_sparse"}, {"ids": ids, "w": w},
                                  {"w": True})
        np.testing.assert_array_equal(grads["w"].indices, [1, 3, 7])


def test_sparse_embedding_alias_and_dense_weight():
    ids = np.array([0, 5, 5, 2], np.float64)
    w = RNG.standard_normal((6, 3))
    sym = rm.sym.contrib.SparseEmbedding(rm.sym.Variable("ids"), rm.sym.Variable("w"),
                                         input_dim=6, output_dim=3)
    gradient_check(sym, {}, {"ids": ids, "w": w}, {"w": True})


def test_embedding_of_pulled_rows_gives_zeros_elsewhere():
    w = RNG.standard_normal((8, 2)).astype(np.float32)
    pulled = RowSparseArray(w[[2, 5]], [2, 5], w.shape)
    op = rm.ops.get_op("Embedding")(input_dim=8, output_dim=2)
    out = op.forward(np, [np.array([2, 3, 5.0]), pulled], [], False)[0][0]
    np.testing.assert_array_equal(out, np.stack([w[2], np.zeros(2), w[5]]))


@pytest.mark.parametrize("axis,keepdims", [(1, True), (1, False), (0, False)])
def test_square_sum_of_row_sparse(axis, keepdims):
    v = RNG.standard_normal((7, 3))
    sym = rm.sym._square_sum(rm.sym.Variable("v"), axis=axis, keepdims=keepdims)
    outs, _ = gradient_check(sym, {"v": "row_sparse"}, {"v": v}, {"v": True})
    assert isinstance(outs[0], RowSparseArray) == (axis == 1 and keepdims)


def test_factorization_machine_graph_is_sparse_end_to_end():
    """The FM example's terms: dot(x, w), dot(square(x), _square_sum(v)), dot(x, v)."""
    x = sparse_data(5, 11)
    v = RNG.standard_normal((11, 3))
    w = RNG.standard_normal((11, 1))
    X, V, W = (rm.sym.Variable(n) for n in "xvw")
    vs = rm.sym._square_sum(V, axis=1, keepdims=True)
    inter = rm.sym.square(rm.sym.dot(X, V))
    y = rm.sym.sum(inter, axis=1, keepdims=True) - 0.5 * rm.sym.dot(rm.sym.square(X), vs) \
        + rm.sym.dot(X, W)
    gradient_check(y, {"x": "csr", "v": "row_sparse", "w": "row_sparse"},
                   {"x": x, "v": v, "w": w}, {"v": True, "w": True})


def test_ops_without_sparse_kernels_compute_on_dense_copies():
    x = sparse_data(3, 5)
    sym = rm.sym.sum(rm.sym.exp(rm.sym.Variable("x")), axis=1)  # exp(0) != 0: no csr kernel
    outs, _ = run(sym, {"x": "csr"}, {"x": x}, [np.ones(3)])
    np.testing.assert_allclose(outs[0], np.exp(x).sum(axis=1), rtol=1e-12)


def test_cast_storage_and_retain():
    a = sparse_data(6, 4)
    X = rm.sym.Variable("a")
    rsp = rm.sym.cast_storage(X, stype="row_sparse")
    kept = rm.sym._sparse_retain(rsp, rm.sym.Variable("ids"))
    ex = kept.bind(rm.cpu(), {"a": a, "ids": np.array([1, 3, 5])},
                   args_grad={"a": np.zeros_like(a)})
    out = ex.forward(is_train=True)[0]
    assert isinstance(out, RowSparseArray)
    held = [r for r in (1, 3, 5) if (a[r] != 0).any()]
    np.testing.assert_array_equal(out.indices, held)
    ex.backward([RowSparseArray.full(np.ones_like(a))])
    want = np.zeros_like(a)
    want[[1, 3, 5]] = 1
    np.testing.assert_array_equal(ex.grad_dict["a"], want)


def test_grad_add_accumulates_row_sparse_rows():
    x = cast_storage(sparse_data(3, 6), "csr")
    sym = rm.sym.MakeLoss(rm.sym.sum(rm.sym.dot(rm.sym.Variable("x"), rm.sym.Variable("w"))))
    ex = sym.simple_bind(rm.cpu(), grad_req={"x": "null", "w": "add"},
                         stype_dict={"x": "csr", "w": "row_sparse"}, x=(3, 6), w=(6, 2))
    ex.arg_dict["x"][:] = x
    ex.arg_dict["w"][:] = RowSparseArray.full(np.ones((6, 2), np.float32))
    for _ in range(2):
        ex.forward(is_train=True)
        ex.backward()
    col_sums = x.todense().sum(axis=0)
    np.testing.assert_allclose(ex.grad_dict["w"].todense(), 2 * np.repeat(col_sums[:, None], 2, 1),
                               rtol=1e-6)

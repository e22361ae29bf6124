"""Sparse inputs to take, slice, clip, zeros_like, BlockGrad, _copy, the scatter ops,
_contrib_getnnz and _contrib_quadratic; FullyConnected's (num_hidden, 1) bias; Embedding's
gradient storage."""
import numpy as np
import pytest

import raymod as rm
from raymod.base import MXNetError
from raymod.context import as_numpy
from raymod.ops import get_op
from raymod.sparse import CSRArray, RowSparseArray, cast_storage
from raymod.test_utils import check_forward, check_gradient, op_symbol


def _dense(a):
    return as_numpy(a.todense() if hasattr(a, "todense") else a)


def _csr(rng, shape, density=0.4):
    x = rng.standard_normal(shape) * (rng.random(shape) < density)
    x[1] = 0  # an empty row
    return x


def _rows(rng, shape, rows):
    x = np.zeros(shape)
    x[rows] = rng.standard_normal((len(rows),) + tuple(shape[1:]))
    return x


def _run(xp, name, inputs, head=None, **attrs):
    op = get_op(name)(**attrs)
    outs, saved = op.forward(xp, inputs, [], True)
    grads = None
    if head is not None:
        grads = op.backward(xp, [head], list(inputs), outs, saved, [True] * len(inputs))
    return op, outs[0], grads


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take_rows_of_csr_is_csr(ctx, rng, mode):
    xp = ctx.xp
    a = _csr(rng, (6, 5))
    idx = np.array([4, -2, 7, 1, 1, 0], np.float64)
    head = rng.standard_normal((6, 5))
    op, out, grads = _run(xp, "take", [cast_storage(xp.asarray(a), "csr"), xp.asarray(idx)],
                          xp.asarray(head), mode=mode)
    assert op.infer_storage(["csr", "default"])[0] == ["csr"]
    assert out.stype == "csr" and int(as_numpy(out.indptr)[0]) == 0
    np.testing.assert_allclose(_dense(out), np.take(a, idx.astype(int), axis=0, mode=mode))
    _, _, want = _run(np, "take", [a, idx], head, mode=mode)
    np.testing.assert_allclose(_dense(grads[0]), want[0])
    assert not get_op("take")(mode="raise").takes_sparse(["csr", "default"])
    assert not get_op("take")(axis=1).takes_sparse(["csr", "default"])


@pytest.mark.parametrize("begin, end", [((1,), (4,)), ((0, 1), (5, 3)), ((2, 0), (3, 5)),
                                        ((None, 2), (None, 5))])
def test_slice_of_csr_is_csr(ctx, rng, begin, end):
    xp = ctx.xp
    a = _csr(rng, (5, 5), 0.6)
    head = rng.standard_normal(a[tuple(slice(b, e) for b, e in zip(begin, end))].shape)
    op, out, grads = _run(xp, "slice", [cast_storage(xp.asarray(a), "csr")], xp.asarray(head),
                          begin=begin, end=end)
    window = tuple(slice(b, e) for b, e in zip(begin, end))
    assert out.stype == "csr"
    out.check_format()
    np.testing.assert_allclose(_dense(out), a[window])
    want = np.zeros_like(a)
    want[window] = head
    np.testing.assert_allclose(_dense(grads[0]), want)
    assert not get_op("slice")(begin=(0,), end=(4,), step=(2,)).takes_sparse(["csr"])


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_clip_keeps_sparse_storage_when_zero_is_inside(ctx, rng, stype):
    xp = ctx.xp
    a = _rows(rng, (6, 3), [0, 4]) if stype == "row_sparse" else _csr(rng, (6, 3))
    head = rng.standard_normal(a.shape)
    op, out, (g,) = _run(xp, "clip", [cast_storage(xp.asarray(a), stype)], xp.asarray(head),
                         a_min=-0.5, a_max=0.5)
    assert out.stype == stype
    np.testing.assert_allclose(_dense(out), np.clip(a, -0.5, 0.5))
    np.testing.assert_allclose(_dense(g), head * ((a >= -0.5) & (a <= 0.5)))
    # a sparse head gradient keeps its storage
    sparse_head = cast_storage(xp.asarray(head * (a != 0)), stype)
    _, _, (g2,) = _run(xp, "clip", [cast_storage(xp.asarray(a), stype)], sparse_head,
                       a_min=-0.5, a_max=0.5)
    assert g2.stype == stype
    np.testing.assert_allclose(_dense(g2), head * (a != 0) * ((a >= -0.5) & (a <= 0.5)))
    assert not get_op("clip")(a_min=0.1, a_max=2).takes_sparse([stype])


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_zeros_like_block_grad_and_copy_keep_storage(ctx, rng, stype):
    xp = ctx.xp
    a = cast_storage(xp.asarray(_csr(rng, (4, 3))), stype)
    _, z, _ = _run(xp, "zeros_like", [a])
    assert z.stype == stype and z.data.shape[0] == 0 and z.shape == a.shape
    for name in ("BlockGrad", "stop_gradient", "_copy"):
        op, out, _ = _run(xp, name, [a])
        assert op.infer_storage([stype])[0] == [stype] and out.stype == stype
        np.testing.assert_allclose(_dense(out), _dense(a))


def test_scatter_elemwise_div_divides_the_held_rows_only(ctx, rng):
    xp = ctx.xp
    a = _rows(rng, (6, 3), [1, 4])
    b = rng.uniform(0.5, 2, (6, 3))
    for rhs in (b, RowSparseArray.from_dense(b), CSRArray.from_dense(b)):
        rhs = xp.asarray(rhs) if isinstance(rhs, np.ndarray) else cast_storage(
            xp.asarray(b), rhs.stype)
        _, out, _ = _run(xp, "_scatter_elemwise_div", [RowSparseArray.from_dense(xp.asarray(a)),
                                                       rhs])
        assert out.stype == "row_sparse"
        np.testing.assert_array_equal(as_numpy(out.indices), [1, 4])
        np.testing.assert_allclose(_dense(out), a / b)
    s = op_symbol("_scatter_elemwise_div", ["lhs", "rhs"])
    check_forward(s, {"lhs": a, "rhs": b}, a / b, ctx)
    check_gradient(s, {"lhs": a, "rhs": b}, ctx)


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_scatter_scalar_ops_change_the_stored_values_only(ctx, rng, stype):
    xp = ctx.xp
    a = _rows(rng, (5, 3), [0, 3]) if stype == "row_sparse" else _csr(rng, (5, 3))
    for name, sign in (("_scatter_plus_scalar", 1), ("_scatter_minus_scalar", -1)):
        _, out, (g,) = _run(xp, name, [cast_storage(xp.asarray(a), stype)],
                            xp.asarray(np.ones(a.shape)), scalar=2.0)
        assert out.stype == stype
        want = np.where(a != 0, a + sign * 2.0, 0)
        np.testing.assert_allclose(_dense(out), want)
        np.testing.assert_allclose(_dense(g), np.ones(a.shape))
        s = op_symbol(name, ["data"], scalar=2.0)
        check_forward(s, {"data": a}, a + sign * 2.0, ctx)
        check_gradient(s, {"data": a}, ctx)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_getnnz(ctx, rng, axis):
    xp = ctx.xp
    # row 0 stores an explicit zero, which counts (as scipy's getnnz); row 1 is empty
    stored = CSRArray(xp.asarray([1.0, 0.0, 2.0, 3.0]), xp.asarray([0, 2, 1, 3]),
                      xp.asarray([0, 2, 2, 4, 4]), (4, 5))
    want = {None: [4], 0: [1, 1, 1, 1, 0], 1: [2, 0, 2, 0]}[axis]
    op, out, _ = _run(xp, "_contrib_getnnz", [stored], axis=axis)
    assert out.dtype == np.int64
    np.testing.assert_array_equal(as_numpy(out), want)
    s = op_symbol("_contrib_getnnz", ["data"], axis=axis)
    assert s.infer_shape(data=(4, 5))[1] == [(1,) if axis is None else ((5,) if axis == 0
                                                                       else (4,))]
    # dense data: its non-zero entries
    a = _csr(rng, (4, 5))
    _, dense_out, _ = _run(xp, "_contrib_getnnz", [xp.asarray(a)], axis=axis)
    np.testing.assert_array_equal(as_numpy(dense_out).reshape(-1),
                                  np.reshape((a != 0).sum(axis=axis), -1))


@pytest.mark.parametrize("c, stype", [(0.0, "csr"), (1.0, "default")])
def test_quadratic(ctx, rng, c, stype):
    xp = ctx.xp
    a = _csr(rng, (4, 5))
    op = get_op("_contrib_quadratic")(a=0.5, b=-2.0, c=c)
    assert op.takes_sparse(["csr"]) == (stype == "csr")
    (out,), _ = op.forward(xp, [cast_storage(xp.asarray(a), "csr") if stype == "csr"
                                else xp.asarray(a)], [], False)
    assert getattr(out, "stype", "default") == stype
    np.testing.assert_allclose(_dense(out), 0.5 * a * a - 2.0 * a + c)
    s = op_symbol("_contrib_quadratic", ["data"], a=0.5, b=-2.0, c=c)
    check_gradient(s, {"data": rng.standard_normal((3, 4))}, ctx)
    (g,) = op.backward(xp, [xp.ones((4, 5))], [cast_storage(xp.asarray(a), "csr")], [None],
                       None, [True])
    np.testing.assert_allclose(_dense(g), a - 2.0)


def test_fully_connected_takes_a_column_bias(ctx, rng):
    s = op_symbol("FullyConnected", ["data", "weight", "bias"], num_hidden=3)
    assert s.infer_shape(data=(4, 5), bias=(3, 1))[0] == [(4, 5), (3, 5), (3, 1)]
    assert s.infer_shape(data=(4, 5))[0] == [(4, 5), (3, 5), (3,)]
    x, w, b = rng.standard_normal((4, 5)), rng.standard_normal((3, 5)), rng.standard_normal((3, 1))
    check_forward(s, {"data": x, "weight": w, "bias": b}, x @ w.T + b.reshape(-1), ctx)
    grads = check_gradient(s, {"data": x, "weight": w, "bias": b}, ctx)
    assert grads["bias"].shape == (3, 1)


@pytest.mark.parametrize("sparse_grad", [False, True])
def test_embedding_gradient_storage_follows_sparse_grad(rng, sparse_grad):
    """MXNet: the weight gradient is row_sparse exactly when sparse_grad, whatever the
    weight's storage."""
    op = get_op("Embedding")(input_dim=6, output_dim=2, sparse_grad=sparse_grad)
    for stype in ("default", "row_sparse"):
        assert op.infer_storage(["default", stype])[1][1] == \
            ("row_sparse" if sparse_grad else "default")
    w = rng.standard_normal((6, 2))
    ids = np.array([1, 4, 4.0])
    (out,), saved = op.forward(np, [ids, RowSparseArray.full(w)], [], True)
    head = rng.standard_normal((3, 2))
    _, g = op.backward(np, [head], [ids, None], [out], saved, [False, True])
    assert isinstance(g, RowSparseArray) == sparse_grad
    want = np.zeros_like(w)
    np.add.at(want, [1, 4, 4], head)
    np.testing.assert_allclose(_dense(g), want)


def test_embedding_of_a_table_holding_no_rows_gives_zeros():
    op = get_op("Embedding")(input_dim=5, output_dim=3)
    (out,), _ = op.forward(np, [np.array([0, 3.0]), RowSparseArray.empty((5, 3), np.float32)],
                           [], False)
    np.testing.assert_array_equal(out, np.zeros((2, 3), np.float32))


def test_sparse_embedding_takes_deterministic():
    s = rm.sym.contrib.SparseEmbedding(rm.sym.Variable("ids"), rm.sym.Variable("w"),
                                       input_dim=6, output_dim=2, deterministic=True)
    op = get_op("_contrib_SparseEmbedding")(input_dim=6, output_dim=2, deterministic=True)
    assert op.sparse_grad and op.infer_storage(["default", "default"])[1][1] == "row_sparse"
    assert s.list_arguments() == ["ids", "w"]


def test_take_of_csr_needs_1d_indices(rng):
    op = get_op("take")()
    with pytest.raises(MXNetError, match="1-d indices"):
        op.forward(np, [cast_storage(_csr(rng, (3, 3)), "csr"), np.zeros((2, 2))], [], False)

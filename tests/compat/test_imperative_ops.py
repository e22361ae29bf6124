"""``mx.nd.<Op>``: every registered operator as an imperative function, called MXNet's way
(raymod.compat.mxnet.imperative), checked against numpy formulas written out here."""
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view

import raymod as rm
import raymod.compat.mxnet as mx
from raymod.base import AttributeValueError, MXNetError, ShapeError
from raymod.compat.mxnet import imperative
from raymod.compat.ndarray import wrap
from raymod.ops import OPS

nd = mx.nd
RS = np.random.RandomState(7)


def rand(*shape):
    return RS.randn(*shape).astype(np.float32)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def test_every_registered_op_has_an_imperative_function():
    names = OPS.names()
    # the table is made from the registry at import: every op raymod defines is in it (ops
    # that tests register later get theirs on first use)
    assert {n for n in names if OPS.get(n).__module__.startswith("raymod.")} <= set(
        imperative.FUNCTIONS)
    for name in names:
        fn = imperative.get(name)
        # mx.nd.zeros / ones / arange are MXNet's Python functions (shape, ctx, dtype), as there
        assert getattr(nd, name) is fn or name in {"zeros", "ones", "arange"}
        assert callable(fn) and fn.__name__ == name
        assert name in fn.__doc__.splitlines()[0]  # the calling convention comes first
        if name.startswith("_contrib_"):
            assert getattr(nd.contrib, name[len("_contrib_"):]) is fn
        elif name.startswith("_"):
            assert getattr(nd._internal, name) is fn
        else:
            assert getattr(nd.op, name) is fn
    assert "box_nms" in dir(nd.contrib) and "FullyConnected" in dir(nd.op)
    with pytest.raises(AttributeError, match="no operator 'nonexistent'"):
        nd.contrib.nonexistent
    # names no operator has stay numpy's
    np.testing.assert_array_equal(nd.cumsum(nd.array([1, 2, 3])), [1, 3, 6])


X = rand(2, 3, 4)
IDX = np.array([2, 0, 1], np.float32)


def _conv_reference(x, w, b, pad):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    windows = sliding_window_view(xp, w.shape[2:], axis=(2, 3))  # n, c, h, w, kh, kw
    return np.einsum("nchwij,fcij->nfhw", windows, w) + b[None, :, None, None]


def _bn_cases():
    x, gamma, beta = rand(4, 3, 2), rand(3), rand(3)
    mean, var = rand(3), np.abs(rand(3)) + 0.5
    aux = (mean.copy(), var.copy())
    scaled = (x - mean[:, None]) / np.sqrt(var[:, None] + 1e-3)
    return [
        ("BatchNorm fix_gamma", lambda: nd.BatchNorm(x, gamma, beta, *aux),
         scaled + beta[:, None]),
        ("BatchNorm by keyword", lambda: nd.BatchNorm(data=x, gamma=gamma, beta=beta,
                                                      moving_mean=aux[0], moving_var=aux[1],
                                                      fix_gamma=False),
         scaled * gamma[:, None] + beta[:, None]),
    ]


W, B = rand(5, 12), rand(5)
CW, CB = rand(4, 2, 3, 3), rand(4)
CX = rand(2, 2, 5, 5)
A, M = rand(3, 4), rand(5, 4)
PX = rand(1, 2, 4, 6)
CASES = [
    ("FullyConnected", lambda: nd.FullyConnected(data=X, weight=W, bias=B, num_hidden=5),
     X.reshape(2, -1) @ W.T + B),
    ("FullyConnected flatten=False", lambda: nd.FullyConnected(X, W[:, :4], None, 5, True, False),
     X @ W[:, :4].T),
    ("Convolution", lambda: nd.Convolution(CX, CW, CB, kernel=(3, 3), num_filter=4, pad=(1, 1)),
     _conv_reference(CX, CW, CB, 1)),
    ("Activation relu", lambda: nd.Activation(X, act_type="relu"), np.maximum(X, 0)),
    ("Activation softrelu", lambda: nd.Activation(X, "softrelu"), np.log1p(np.exp(X))),
    ("Activation sigmoid", lambda: nd.Activation(data=X, act_type="sigmoid"),
     1 / (1 + np.exp(-X))),
    ("SoftmaxOutput", lambda: nd.SoftmaxOutput(data=X[:, :, 0], label=IDX[:2]),
     softmax(X[:, :, 0], axis=1)),
    ("softmax", lambda: nd.softmax(X, axis=-1), softmax(X, -1)),
    ("softmax axis=1", lambda: nd.softmax(X, axis=1), softmax(X, 1)),
    ("log_softmax", lambda: nd.log_softmax(X), np.log(softmax(X, -1))),
    ("one_hot", lambda: nd.one_hot(np.array([1, 3, -1, 7], np.float32), 4),
     np.array([[0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 0, 0], [0, 0, 0, 0]])),
    ("one_hot on/off", lambda: nd.one_hot(IDX, depth=3, on_value=5, off_value=-1),
     np.where(np.arange(3)[None, :] == IDX[:, None], 5, -1)),
    ("Embedding", lambda: nd.Embedding(IDX, A, input_dim=3, output_dim=4), A[IDX.astype(int)]),
    *_bn_cases(),
    ("Pooling max", lambda: nd.Pooling(PX, kernel=(2, 2), stride=(2, 2), pool_type="max"),
     PX.reshape(1, 2, 2, 2, 3, 2).max(axis=(3, 5))),
    ("Pooling avg", lambda: nd.Pooling(PX, kernel=(2, 2), stride=(2, 2), pool_type="avg"),
     PX.reshape(1, 2, 2, 2, 3, 2).mean(axis=(3, 5))),
    ("Pooling global", lambda: nd.Pooling(PX, global_pool=True, pool_type="max", kernel=(1, 1)),
     PX.max(axis=(2, 3), keepdims=True)),
    ("sum axis keepdims", lambda: nd.sum(X, axis=1, keepdims=True), X.sum(1, keepdims=True)),
    ("sum all", lambda: nd.sum(X), np.array([X.sum()])),
    ("sum exclude", lambda: nd.sum(X, axis=1, exclude=True), X.sum(axis=(0, 2))),
    ("mean axes", lambda: nd.mean(X, axis=(0, 2)), X.mean(axis=(0, 2))),
    ("dot", lambda: nd.dot(A, M.T), A @ M.T),
    ("dot transpose_b", lambda: nd.dot(A, M, transpose_b=True), A @ M.T),
    ("dot transpose_a", lambda: nd.dot(M, M, True), M.T @ M),
    ("reshape 0 -1", lambda: nd.reshape(X, shape=(0, -1)), X.reshape(2, 12)),
    ("reshape -1 0", lambda: nd.reshape(X, shape=(-1, 0)), X.reshape(8, 3)),
    ("Reshape", lambda: nd.Reshape(X, shape=(4, 0, 2)), X.reshape(4, 3, 2)),
    ("topk indices", lambda: nd.topk(A, k=2), np.argsort(-A, axis=-1)[:, :2]),
    ("topk values axis 0", lambda: nd.topk(A, axis=0, k=1, ret_typ="value"),
     np.sort(A, axis=0)[::-1][:1]),
    ("topk ascending", lambda: nd.topk(A, k=3, is_ascend=True), np.argsort(A, axis=-1)[:, :3]),
    ("argmax", lambda: nd.argmax(A, axis=1), np.argmax(A, axis=1)),
    ("argmax keepdims", lambda: nd.argmax(A, 0, True), np.argmax(A, axis=0)[None]),
    ("concat", lambda: nd.concat(A, M, dim=0), np.concatenate([A, M], 0)),
    ("concat default dim", lambda: nd.concat(A, A[:, :1]), np.concatenate([A, A[:, :1]], 1)),
    ("Concat", lambda: nd.Concat(A, A, A, dim=1), np.concatenate([A] * 3, 1)),
    ("add_n", lambda: nd.add_n(A, A, A), 3 * A),
    ("stack", lambda: nd.stack(A, A * 2, axis=1), np.stack([A, A * 2], 1)),
    ("broadcast_add", lambda: nd.broadcast_add(A, M[:1]), A + M[:1]),
    ("elemwise_mul", lambda: nd.elemwise_mul(A, A), A * A),
    ("_plus_scalar", lambda: nd._plus_scalar(A, scalar=2), A + 2),
    ("_rminus_scalar", lambda: nd._rminus_scalar(A, 1), 1 - A),
    ("clip", lambda: nd.clip(A, -0.5, 0.5), np.clip(A, -0.5, 0.5)),
    ("norm", lambda: nd.norm(A), np.array([np.sqrt((A ** 2).sum())])),
    ("norm axis", lambda: nd.norm(A, ord=2, axis=1), np.sqrt((A ** 2).sum(1))),
    ("Dropout", lambda: nd.Dropout(A, p=0.7), A),
    ("LeakyReLU", lambda: nd.LeakyReLU(A, act_type="leaky", slope=0.1),
     np.where(A > 0, A, 0.1 * A)),
    ("LeakyReLU elu", lambda: nd.LeakyReLU(A, None, "elu", 0.5),  # (data, gamma, act_type, slope)
     np.where(A > 0, A, 0.5 * np.expm1(A))),
    ("LeakyReLU prelu", lambda: nd.LeakyReLU(A, np.full(1, 0.2, np.float32), act_type="prelu"),
     np.where(A > 0, A, 0.2 * A)),
    ("take", lambda: nd.take(M, IDX), M[IDX.astype(int)]),
    ("take clip", lambda: nd.take(M, np.array([9, -3], np.float32)), M[[4, 0]]),
    ("take axis 1", lambda: nd.take(M, IDX, axis=1), M[:, IDX.astype(int)]),
    ("pick", lambda: nd.pick(A, IDX, axis=1), A[np.arange(3), IDX.astype(int)]),
    ("pick keepdims", lambda: nd.pick(A, index=IDX, keepdims=True),
     A[np.arange(3), IDX.astype(int)][:, None]),
    ("where", lambda: nd.where(A > 0, A, M[:3]), np.where(A > 0, A, M[:3])),
    ("slice_axis", lambda: nd.slice_axis(A, axis=1, begin=1, end=3), A[:, 1:3]),
    ("slice_axis negative", lambda: nd.slice_axis(A, 0, -2, None), A[-2:]),
    ("slice", lambda: nd.slice(A, begin=(1, None), end=(None, 2)), A[1:, :2]),
    ("transpose", lambda: nd.transpose(X, axes=(2, 0, 1)), X.transpose(2, 0, 1)),
    ("transpose default", lambda: nd.transpose(A), A.T),
    ("expand_dims", lambda: nd.expand_dims(A, axis=1), A[:, None]),
    ("exp", lambda: nd.exp(A), np.exp(A)),
    ("square", lambda: nd.square(A), A * A),
    ("max", lambda: nd.max(A, axis=0), A.max(0)),
    ("batch_dot", lambda: nd.batch_dot(X, X, transpose_b=True), X @ X.transpose(0, 2, 1)),
    ("tile", lambda: nd.tile(A, reps=(2, 1)), np.tile(A, (2, 1))),
    ("flip", lambda: nd.flip(A, axis=1), A[:, ::-1]),
    ("SliceChannel", lambda: nd.SliceChannel(A, num_outputs=2)[1], A[:, 2:]),
    ("split squeeze", lambda: nd.split(A, 4, 1, True)[3], A[:, 3]),
    ("cast", lambda: nd.cast(A, dtype="float16"), A.astype(np.float16)),
    ("box_iou", lambda: nd.contrib.box_iou(np.array([[0, 0, 2, 2]], np.float32),
                                           np.array([[1, 1, 3, 3], [0, 0, 2, 2]], np.float32)),
     np.array([[1 / 7, 1]])),
]


@pytest.mark.parametrize("name, call, expected", CASES, ids=[c[0] for c in CASES])
def test_results_match_numpy_formulas(name, call, expected):
    got = call()
    assert isinstance(got, nd.NDArray)
    assert got.shape == np.shape(expected)
    np.testing.assert_allclose(got.asnumpy(), expected, rtol=1e-5, atol=1e-5)


def test_results_are_new_ndarrays_with_mxnets_dtypes():
    x = nd.array(A)
    for got in (nd.reshape(x, shape=(-1,)), nd.identity(x), nd.Dropout(x, p=0.5),
                nd.SliceChannel(x, num_outputs=2)[0], nd.transpose(A)):
        assert isinstance(got, nd.NDArray) and type(got.asnumpy()) is np.ndarray
        assert not np.shares_memory(got, A) and not np.shares_memory(got, x)
    assert nd.argmax(x, axis=1).dtype == np.float32  # MXNet's indices are floats
    assert nd.topk(x, k=2, dtype="int32").dtype == np.int32
    assert nd.one_hot(IDX, 3, dtype="int64").dtype == np.int64
    assert nd.reshape(np.zeros((2, 3), np.float64), shape=(3, 2)).dtype == np.float64
    # a cpu(1) input gives a cpu(1) result; an op without inputs runs on its ctx
    assert nd.exp(wrap(A.copy(), mx.cpu(1))).context == mx.cpu(1)
    zeros = nd._zeros(shape=(2, 3), ctx=mx.cpu(2))
    assert zeros.context == mx.cpu(2) and zeros.dtype == np.float32 and not zeros.any()
    assert nd._ones(shape=(4,), dtype="int32").tolist() == [1, 1, 1, 1]
    assert nd._arange(start=1, stop=4).tolist() == [1, 2, 3]
    assert nd._random_uniform(low=2, high=3, shape=(50,)).min() >= 2


def test_several_visible_outputs_come_as_a_list():
    x, gamma, beta = rand(4, 3), rand(3), rand(3)
    mean, var = np.zeros(3, np.float32), np.ones(3, np.float32)
    one = nd.BatchNorm(x, gamma, beta, mean, var)  # MXNet hides mean and var
    assert isinstance(one, nd.NDArray)
    out, used_mean, inv_std = nd.BatchNorm(x, gamma, beta, mean, var, output_mean_var=True)
    np.testing.assert_allclose(out, one)
    np.testing.assert_allclose(used_mean, mean)
    np.testing.assert_allclose(inv_std, 1 / np.sqrt(var + 1e-3), rtol=1e-6)
    assert mean.tolist() == [0, 0, 0] and var.tolist() == [1, 1, 1]  # inference: untouched
    values, indices = nd.topk(A, k=2, ret_typ="both")
    np.testing.assert_allclose(values, -np.sort(-A, axis=1)[:, :2])
    np.testing.assert_array_equal(indices, np.argsort(-A, axis=1)[:, :2])
    assert isinstance(nd.topk(A, k=2, ret_typ="value"), nd.NDArray)  # indices hidden
    assert isinstance(nd.split(A, num_outputs=1, axis=0), nd.NDArray)
    assert len(nd.split(A, num_outputs=2)) == 2


def test_out_writes_into_the_given_arrays_and_returns_them():
    target = nd.zeros((3, 5))
    got = nd.FullyConnected(A, M, np.zeros(5, np.float32), num_hidden=5, out=target)
    assert got is target
    np.testing.assert_allclose(target, A @ M.T, rtol=1e-5)
    plain = np.empty((3, 4), np.float32)
    assert nd.softmax(A, out=plain) is plain
    np.testing.assert_allclose(plain, softmax(A), rtol=1e-6)
    pair = [nd.zeros((3, 1)), nd.zeros((3, 1))]
    assert nd.topk(A, k=1, ret_typ="both", out=pair) is pair
    np.testing.assert_allclose(pair[0][:, 0], A.max(1))
    x = nd.array(A)
    assert nd.elemwise_add(x, x, out=x) is x  # in place, as MXNet allows
    np.testing.assert_allclose(x, 2 * A)
    with pytest.raises(MXNetError, match=r"out= array 0 has shape \(2, 2\).*\(3, 4\)"):
        nd.exp(A, out=nd.zeros((2, 2)))
    with pytest.raises(MXNetError, match="out= has 1 array.*2 output"):
        nd.topk(A, k=1, ret_typ="both", out=nd.zeros((3, 1)))


def test_inputs_by_keyword_and_by_position_agree():
    x, idx = rand(3, 4), np.array([1, 0, 3], np.float32)
    kw = nd.FullyConnected(data=x, weight=M, bias=B, num_hidden=5, name="fc")
    pos = nd.FullyConnected(x, M, B, 5)
    np.testing.assert_array_equal(kw, pos)
    np.testing.assert_array_equal(nd.one_hot(idx, 4), nd.one_hot(indices=idx, depth=4))
    np.testing.assert_array_equal(nd.clip(x, 0, 1), nd.clip(data=x, a_min=0, a_max=1))
    np.testing.assert_array_equal(nd.pick(x, idx, 1), nd.pick(index=idx, data=x, axis=1))
    np.testing.assert_array_equal(nd.SoftmaxOutput(x, idx),
                                  nd.SoftmaxOutput(label=idx, data=x, name="sm"))
    gamma, beta, mean, var = rand(4), rand(4), rand(4), np.ones(4, np.float32)
    np.testing.assert_array_equal(
        nd.BatchNorm(x, gamma, beta, mean, var, axis=1),
        nd.BatchNorm(x, gamma, beta, moving_var=var, moving_mean=mean, axis=1))
    np.testing.assert_array_equal(nd.concat(x, x, dim=0), nd.concat(arg0=x, arg1=x, dim=0))
    # a positional None skips an input slot; Python scalars go into attributes
    np.testing.assert_array_equal(nd.FullyConnected(x, M, None, 5, True), x @ M.T)
    np.testing.assert_array_equal(nd._mul_scalar(x, 3.0), nd._mul_scalar(data=x, scalar=3))


def test_bad_attributes_and_inputs_raise_naming_them():
    with pytest.raises(AttributeValueError, match="unknown attribute.*'bogus'"):
        nd.Activation(A, act_type="relu", bogus=1)
    with pytest.raises(AttributeValueError, match="'act_type' must be one of.*'nope'"):
        nd.Activation(A, act_type="nope")
    with pytest.raises(AttributeValueError, match="'num_hidden' expects a int"):
        nd.FullyConnected(A, M, B, num_hidden="five")
    with pytest.raises(AttributeValueError, match="required attribute 'num_hidden'"):
        nd.FullyConnected(A, M, B)
    with pytest.raises(AttributeValueError, match="'depth'"):
        nd.one_hot(IDX)
    with pytest.raises(MXNetError, match=r"missing input\(s\) 'weight'"):
        nd.FullyConnected(data=A, num_hidden=5)
    with pytest.raises(MXNetError, match=r"missing input\(s\) 'moving_mean', 'moving_var'"):
        nd.BatchNorm(A, rand(4), rand(4))
    with pytest.raises(ShapeError, match="FullyConnected: input 'weight' has shape"):
        nd.FullyConnected(A, rand(5, 3), B, num_hidden=5)
    with pytest.raises(ShapeError, match="broadcast_add"):
        nd.broadcast_add(A, M)
    with pytest.raises(TypeError, match="input 'rhs' must be an array.*scalar"):
        nd.broadcast_add(A, 2)
    with pytest.raises(TypeError, match="'data' both by position and by keyword"):
        nd.exp(A, data=A)
    with pytest.raises(TypeError, match=r"clip takes at most 3 positional arguments \(data, "):
        nd.clip(A, 0, 1, 2, 3, 4)
    with pytest.raises(TypeError, match="positional argument 2 must be an array"):
        nd.concat(A, 0)
    with pytest.raises(MXNetError, match="unknown input 'bias'.*data, weight"):
        nd.FullyConnected(A, M, bias=B, num_hidden=5, no_bias=True)
    with pytest.raises(ShapeError, match="cannot infer the output shape"):
        nd._random_normal()


# --- a CustomOp computing with mx.nd (MXNet's example/numpy-ops style) -------------------------


class _SoftmaxCrossEntropy(mx.operator.CustomOp):
    seen = []  # the type of the arrays forward received

    def forward(self, is_train, req, in_data, out_data, aux):
        self.seen.append(type(in_data[0]))
        prob = mx.nd.SoftmaxOutput(data=in_data[0], label=in_data[1])
        onehot = mx.nd.one_hot(in_data[1], prob.shape[1])
        self.assign(out_data[0], req[0], prob)
        self.assign(out_data[1], req[1], -mx.nd.sum(onehot * mx.nd.log(prob), axis=1))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        onehot = mx.nd.one_hot(in_data[1], depth=out_data[0].shape[1])
        self.assign(in_grad[0], req[0], out_data[0] - onehot)


@mx.operator.register("imperative_softmax_xent")
class _SoftmaxCrossEntropyProp(mx.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ["data", "label"]

    def list_outputs(self):
        return ["prob", "loss"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0], [in_shape[0][0]]], []

    def create_operator(self, ctx, shapes, dtypes):
        return _SoftmaxCrossEntropy()


@pytest.mark.parametrize("installed", [False, True], ids=["by-name", "raymod-run"])
def test_custom_op_calls_mx_nd_operators(installed):
    x, label = rand(4, 3), np.array([0, 2, 1, 2], np.float32)
    prob, onehot = softmax(x, 1), np.eye(3)[label.astype(int)]
    if installed:  # as under `raymod run`: the CustomOp receives NDArrays
        rm.compat.install()
    try:
        sym = mx.sym.Custom(mx.sym.Variable("data"), mx.sym.Variable("label"),
                            op_type="imperative_softmax_xent")
        grad = np.zeros_like(x)
        exe = sym.bind(mx.cpu(), {"data": x, "label": label}, args_grad={"data": grad},
                       grad_req={"data": "write", "label": "null"})
        got_prob, got_loss = exe.forward(is_train=True)
        exe.backward()
        # the same op, imperatively
        imp_prob, imp_loss = nd.Custom(x, label, op_type="imperative_softmax_xent")
    finally:
        if installed:
            rm.compat.uninstall()
    np.testing.assert_allclose(np.asarray(got_prob), prob, rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_loss), -np.log((prob * onehot).sum(1)), rtol=1e-5)
    np.testing.assert_allclose(grad, prob - onehot, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(imp_prob, prob, rtol=1e-5)
    np.testing.assert_allclose(imp_loss, got_loss, rtol=1e-6)
    assert isinstance(imp_prob, nd.NDArray)
    assert _SoftmaxCrossEntropy.seen[-2:] == [nd.NDArray if installed else np.ndarray] * 2


def test_runs_on_the_inputs_device(ctx):
    x, w, b = nd.array(A, ctx=ctx), nd.array(M, ctx=ctx), nd.zeros((5,), ctx=ctx)
    y = nd.FullyConnected(x, w, b, num_hidden=5)
    assert type(y).__name__ == "NDArray" and y.context == ctx  # CuPy's NDArray on a GPU
    np.testing.assert_allclose(y.asnumpy(), A @ M.T, rtol=1e-5)
    values, indices = nd.topk(x, k=2, ret_typ="both")
    np.testing.assert_array_equal(indices.asnumpy(), np.argsort(-A, axis=1)[:, :2])
    flat = nd.reshape(x, shape=(-1,))
    flat[0] = 100  # a new array, not a view of x
    assert x.asnumpy()[0, 0] == A[0, 0]
    target, host = nd.zeros((3, 5), ctx=ctx), np.empty((3, 4), np.float32)
    assert nd.FullyConnected(x, w, b, num_hidden=5, out=target) is target
    assert nd.softmax(x, out=host) is host  # a device result into host memory
    np.testing.assert_allclose(host, softmax(A), rtol=1e-5)
    assert nd._zeros(shape=(2,), ctx=ctx).context == ctx
    if ctx != mx.cpu():
        with pytest.raises(MXNetError, match="different devices"):
            nd.broadcast_add(x, nd.ones((3, 4)))  # a host array

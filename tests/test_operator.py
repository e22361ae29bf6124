"""rm.operator: Python custom ops (CustomOp / CustomOpProp / register) and rm.sym.Custom."""
import json

import numpy as np
import pytest

import raymod as rm
from raymod.base import MXNetError, ShapeError
from raymod.test_utils import check_gradient


# ------------------------------------------------------------------ ops used by the tests
class Softmax(rm.operator.CustomOp):
    """Softmax over axis 1 with the softmax cross-entropy gradient (a loss head)."""

    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0]
        e = np.exp(x - x.max(axis=1, keepdims=True))
        self.assign(out_data[0], req[0], e / e.sum(axis=1, keepdims=True))

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        p, label = out_data[0], in_data[1].astype(int)
        grad = p.copy()
        grad[np.arange(len(label)), label] -= 1
        self.assign(in_grad[0], req[0], grad)
        self.assign(in_grad[1], req[1], 0)


@rm.operator.register("test_softmax")
class SoftmaxProp(rm.operator.CustomOpProp):
    def __init__(self):
        super().__init__(need_top_grad=False)

    def list_arguments(self):
        return ["data", "label"]

    def infer_shape(self, in_shape):
        return [in_shape[0], in_shape[0][:1]], [in_shape[0]], []

    def create_operator(self, ctx, shapes, dtypes):
        return Softmax()


class ScaledSin(rm.operator.CustomOp):
    """y = scale * x * sin(x) + offset, written against the arrays' own module."""

    def __init__(self, scale, offset):
        super().__init__()
        self.scale, self.offset = scale, offset

    def forward(self, is_train, req, in_data, out_data, aux):
        x = in_data[0]
        self.assign(out_data[0], req[0], self.scale * x * _xp(x).sin(x) + self.offset)

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        x, xp = in_data[0], _xp(in_data[0])
        self.assign(in_grad[0], req[0], out_grad[0] * self.scale * (xp.sin(x) + x * xp.cos(x)))


def _xp(a):
    """numpy for numpy arrays, cupy for cupy ones (cupy only imported when a GPU test runs)."""
    if isinstance(a, np.ndarray):
        return np
    import cupy
    return cupy


SEEN_KWARGS = []
CREATED = []


@rm.operator.register("test_scaled_sin")
class ScaledSinProp(rm.operator.CustomOpProp):
    def __init__(self, scale="1", offset="0"):
        SEEN_KWARGS.append({"scale": scale, "offset": offset})
        super().__init__(need_top_grad=True)
        self.scale, self.offset = float(scale), float(offset)

    def create_operator(self, ctx, shapes, dtypes):
        CREATED.append((ctx, shapes, dtypes))
        return ScaledSin(self.scale, self.offset)


@rm.operator.register("test_record")
class RecordProp(rm.operator.CustomOpProp):
    def __init__(self, **kwargs):
        SEEN_KWARGS.append(kwargs)
        super().__init__()


def softmax_net(custom: bool) -> rm.sym.Symbol:
    data = rm.sym.Variable("data")
    fc = rm.sym.FullyConnected(data, num_hidden=4, name="fc")
    if custom:
        return rm.sym.Custom(fc, rm.sym.Variable("softmax_label"), op_type="test_softmax",
                             name="softmax")
    return rm.sym.SoftmaxOutput(fc, name="softmax")


def batch(rng, n=6, d=5, k=4):
    return {"data": rng.standard_normal((n, d)), "softmax_label": rng.integers(0, k, n)
            .astype(np.float64)}


# ------------------------------------------------------------------ structure
def test_prop_defaults_follow_mxnet():
    prop = rm.operator.CustomOpProp()
    assert prop.need_top_grad_ is True
    assert prop.list_arguments() == ["data"] and prop.list_outputs() == ["output"]
    assert prop.list_auxiliary_states() == []
    ins, outs, aux = prop.infer_shape([[2, 3]])
    assert list(ins) == [[2, 3]] and list(outs) == [[2, 3]] and list(aux) == []
    assert prop.infer_type([np.float64]) == ([np.float64], [np.float64], [])
    assert prop.declare_backward_dependency([0], [1], [2]) == [0, 1, 2]
    assert rm.operator.CustomOpProp(need_top_grad=False).declare_backward_dependency(
        [0], [1], [2]) == [1, 2]
    assert isinstance(prop.create_operator(rm.cpu(), [[2, 3]], [0]), rm.operator.CustomOp)


def test_custom_symbol_takes_the_prop_lists_and_names_auto_inputs():
    sym = rm.sym.Custom(op_type="test_softmax")
    name = sym.list_outputs()[0][:-len("_output")]
    assert sym.list_arguments() == [f"{name}_data", f"{name}_label"]
    net = softmax_net(custom=True)
    assert net.list_arguments() == ["data", "fc_weight", "fc_bias", "softmax_label"]
    assert net.list_outputs() == ["softmax_output"]
    arg, out, aux = net.infer_shape(data=(6, 5))
    assert arg == [(6, 5), (4, 5), (4,), (6,)] and out == [(6, 4)] and aux == []
    _, out_t, _ = net.infer_type(data=np.float64)
    assert out_t == [np.float64]


def test_attributes_reach_the_prop_as_strings():
    SEEN_KWARGS.clear()
    rm.sym.Custom(rm.sym.Variable("x"), op_type="test_scaled_sin", scale=2, offset=0.5)
    assert SEEN_KWARGS == [{"scale": "2", "offset": "0.5"}]
    SEEN_KWARGS.clear()
    sym = rm.sym.Custom(rm.sym.Variable("x"), op_type="test_record", shape=(1, 2), flag=True,
                        dtype=np.float32, name="r")
    assert SEEN_KWARGS == [{"shape": "(1, 2)", "flag": "True", "dtype": str(np.float32)}]
    SEEN_KWARGS.clear()
    rm.sym.load_json(sym.tojson())
    assert SEEN_KWARGS == [{"dtype": str(np.float32), "flag": "True", "shape": "(1, 2)"}]
    with pytest.raises(MXNetError, match="test_scaled_sin.*bogus"):
        rm.sym.Custom(sym, op_type="test_scaled_sin", bogus=1)


def test_unregistered_op_type_is_named_in_the_error():
    with pytest.raises(MXNetError, match="op_type 'no_such_op' is not registered"):
        rm.sym.Custom(rm.sym.Variable("x"), op_type="no_such_op")
    with pytest.raises(MXNetError, match="op_type 'no_such_op' is not registered"):
        rm.sym.load_json(json.dumps({
            "nodes": [{"op": "null", "name": "x", "inputs": []},
                      {"op": "Custom", "name": "c", "attrs": {"op_type": "no_such_op"},
                       "inputs": [[0, 0, 0]]}],
            "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]]}))
    with pytest.raises(MXNetError, match="op_type"):
        rm.sym.Custom(rm.sym.Variable("x"))


# MXNet 1.9.1's tojson of mx.sym.Custom(data, op_type='test_scaled_sin', scale=2.5,
# offset=1, name='sc') (op_type renamed from the recorded run's)
MXNET_JSON = """{
  "nodes": [
    {"op": "null", "name": "data", "inputs": []},
    {"op": "Custom", "name": "sc",
     "attrs": {"offset": "1", "op_type": "test_scaled_sin", "scale": "2.5"},
     "inputs": [[0, 0, 0]]}
  ],
  "arg_nodes": [0], "node_row_ptr": [0, 1, 2], "heads": [[1, 0, 0]],
  "attrs": {"mxnet_version": ["int", 10901]}
}"""


def test_json_round_trip_and_mxnet_json(rng):
    data = rm.sym.Variable("data")
    sym = rm.sym.Custom(data, op_type="test_scaled_sin", scale=2.5, offset=1, name="sc",
                        lr_mult=2)
    graph = json.loads(sym.tojson())
    node = graph["nodes"][1]
    assert node["op"] == "Custom" and node["name"] == "sc"
    assert node["attrs"] == {"offset": "1", "op_type": "test_scaled_sin", "scale": "2.5",
                             "__lr_mult__": "2"}
    x = rng.standard_normal((3, 4))
    want = 2.5 * x * np.sin(x) + 1
    for text in (sym.tojson(), MXNET_JSON):
        loaded = rm.sym.load_json(text)
        assert loaded.list_arguments() == ["data"]
        exe = loaded.bind(rm.cpu(), args={"data": x})
        np.testing.assert_allclose(exe.forward()[0], want, rtol=1e-12)
    assert json.loads(rm.sym.load_json(sym.tojson()).tojson()) == graph
    import pickle
    again = pickle.loads(pickle.dumps(sym))
    assert again.tojson() == sym.tojson()


# ------------------------------------------------------------------ compute
def test_elementwise_op_forward_and_numerical_gradient(ctx, rng):
    sym = rm.sym.Custom(rm.sym.Variable("x"), op_type="test_scaled_sin", scale=1.5,
                        offset=-0.25)
    x = rng.standard_normal((3, 5))
    exe = sym.bind(ctx, args={"x": ctx.xp.asarray(x)})
    out = exe.forward()[0]
    np.testing.assert_allclose(_host(out), 1.5 * x * np.sin(x) - 0.25, rtol=1e-12)
    check_gradient(sym, {"x": x}, ctx=ctx)


def _host(a):
    return a if isinstance(a, np.ndarray) else a.get()


def test_float32_keeps_dtype_and_operator_made_once_per_shape(rng):
    CREATED.clear()
    sym = rm.sym.Custom(rm.sym.Variable("x"), op_type="test_scaled_sin", scale=2)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    exe = sym.bind(rm.cpu(), args={"x": x}, args_grad={"x": np.zeros_like(x)})
    for _ in range(3):
        out = exe.forward(is_train=True)[0]
        exe.backward([np.ones_like(x)])
    assert out.dtype == np.float32 and exe.grad_dict["x"].dtype == np.float32
    assert CREATED == [(rm.cpu(0), [[2, 3]], [0])]   # MXNet's dtype code 0: float32
    exe2 = exe.reshape(x=(1, 3))
    exe2.forward()
    assert CREATED[1][1:] == ([[1, 3]], [0])


def test_grad_req_add_accumulates(rng):
    sym = rm.sym.Custom(rm.sym.Variable("x"), op_type="test_scaled_sin", scale=2)
    x = rng.standard_normal((2, 3))
    g = rng.standard_normal((2, 3))
    exe = sym.bind(rm.cpu(), args={"x": x}, args_grad={"x": np.ones_like(x)}, grad_req="add")
    for _ in range(2):
        exe.forward(is_train=True)
        exe.backward([g])
    want = 1 + 2 * g * 2 * (np.sin(x) + x * np.cos(x))
    np.testing.assert_allclose(exe.grad_dict["x"], want, rtol=1e-12)


@pytest.mark.parametrize("req, want", [("write", [5.0, 5.0]), ("inplace", [5.0, 5.0]),
                                       ("add", [6.0, 7.0]), ("null", [1.0, 2.0])])
def test_assign_honours_req(req, want):
    dst = np.array([1.0, 2.0])
    rm.operator.CustomOp().assign(dst, req, 5.0)
    np.testing.assert_array_equal(dst, want)
    with pytest.raises(MXNetError, match="req"):
        rm.operator.CustomOp().assign(dst, "overwrite", 1.0)


def test_custom_softmax_loss_matches_softmax_output(rng):
    inputs = batch(rng)
    params = {"fc_weight": rng.standard_normal((4, 5)), "fc_bias": rng.standard_normal(4)}
    results = []
    for custom in (True, False):
        net = softmax_net(custom)
        args = {**inputs, **params}
        exe = net.bind(rm.cpu(), args={k: v.copy() for k, v in args.items()},
                       args_grad={k: np.zeros_like(v) for k, v in args.items()},
                       grad_req={"data": "write", "fc_weight": "write", "fc_bias": "write",
                                 "softmax_label": "null"})
        out = exe.forward(is_train=True)[0].copy()
        exe.backward()   # no head gradient: both are loss heads
        results.append((out, {k: exe.grad_dict[k].copy() for k in exe.grad_dict}))
    (out_c, grads_c), (out_b, grads_b) = results
    np.testing.assert_allclose(out_c, out_b, rtol=1e-6, atol=1e-12)
    assert set(grads_c) == set(grads_b) == {"data", "fc_weight", "fc_bias", "softmax_label"}
    assert not grads_c["softmax_label"].any()   # grad_req 'null': never written
    for k in grads_b:
        np.testing.assert_allclose(grads_c[k], grads_b[k], rtol=1e-6, atol=1e-12)


def test_custom_softmax_loss_trains_like_softmax_output(rng):
    x = rng.standard_normal((60, 5)).astype(np.float32)
    y = (x[:, :4].argmax(axis=1)).astype(np.float32)
    trained = []
    for custom in (True, False):
        rm.random.seed(3)
        it = rm.io.NDArrayIter(x, y, batch_size=20, shuffle=True, seed=5)
        mod = rm.mod.Module(softmax_net(custom))
        metric = rm.metric.create("acc")
        mod.fit(it, num_epoch=3, initializer=rm.init.Xavier(), eval_metric=metric,
                optimizer_params={"learning_rate": 0.2, "momentum": 0.9})
        trained.append((mod.get_params()[0], metric.get()[1]))
    (pc, acc_c), (pb, acc_b) = trained
    for k in pb:
        np.testing.assert_allclose(pc[k], pb[k], rtol=1e-6, atol=1e-6)
    assert acc_c == acc_b


# ------------------------------------------------------------------ dependencies, aux, errors
class Counter(rm.operator.CustomOp):
    """Doubles its input; counts training forwards in its auxiliary state; records what
    backward was given."""

    seen = []

    def forward(self, is_train, req, in_data, out_data, aux):
        self.assign(out_data[0], req[0], 2 * in_data[0])
        if is_train:
            aux[0] += 1

    def backward(self, req, out_grad, in_data, out_data, in_grad, aux):
        Counter.seen.append((req, [g is None for g in out_grad], [a is None for a in in_data],
                             [a is None for a in out_data]))
        self.assign(in_grad[0], req[0], 2 * out_grad[0])


@rm.operator.register("test_counter")
class CounterProp(rm.operator.CustomOpProp):
    def list_auxiliary_states(self):
        return ["count"]

    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0]], [[1]]

    def declare_backward_dependency(self, out_grad, in_data, out_data):
        return list(out_grad)   # backward reads only the head gradient

    def create_operator(self, ctx, shapes, dtypes):
        assert shapes == [[2, 2], [1]]   # arguments, then auxiliary states
        return Counter()


def test_aux_states_and_backward_dependencies(rng):
    sym = rm.sym.Custom(rm.sym.Variable("x"), op_type="test_counter", name="c")
    assert sym.list_auxiliary_states() == ["c_count"]
    x = rng.standard_normal((2, 2))
    exe = sym.simple_bind(rm.cpu(), x=(2, 2), type_dict={"x": np.float64})
    exe.arg_dict["x"][...] = x
    Counter.seen.clear()
    for _ in range(2):
        exe.forward(is_train=True)
        exe.backward([np.ones((2, 2))])
    exe.forward(is_train=False)
    assert exe.aux_dict["c_count"].tolist() == [2.0]
    np.testing.assert_allclose(exe.grad_dict["x"], 2.0)
    # only the head gradient was kept for backward, as the prop declared
    assert Counter.seen[0] == (["write"], [False], [True], [True])


@rm.operator.register("test_bad_shape")
class BadShapeProp(rm.operator.CustomOpProp):
    def infer_shape(self, in_shape):
        return in_shape, [in_shape[0], in_shape[0]], []


def test_infer_shape_returning_wrong_counts_is_a_shape_error():
    sym = rm.sym.Custom(rm.sym.Variable("x"), op_type="test_bad_shape")
    with pytest.raises(ShapeError, match="test_bad_shape.*2 outputs.*declares 1"):
        sym.infer_shape(x=(2, 3))


def test_props_travel_by_value_and_register_on_unpack(rng):
    sym = rm.sym.Custom(rm.sym.Variable("x"), op_type="test_scaled_sin", scale=3)
    assert rm.operator.pack_props(rm.sym.Variable("x")) is None
    blob = rm.operator.pack_props(sym)
    from ray import cloudpickle
    assert __name__ not in cloudpickle.list_registry_pickle_by_value()   # only while packing
    original = rm.operator.registered().get("test_scaled_sin")
    rm.operator._PROPS.pop("test_scaled_sin")   # as in a fresh worker process
    try:
        with pytest.raises(MXNetError, match="test_scaled_sin"):
            rm.sym.load_json(sym.tojson())
        assert rm.operator.unpack_props(blob) == ["test_scaled_sin"]
        shipped = rm.operator.get_prop("test_scaled_sin")
        # (cloudpickle gives back the same class in the process that packed it)
        assert shipped.__name__ == "ScaledSinProp"
        x = rng.standard_normal((2, 2))
        out = rm.sym.load_json(sym.tojson()).bind(rm.cpu(), args={"x": x}).forward()[0]
        np.testing.assert_allclose(out, 3 * x * np.sin(x), rtol=1e-12)
    finally:
        rm.operator.register("test_scaled_sin")(original)

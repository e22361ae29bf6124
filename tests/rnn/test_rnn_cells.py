"""rm.rnn cells: MXNet's names and shapes, numeric steps against numpy, gradients."""
import json
from pathlib import Path

import numpy as np
import pytest

import raymod as rm
import raymod.symbol as sym
from raymod import rnn
from raymod.base import MXNetError
from raymod.initializer import InitDesc, Uniform
from raymod.test_utils import check_gradient

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "mxnet"


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_lstm(x, wi, bi, wh, bh, h, c):
    """One LSTM step; gates stacked (i, f, c, o) in i2h/h2h."""
    i, f, g, o = np.split(x @ wi.T + bi + h @ wh.T + bh, 4, axis=1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c


def numpy_gru(x, wi, bi, wh, bh, h):
    """One cuDNN-style GRU step; gates stacked (r, z, n)."""
    ir, iz, i_n = np.split(x @ wi.T + bi, 3, axis=1)
    hr, hz, h_n = np.split(h @ wh.T + bh, 3, axis=1)
    r, z = sigmoid(ir + hr), sigmoid(iz + hz)
    return (1 - z) * np.tanh(i_n + r * h_n) + z * h


def run(symbol, values, **shapes):
    """simple_bind, copy ``values`` into the arguments, forward; numpy outputs."""
    ex = symbol.simple_bind(rm.cpu(), grad_req="null", **shapes)
    for name, value in values.items():
        ex.arg_dict[name][...] = value
    return [np.asarray(o) for o in ex.forward()]


def random_params(symbol, rng, skip=("data",), **shapes):
    args, _, _ = symbol.infer_shape(**shapes)
    return {n: rng.uniform(-0.5, 0.5, s).astype(np.float32)
            for n, s in zip(symbol.list_arguments(), args) if n not in skip}


def step_inputs(n, prefix="rnn_"):
    return [sym.Variable(f"{prefix}t{i}_data") for i in range(n)]


# --- names and shapes ----------------------------------------------------------------------
@pytest.mark.parametrize("make,width", [(lambda: rnn.RNNCell(100, prefix="rnn_"), 100),
                                        (lambda: rnn.LSTMCell(100, prefix="rnn_"), 400),
                                        (lambda: rnn.GRUCell(100, prefix="rnn_"), 300)])
def test_unroll_output_names_params_and_shapes(make, width):
    cell = make()
    outputs, states = cell.unroll(3, step_inputs(3))
    group = sym.Group(outputs)
    assert sorted(cell.params._params) == ["rnn_h2h_bias", "rnn_h2h_weight", "rnn_i2h_bias",
                                           "rnn_i2h_weight"]
    assert group.list_outputs() == ["rnn_t0_out_output", "rnn_t1_out_output",
                                    "rnn_t2_out_output"]
    assert group.list_arguments() == ["rnn_t0_data", "rnn_i2h_weight", "rnn_i2h_bias",
                                      "rnn_h2h_weight", "rnn_h2h_bias", "rnn_t1_data",
                                      "rnn_t2_data"]
    args, outs, _ = group.infer_shape(rnn_t0_data=(10, 50), rnn_t1_data=(10, 50),
                                      rnn_t2_data=(10, 50))
    assert outs == [(10, 100)] * 3
    assert dict(zip(group.list_arguments(), args))["rnn_i2h_weight"] == (width, 50)
    assert len(states) == len(cell.state_info)


def test_lstm_node_names_and_begin_states():
    cell = rnn.LSTMCell(8, prefix="lstm_")
    assert cell.state_info == [{"shape": (0, 8), "__layout__": "NC"}] * 2
    assert cell.state_shape == [(0, 8), (0, 8)]
    out, states = cell.unroll(2, sym.Variable("data"), merge_outputs=True)
    names = {n.name for n in out.topo()}
    for step in ("t0", "t1"):
        for part in ("i2h", "h2h", "slice", "i", "f", "c", "o", "state", "out"):
            assert f"lstm_{step}_{part}" in names
    assert {"lstm_begin_state_0", "lstm_begin_state_1"} <= names
    assert states[1].name == "lstm_t1_state"
    attrs = out.attr_dict()["lstm_begin_state_0"]
    assert attrs["__layout__"] == "NC" and attrs["shape"] == "(0, 8)"
    _, outs, _ = out.infer_shape(data=(4, 2, 3))
    assert outs == [(4, 2, 8)]
    time_major, _ = cell.unroll(2, sym.Variable("data"), layout="TNC", merge_outputs=True)
    assert time_major.infer_shape(data=(2, 4, 3))[1] == [(2, 4, 8)]
    # a second unroll starts the counters again
    again, _ = cell.unroll(2, sym.Variable("data"))
    assert [o.name for o in again] == ["lstm_t0_out", "lstm_t1_out"]


def test_gru_keeps_mxnet_double_underscore_names():
    cell = rnn.GRUCell(4, prefix="gru_")
    out, _ = cell.unroll(1, [sym.Variable("x")])
    names = {n.name for n in out[0].topo()}
    assert {"gru_t0__i2h", "gru_t0__h2h", "gru_t0__i2h_slice", "gru_t0__r_act",
            "gru_t0__z_act", "gru_t0__h_act", "gru_t0_out"} <= names


def test_lstm_forget_bias_comes_from_lstmbias_initializer():
    cell = rnn.LSTMCell(5, prefix="lstm_", forget_bias=2.0)
    out, _ = cell.unroll(2, step_inputs(2))
    attrs = sym.Group(out).attr_dict()
    assert "__init__" in attrs["lstm_i2h_bias"]
    assert "__init__" not in attrs.get("lstm_h2h_bias", {})
    bias = np.full(20, 7.0, dtype=np.float32)
    Uniform(0.1)(InitDesc("lstm_i2h_bias", attrs["lstm_i2h_bias"]), bias)
    expected = np.zeros(20, dtype=np.float32)
    expected[5:10] = 2.0  # gates (i, f, c, o): only the forget quarter
    np.testing.assert_array_equal(bias, expected)


# --- numeric forward --------------------------------------------------------------------
def test_lstm_two_steps_match_numpy(rng):
    n, t, c, h = 3, 2, 4, 5
    cell = rnn.LSTMCell(h, prefix="lstm_")
    outputs, states = cell.unroll(t, sym.Variable("data"), merge_outputs=True)
    net = sym.Group([outputs, states[1]])
    params = random_params(net, rng, data=(n, t, c))
    x = rng.standard_normal((n, t, c)).astype(np.float32)
    out, cell_state = run(net, {"data": x, **params}, data=(n, t, c))

    p = [params[f"lstm_{k}"] for k in ("i2h_weight", "i2h_bias", "h2h_weight", "h2h_bias")]
    hs, cs = np.zeros((n, h)), np.zeros((n, h))
    expected = []
    for step in range(t):
        hs, cs = numpy_lstm(x[:, step], *p, hs, cs)
        expected.append(hs)
    np.testing.assert_allclose(out, np.stack(expected, axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(cell_state, cs, rtol=1e-5, atol=1e-6)


def test_gru_two_steps_match_numpy(rng):
    n, t, c, h = 3, 2, 4, 5
    cell = rnn.GRUCell(h, prefix="gru_")
    outputs, _ = cell.unroll(t, sym.Variable("data"), layout="TNC")
    net = sym.Group(outputs)
    params = random_params(net, rng, data=(t, n, c))
    x = rng.standard_normal((t, n, c)).astype(np.float32)
    outs = run(net, {"data": x, **params}, data=(t, n, c))
    p = [params[f"gru_{k}"] for k in ("i2h_weight", "i2h_bias", "h2h_weight", "h2h_bias")]
    hs = np.zeros((n, h))
    for step in range(t):
        hs = numpy_gru(x[step], *p, hs)
        np.testing.assert_allclose(outs[step], hs, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_rnn_cell_two_steps_match_numpy(rng, activation):
    n, c, h = 3, 4, 5
    cell = rnn.RNNCell(h, activation=activation, prefix="rnn_")
    outputs, _ = cell.unroll(2, [sym.Variable("x0"), sym.Variable("x1")])
    net = sym.Group(outputs)
    params = random_params(net, rng, skip=("x0", "x1"), x0=(n, c), x1=(n, c))
    xs = [rng.standard_normal((n, c)).astype(np.float32) for _ in range(2)]
    outs = run(net, {"x0": xs[0], "x1": xs[1], **params}, x0=(n, c), x1=(n, c))
    act = np.tanh if activation == "tanh" else (lambda v: np.maximum(v, 0))
    hs = np.zeros((n, h))
    for x, out in zip(xs, outs):
        hs = act(x @ params["rnn_i2h_weight"].T + params["rnn_i2h_bias"]
                 + hs @ params["rnn_h2h_weight"].T + params["rnn_h2h_bias"])
        np.testing.assert_allclose(out, hs, rtol=1e-5, atol=1e-6)


def test_lstm_unroll_gradient():
    cell = rnn.LSTMCell(2, prefix="lstm_")
    begin = cell.begin_state(func=sym.Variable)
    outputs, states = cell.unroll(2, sym.Variable("data"), begin_state=begin,
                                  merge_outputs=True)
    net = sym.Group([outputs, states[1]])
    rng = np.random.default_rng(7)
    args, _, _ = net.infer_shape(data=(2, 2, 3), lstm_begin_state_0=(2, 2),
                                 lstm_begin_state_1=(2, 2))
    inputs = {name: rng.uniform(-1, 1, shape)
              for name, shape in zip(net.list_arguments(), args)}
    check_gradient(net, inputs)


# --- stacks and modifiers ------------------------------------------------------------------
def test_sequential_stack_prefixes_shapes_and_states():
    stack = rnn.SequentialRNNCell()
    for i in range(2):
        stack.add(rnn.LSTMCell(16, prefix=f"lstm_l{i}_"))
    stack.add(rnn.DropoutCell(0.5, prefix="drop_"))
    stack.add(rnn.GRUCell(8, prefix="gru_l2_"))
    assert len(stack.state_info) == 5
    outputs, states = stack.unroll(3, sym.Variable("data"), merge_outputs=True)
    assert len(states) == 5
    assert sorted(stack.params._params) == sorted(
        f"{p}{w}" for p in ("lstm_l0_", "lstm_l1_", "gru_l2_")
        for w in ("i2h_weight", "i2h_bias", "h2h_weight", "h2h_bias"))
    args, outs, _ = outputs.infer_shape(data=(5, 3, 7))
    assert outs == [(5, 3, 8)]
    shapes = dict(zip(outputs.list_arguments(), args))
    assert shapes["lstm_l1_i2h_weight"] == (64, 16) and shapes["gru_l2_i2h_weight"] == (24, 16)
    # stepping one time step by hand gives the same structure
    stack.reset()
    out, next_states = stack(sym.Variable("x"), stack.begin_state())
    assert len(next_states) == 5 and out.name == "gru_l2_t0_out"


def test_sequential_with_shared_params():
    params = rnn.RNNParams("shared_")
    stack = rnn.SequentialRNNCell(params=params)
    stack.add(rnn.RNNCell(4, prefix="a_"))
    assert "a_i2h_weight" in params._params
    other = rnn.RNNCell(4, prefix="b_", params=rnn.RNNParams("b_"))
    with pytest.raises(MXNetError, match="not both"):
        stack.add(other)


def test_bidirectional_doubles_width():
    cell = rnn.BidirectionalCell(rnn.LSTMCell(10, prefix="l_"), rnn.LSTMCell(10, prefix="r_"),
                                 output_prefix="bi_")
    outputs, states = cell.unroll(3, step_inputs(3))
    group = sym.Group(outputs)
    assert group.list_outputs() == ["bi_t0_output", "bi_t1_output", "bi_t2_output"]
    _, outs, _ = group.infer_shape(**{f"rnn_t{i}_data": (4, 6) for i in range(3)})
    assert outs == [(4, 20)] * 3
    assert len(states) == 2 and len(states[0]) == 2 and len(states[1]) == 2
    with pytest.raises(NotImplementedError):
        cell(sym.Variable("x"), cell.begin_state())


def test_bidirectional_merged_matches_per_step(rng):
    def build(merge):
        cell = rnn.BidirectionalCell(rnn.GRUCell(3, prefix="l_"), rnn.GRUCell(3, prefix="r_"))
        out, _ = cell.unroll(2, sym.Variable("data"), merge_outputs=merge)
        return out if merge else sym.Group(out)
    merged, steps = build(True), build(False)
    assert merged.name == "bi_out"
    params = random_params(merged, rng, data=(2, 2, 4))
    x = rng.standard_normal((2, 2, 4)).astype(np.float32)
    (whole,) = run(merged, {"data": x, **params}, data=(2, 2, 4))
    per_step = run(steps, {"data": x, **params}, data=(2, 2, 4))
    assert whole.shape == (2, 2, 6)
    np.testing.assert_allclose(whole, np.stack(per_step, axis=1), rtol=1e-5, atol=1e-6)


def test_residual_cell_adds_input(rng):
    cell = rnn.ResidualCell(rnn.GRUCell(5, prefix="rnn_"))
    outputs, _ = cell.unroll(2, step_inputs(2))
    group = sym.Group(outputs)
    assert group.list_outputs() == ["rnn_t0_out_plus_residual_output",
                                    "rnn_t1_out_plus_residual_output"]
    shapes = {f"rnn_t{i}_data": (3, 5) for i in range(2)}
    _, outs, _ = group.infer_shape(**shapes)
    assert outs == [(3, 5)] * 2
    # zero weights: the GRU's output stays 0, so the residual output is the input
    params = {k: np.zeros(s, np.float32) for k, s in
              zip(group.list_arguments(), group.infer_shape(**shapes)[0]) if "data" not in k}
    xs = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
    outs = run(group, {**xs, **params}, **shapes)
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out, xs[f"rnn_t{i}_data"], rtol=1e-6)
    merged, _ = rnn.ResidualCell(rnn.GRUCell(5, prefix="m_")).unroll(
        2, sym.Variable("data"), merge_outputs=True)
    assert merged.infer_shape(data=(3, 2, 5))[1] == [(3, 2, 5)]


def test_modified_cell_cannot_be_used_directly():
    base = rnn.LSTMCell(4, prefix="lstm_")
    zone = rnn.ZoneoutCell(base, zoneout_outputs=0.5, zoneout_states=0.5)
    with pytest.raises(MXNetError, match="modifier"):
        base.begin_state()
    assert len(zone.begin_state()) == 2
    with pytest.raises(MXNetError):
        rnn.ZoneoutCell(rnn.BidirectionalCell(rnn.RNNCell(2, prefix="a_"),
                                              rnn.RNNCell(2, prefix="b_")))


def test_zoneout_shapes_and_inference_is_identity(rng):
    cell = rnn.ZoneoutCell(rnn.RNNCell(4, prefix="rnn_"), zoneout_outputs=0.5,
                           zoneout_states=0.5)
    outputs, _ = cell.unroll(3, sym.Variable("data"), merge_outputs=True)
    _, outs, _ = outputs.infer_shape(data=(2, 3, 5))
    assert outs == [(2, 3, 4)]
    plain, _ = rnn.RNNCell(4, prefix="rnn_").unroll(3, sym.Variable("data"),
                                                    merge_outputs=True)
    params = random_params(plain, rng, data=(2, 3, 5))
    x = rng.standard_normal((2, 3, 5)).astype(np.float32)
    np.testing.assert_allclose(run(outputs, {"data": x, **params}, data=(2, 3, 5))[0],
                               run(plain, {"data": x, **params}, data=(2, 3, 5))[0], rtol=1e-6)


def test_zoneout_in_training_keeps_new_or_previous_outputs(rng):
    rm.random.seed(5)
    base = rnn.RNNCell(6, prefix="rnn_")
    plain_cell = rnn.RNNCell(6, prefix="plain_", params=base.params)  # same weights
    data = sym.Variable("data")
    zoned, _ = rnn.ZoneoutCell(base, zoneout_outputs=0.5).unroll(3, data)
    plain, _ = plain_cell.unroll(3, data)
    net = sym.Group(list(zoned) + list(plain))
    params = random_params(net, rng, data=(4, 3, 5))
    ex = net.simple_bind(rm.cpu(), grad_req="null", data=(4, 3, 5))
    ex.arg_dict["data"][...] = rng.standard_normal((4, 3, 5))
    for name, value in params.items():
        ex.arg_dict[name][...] = value
    outs = [np.asarray(o) for o in ex.forward(is_train=True)]
    zoned_out, plain_out = outs[:3], outs[3:]
    previous = np.zeros_like(zoned_out[0])
    kept_new = 0
    for new, got in zip(plain_out, zoned_out):
        is_new, is_old = np.isclose(got, new), np.isclose(got, previous)
        assert np.all(is_new | is_old)
        kept_new += int(np.sum(is_new & ~is_old))
        previous = got
    assert 0 < kept_new < 3 * got.size


def test_dropout_cell_merged_and_per_step():
    cell = rnn.DropoutCell(0.5)
    merged, states = cell.unroll(3, sym.Variable("data"), merge_outputs=True)
    assert states == [] and merged.infer_shape(data=(2, 3, 4))[1] == [(2, 3, 4)]
    steps, _ = cell.unroll(3, sym.Variable("data"), merge_outputs=False)
    assert len(steps) == 3 and sym.Group(steps).infer_shape(data=(2, 3, 4))[1] == [(2, 4)] * 3
    with pytest.raises(TypeError):
        rnn.DropoutCell("0.5")


def test_unpack_pack_weights_round_trip(rng):
    cell = rnn.LSTMCell(3, prefix="lstm_")
    args = {"lstm_i2h_weight": rng.standard_normal((12, 2)), "lstm_i2h_bias": np.arange(12.0),
            "lstm_h2h_weight": rng.standard_normal((12, 3)), "lstm_h2h_bias": np.arange(12.0),
            "other": np.ones(1)}
    unpacked = cell.unpack_weights(args)
    assert sorted(k for k in unpacked if k.startswith("lstm_i2h")) == [
        f"lstm_i2h_{g}_{kind}" for g in "cfio" for kind in ("bias", "weight")]
    np.testing.assert_array_equal(unpacked["lstm_i2h_f_bias"], [3, 4, 5])
    packed = cell.pack_weights(unpacked)
    assert packed.keys() == args.keys()
    for k in args:
        np.testing.assert_array_equal(packed[k], args[k])


def test_unroll_rejects_bad_inputs():
    cell = rnn.RNNCell(2)
    with pytest.raises(ValueError):
        cell.unroll(3, None)
    with pytest.raises(ValueError):
        cell.unroll(3, step_inputs(2))
    with pytest.raises(ValueError):
        cell.unroll(2, sym.Group(step_inputs(2)))


def test_sym_gen_buckets_share_parameter_names():
    stack = rnn.SequentialRNNCell()
    for i in range(2):
        stack.add(rnn.LSTMCell(8, prefix=f"lstm_l{i}_"))

    def sym_gen(seq_len):
        embed = sym.Embedding(sym.Variable("data"), input_dim=20, output_dim=4, name="embed")
        stack.reset()
        outputs, _ = stack.unroll(seq_len, inputs=embed, merge_outputs=True)
        pred = sym.FullyConnected(sym.Reshape(outputs, shape=(-1, 8)), num_hidden=20,
                                  name="pred")
        label = sym.Reshape(sym.Variable("softmax_label"), shape=(-1,))
        return sym.SoftmaxOutput(pred, label, name="softmax"), ("data",), ("softmax_label",)

    nets = {key: sym_gen(key)[0] for key in (3, 6)}
    assert nets[3].list_arguments() == nets[6].list_arguments()
    for key, net in nets.items():
        args, outs, _ = net.infer_shape(data=(2, key), softmax_label=(2, key))
        assert outs == [(2 * key, 20)]
        assert dict(zip(net.list_arguments(), args))["lstm_l1_h2h_weight"] == (32, 8)


# --- MXNet ground truth ---------------------------------------------------------------------
def test_two_layer_lstm_lm_matches_mxnet_graph():
    expected = json.loads((FIXTURES / "lstm2x5-expected.json").read_text())
    with sym.NameManager():
        data = sym.Variable("data")
        label = sym.Variable("softmax_label")
        embed = sym.Embedding(data=data, input_dim=50, output_dim=16, name="embed")
        stack = rnn.SequentialRNNCell()
        for i in range(2):
            stack.add(rnn.LSTMCell(num_hidden=32, prefix=f"lstm_l{i}_"))
        stack.reset()
        outputs, _ = stack.unroll(5, inputs=embed, merge_outputs=True)
        pred = sym.Reshape(outputs, shape=(-1, 32))
        pred = sym.FullyConnected(data=pred, num_hidden=50, name="pred")
        label = sym.Reshape(label, shape=(-1,))
        net = sym.SoftmaxOutput(data=pred, label=label, name="softmax")
    assert net.list_arguments() == expected["list_arguments"]
    assert net.list_outputs() == expected["list_outputs"]
    nodes = json.loads(net.tojson())["nodes"]
    assert [[n["op"], n["name"]] for n in nodes] == expected["nodes"]
    bools = {"True": "1", "False": "0"}  # MXNet writes squeeze_axis=1 as '1'
    for node in nodes:
        want = expected["node_attrs"].get(node["name"])
        if want is None:
            continue
        got = {k: bools.get(v, v) for k, v in node.get("attrs", {}).items()}
        if node["op"] == "_zeros":  # the dtype attribute is the zeros op's business
            got.pop("dtype", None)
            want = {k: v for k, v in want.items() if k != "dtype"}
        assert got == want, node["name"]
    args, outs, _ = net.infer_shape(data=(8, 5), softmax_label=(8, 5))
    assert [list(s) for s in args] == expected["arg_shapes"]
    assert [list(s) for s in outs] == expected["out_shapes"]

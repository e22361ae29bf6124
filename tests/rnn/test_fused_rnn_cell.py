"""rm.rnn.FusedRNNCell: one RNN node, equal to its unfused stack of cells."""
import numpy as np
import pytest

import raymod as rm
import raymod.symbol as sym
from raymod import rnn


def _run(symbol, values, **shapes):
    ex = symbol.simple_bind(rm.cpu(), grad_req="null", **shapes)
    for name, value in values.items():
        ex.arg_dict[name][...] = value
    return [np.asarray(o) for o in ex.forward(is_train=False)]


def _flat_size(mode, layers, dirs, inp, hid):
    g = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}[mode] * hid
    return sum(((inp if k == 0 else dirs * hid) + hid + 2) * g * dirs for k in range(layers))


@pytest.mark.parametrize("mode", ["rnn_relu", "rnn_tanh", "lstm", "gru"])
@pytest.mark.parametrize("layers, bidirectional", [(1, False), (2, True)])
def test_unfused_cells_give_the_fused_outputs(rng, mode, layers, bidirectional):
    steps, batch, inp, hid = 4, 3, 5, 3
    dirs = 2 if bidirectional else 1
    cell = rnn.FusedRNNCell(hid, num_layers=layers, mode=mode, bidirectional=bidirectional,
                            get_next_state=True, prefix="f_")
    data = sym.Variable("data")
    fused_out, fused_states = cell.unroll(steps, data, layout="TNC", merge_outputs=True)
    fused = sym.Group([fused_out] + fused_states)
    assert [n for n in fused.list_arguments() if n != "data"] == ["f_parameters"]
    assert [n.op.name for n in fused.topo() if not n.is_variable].count("RNN") == 1
    flat = rng.uniform(-0.5, 0.5, _flat_size(mode, layers, dirs, inp, hid))
    x = rng.standard_normal((steps, batch, inp))
    want = _run(fused, {"data": x, "f_parameters": flat}, data=x.shape)
    assert want[0].shape == (steps, batch, dirs * hid)

    stack = cell.unfuse()
    out, states = stack.unroll(steps, data, layout="TNC", merge_outputs=True)
    per_gate = cell.unpack_weights({"f_parameters": flat})
    packed = stack.pack_weights(per_gate)
    unfused = sym.Group([out])
    assert sorted(unfused.list_arguments()) == sorted(["data"] + list(packed))
    got = _run(unfused, {"data": x, **packed}, data=x.shape)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    if not bidirectional:  # final states of the one-direction stack line up per layer
        finals = _run(sym.Group(states), {"data": x, **packed}, data=x.shape)
        per_state = 2 if mode == "lstm" else 1
        for k in range(per_state):
            np.testing.assert_allclose(finals[k], want[1 + k][0], rtol=1e-5, atol=1e-6)
    # unpack then pack gives back the flat vector
    np.testing.assert_array_equal(cell.pack_weights(per_gate)["f_parameters"], flat)


def test_names_states_and_layouts(rng):
    cell = rnn.FusedRNNCell(4, num_layers=2, mode="gru", bidirectional=True)
    assert cell.state_info == [{"shape": (4, 0, 4), "__layout__": "LNC"}]
    with pytest.warns(UserWarning, match="NTC"):
        out, states = cell.unroll(3, sym.Variable("data"), merge_outputs=True)
    assert states == []
    assert out.list_arguments() == ["data", "gru_parameters"]
    _, shapes, _ = out.infer_shape(data=(2, 3, 6))
    assert shapes == [(2, 3, 8)]
    names = cell.unpack_weights({"gru_parameters": np.zeros(_flat_size("gru", 2, 2, 6, 4))})
    assert "gru_r1_h2h_o_bias" in names and names["gru_l0_i2h_r_weight"].shape == (4, 6)
    assert names["gru_l1_i2h_z_weight"].shape == (4, 8)
    with pytest.raises(NotImplementedError, match="unroll"):
        cell(sym.Variable("x"), [])
    with pytest.raises(ValueError, match="fits no input size"):
        cell.unpack_weights({"gru_parameters": np.zeros(7)})
    with pytest.raises(ValueError, match="mode"):
        rnn.FusedRNNCell(4, mode="elman")
    lstm = rnn.FusedRNNCell(2, num_layers=3, dropout=0.5, mode="lstm")
    kinds = [type(c).__name__ for c in lstm.unfuse()._cells]
    assert kinds == ["LSTMCell", "DropoutCell", "LSTMCell", "DropoutCell", "LSTMCell"]


def test_fused_rnn_initializer_fills_gate_by_gate_with_the_forget_bias():
    cell = rm.rnn.FusedRNNCell(3, num_layers=1, mode="lstm", forget_bias=2.5, prefix="f_")
    outputs, _ = cell.unroll(2, inputs=rm.sym.Variable("data"), layout="TNC",
                             merge_outputs=True)
    arg_shapes, _, _ = outputs.infer_shape(data=(2, 4, 5))
    shape = dict(zip(outputs.list_arguments(), arg_shapes))["f_parameters"]
    flat = np.zeros(shape, np.float32)
    attrs = outputs.attr_dict()["f_parameters"]
    rm.init.Constant(0.5)(rm.init.InitDesc("f_parameters", attrs), flat)
    pieces = cell.unpack_weights({"f_parameters": flat})
    for name, piece in pieces.items():
        # per-gate names: weights from the global initializer, biases 0, forget bias 2.5
        want = 2.5 if name.endswith("_f_bias") else 0.0 if name.endswith("bias") else 0.5
        np.testing.assert_array_equal(piece, np.full(piece.shape, want, np.float32), name)

import numpy as np
import pytest

import raymod as rm
from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import (bind, check_backward_after_inference, check_forward,
                               check_gradient, op_symbol)

# MXNet 1.9.1's outputs (output, state_output) for the GRU case of test_rnn_matches_mxnet_values
MXNET_GRU = [np.array([0.27650115, -0.01503519], np.float32).reshape(2, 1, 1),
             np.array([-0.01503519], np.float32).reshape(1, 1, 1)]
GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def _sig(z):
    return 1 / (1 + np.exp(-z))


def _unpack(flat, mode, layers, dirs, inp, hid):
    """MXNet's layout: all weights (layer, direction: i2h then h2h), then all biases."""
    g = GATES[mode] * hid
    ws, pos = [], 0
    for layer in range(layers):
        width = inp if layer == 0 else dirs * hid
        for _ in range(dirs):
            wx = flat[pos:pos + g * width].reshape(g, width)
            pos += g * width
            wh = flat[pos:pos + g * hid].reshape(g, hid)
            pos += g * hid
            ws.append([wx, wh])
    for w in ws:
        w += [flat[pos:pos + g], flat[pos + g:pos + 2 * g]]
        pos += 2 * g
    assert pos == flat.size
    return ws


def _reference(data, params, state, state_cell=None, *, mode, layers, dirs, hid, clip=None):
    ws = _unpack(params, mode, layers, dirs, data.shape[2], hid)
    x, hy, cy = data, [], []
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            wx, wh, bx, bh = ws[layer * dirs + d]
            h = state[layer * dirs + d]
            c = None if state_cell is None else state_cell[layer * dirs + d]
            out = np.zeros(x.shape[:2] + (hid,))
            steps = range(x.shape[0])[::-1] if d else range(x.shape[0])
            for t in steps:
                a, b = x[t] @ wx.T + bx, h @ wh.T + bh
                if mode == "rnn_relu":
                    h = np.maximum(a + b, 0)
                elif mode == "rnn_tanh":
                    h = np.tanh(a + b)
                elif mode == "lstm":
                    i, f, gg, o = np.split(a + b, 4, axis=1)
                    c = _sig(f) * c + _sig(i) * np.tanh(gg)
                    if clip:
                        c = np.clip(c, *clip)
                    h = _sig(o) * np.tanh(c)
                else:
                    (ar, az, an), (br, bz, bn) = np.split(a, 3, axis=1), np.split(b, 3, axis=1)
                    r, z = _sig(ar + br), _sig(az + bz)
                    h = (1 - z) * np.tanh(an + r * bn) + z * h
                out[t] = h
            outs.append(out)
            hy.append(h)
            cy.append(c)
        x = np.concatenate(outs, axis=2)
    result = [x, np.stack(hy)]
    return result + [np.stack(cy)] if mode == "lstm" else result


def _inputs(rng, mode, layers, dirs, steps=3, batch=2, inp=3, hid=2, dtype=np.float64):
    g = GATES[mode] * hid
    size = sum(((inp if k == 0 else dirs * hid) + hid + 2) * g * dirs for k in range(layers))
    ins = {"data": rng.standard_normal((steps, batch, inp)),
           "parameters": rng.standard_normal(size) * 0.6,
           "state": rng.standard_normal((layers * dirs, batch, hid))}
    if mode == "lstm":
        ins["state_cell"] = rng.standard_normal((layers * dirs, batch, hid))
    return {k: v.astype(dtype) for k, v in ins.items()}


@pytest.mark.parametrize("mode", list(GATES))
@pytest.mark.parametrize("layers, bidirectional", [(1, False), (2, True), (3, False)])
def test_rnn_forward_and_gradient(ctx, rng, mode, layers, bidirectional):
    dirs = 2 if bidirectional else 1
    ins = _inputs(rng, mode, layers, dirs)
    s = op_symbol("RNN", list(ins), state_size=2, num_layers=layers, mode=mode,
                  bidirectional=bidirectional, state_outputs=True)
    expected = _reference(*ins.values(), mode=mode, layers=layers, dirs=dirs, hid=2)
    check_forward(s, ins, expected, ctx, rtol=1e-10, atol=1e-12)
    check_gradient(s, ins, ctx)


@pytest.mark.parametrize("steps, p", [(1, 0.0), (2, 0.4)])
def test_rnn_lstm_stack_deeper_than_long(ctx, rng, steps, p):
    # one-direction LSTM stacks run as a wavefront (layer l takes step k - l in wave k): with
    # fewer steps than layers no wave has every layer busy; dropout applies only in training,
    # so inference with p > 0 takes the wavefront too
    ins = _inputs(rng, "lstm", 3, 1, steps=steps)
    s = op_symbol("RNN", list(ins), state_size=2, num_layers=3, mode="lstm", p=p,
                  state_outputs=True)
    expected = _reference(*ins.values(), mode="lstm", layers=3, dirs=1, hid=2)
    if p:
        outs = bind(s, ins, ctx).forward(is_train=False)
        for out, want in zip(outs, expected):
            np.testing.assert_allclose(as_numpy(out), want, rtol=1e-10, atol=1e-12)
    else:
        check_forward(s, ins, expected, ctx, rtol=1e-10, atol=1e-12)
        check_gradient(s, ins, ctx)


@pytest.mark.parametrize("layers", [1, 2])
def test_rnn_backward_after_inference_forward(ctx, rng, layers):
    # as in MXNet, backward may follow forward(is_train=False): the same gradients here,
    # where training and inference compute the same function (no dropout)
    ins = _inputs(rng, "lstm", layers, 1)
    s = op_symbol("RNN", list(ins), state_size=2, num_layers=layers, mode="lstm")
    check_backward_after_inference(s, ins, [rng.standard_normal((3, 2, 2))], ctx)


def test_rnn_shapes_outputs_and_float32(ctx, rng):
    ins = _inputs(rng, "lstm", 2, 1, dtype=np.float32)
    s = op_symbol("RNN", list(ins), state_size=2, num_layers=2, mode="lstm")
    assert s.list_outputs() == ["op_output"]
    args, outs, _ = s.infer_shape(data=(3, 2, 3))
    assert args == [(3, 2, 3), (ins["parameters"].size,), (2, 2, 2), (2, 2, 2)]
    assert outs == [(3, 2, 2)]
    expected = _reference(*(v.astype(np.float64) for v in ins.values()), mode="lstm",
                          layers=2, dirs=1, hid=2)[0]
    out = check_forward(s, ins, expected.astype(np.float32), ctx, rtol=1e-5, atol=1e-6)
    assert out[0].dtype == np.float32
    gru = op_symbol("RNN", ["data", "parameters", "state"], state_size=4, num_layers=1,
                    mode="gru", bidirectional=True, state_outputs=True)
    assert gru.list_outputs() == ["op_output", "op_state_output"]
    assert gru.infer_shape(data=(5, 2, 7))[0][1] == ((7 + 4 + 2) * 12 * 2,)


def test_rnn_lstm_state_clip(ctx, rng):
    ins = _inputs(rng, "lstm", 1, 1)
    ins["state_cell"] *= 4
    s = op_symbol("RNN", list(ins), state_size=2, num_layers=1, mode="lstm", state_outputs=True,
                  lstm_state_clip_min=-0.5, lstm_state_clip_max=0.4)
    expected = _reference(*ins.values(), mode="lstm", layers=1, dirs=1, hid=2,
                          clip=(-0.5, 0.4))
    check_forward(s, ins, expected, ctx, rtol=1e-10, atol=1e-12)
    check_gradient(s, ins, ctx)


def test_rnn_dropout_between_layers(rng):
    ins = _inputs(rng, "rnn_tanh", 2, 1, steps=4, batch=64, hid=8)
    s = op_symbol("RNN", list(ins), state_size=8, num_layers=2, mode="rnn_tanh", p=0.5)

    def train(seed):
        rm.random.seed(seed)
        ex = bind(s, ins)
        return as_numpy(ex.forward(is_train=True)[0])

    plain = as_numpy(bind(s, ins).forward(is_train=False)[0])
    np.testing.assert_allclose(plain, _reference(*ins.values(), mode="rnn_tanh", layers=2,
                                                 dirs=1, hid=8)[0], rtol=1e-10)
    np.testing.assert_array_equal(train(3), train(3))
    assert not np.allclose(train(3), plain) and not np.array_equal(train(3), train(4))
    # p=1 drops the whole first layer's output: deterministic, so finite differences apply,
    # and no gradient may reach data or the first layer's weights through the zero mask
    small = _inputs(rng, "rnn_tanh", 2, 1, batch=4, hid=2)
    s1 = op_symbol("RNN", list(small), state_size=2, num_layers=2, mode="rnn_tanh", p=1.0)
    grads = check_gradient(s1, small)
    assert not grads["data"].any() and not grads["parameters"][:10].any()


def test_rnn_matches_mxnet_values():
    # recorded from MXNet 1.9.1 (mx.nd.RNN, mode='gru', state_size=1, num_layers=1)
    data = np.array([[[0.5]], [[-1.0]]], np.float32)
    params = np.array([0.3, -0.2, 0.6, 0.1, 0.4, -0.5, 0.05, -0.1, 0.2, 0.0, 0.3, -0.2],
                      np.float32)
    state = np.array([[[0.25]]], np.float32)
    s = op_symbol("RNN", ["data", "parameters", "state"], state_size=1, num_layers=1,
                  mode="gru", state_outputs=True)
    check_forward(s, {"data": data, "parameters": params, "state": state},
                  MXNET_GRU, rtol=1e-6, atol=1e-7)


def test_rnn_bad_inputs():
    with pytest.raises(AttributeValueError, match="RNN: projection_size .*not supported"):
        op_symbol("RNN", ["data", "parameters", "state", "state_cell"], state_size=2,
                  num_layers=1, mode="lstm", projection_size=1)
    with pytest.raises(AttributeValueError, match="RNN: use_sequence_length"):
        op_symbol("RNN", ["data", "parameters", "state"], state_size=2, num_layers=1,
                  mode="gru", use_sequence_length=True)
    with pytest.raises(AttributeValueError, match="mode"):
        op_symbol("RNN", ["data", "parameters", "state"], state_size=2, num_layers=1,
                  mode="elman")
    with pytest.raises(AttributeValueError, match="lstm_state_clip_min and lstm_state_clip_max"):
        op_symbol("RNN", ["data", "parameters", "state", "state_cell"], state_size=2,
                  num_layers=1, mode="lstm", lstm_state_clip_min=-1)
    s = op_symbol("RNN", ["data", "parameters", "state"], state_size=2, num_layers=2,
                  mode="rnn_tanh")
    with pytest.raises(ShapeError, match="RNN: data must be 3-D"):
        s.infer_shape(data=(3, 2))
    with pytest.raises(ShapeError, match=r"RNN: parameters must have shape \(26,\)"):
        s.infer_shape(data=(3, 2, 3), parameters=(30,))
    with pytest.raises(ShapeError, match=r"RNN: state must have shape \(2, N, 2\)"):
        s.infer_shape(data=(3, 2, 3), state=(1, 2, 2))

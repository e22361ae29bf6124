"""The fused recurrent layer ``RNN`` (``rm.rnn.FusedRNNCell``): one ONNX ``LSTM``, ``GRU`` or
``RNN`` node per layer, both directions in one node, the layers chained."""
from __future__ import annotations

import numpy as np

from ...ops.sequence.rnn import param_layout
from ..graph import NodeContext, converts

_ONNX_OP = {"lstm": "LSTM", "gru": "GRU", "rnn_tanh": "RNN", "rnn_relu": "RNN"}
#: ONNX's gate order taken from MXNet's: LSTM i,f,g,o -> i,o,f,c; GRU r,z,n -> z,r,h
_GATE_ORDER = {"lstm": [0, 3, 1, 2], "gru": [1, 0, 2], "rnn_tanh": [0], "rnn_relu": [0]}


def _gates(value: np.ndarray, mode: str) -> np.ndarray:
    """Rows of stacked gates (first axis) reordered from MXNet's order to ONNX's."""
    parts = np.split(value, len(_GATE_ORDER[mode]), axis=0)
    return np.concatenate([parts[k] for k in _GATE_ORDER[mode]], axis=0)


def _layer_weights(flat: np.ndarray, entries: list, layer: int, dirs: int, mode: str):
    """ONNX's ``W`` (D, G*H, in), ``R`` (D, G*H, H) and ``B`` (D, 2*G*H) of one layer."""
    def piece(entry, key):
        offset, shape = entry[key]
        return _gates(flat[offset:offset + int(np.prod(shape))].reshape(shape), mode)
    mine = entries[layer * dirs:(layer + 1) * dirs]
    w = np.stack([piece(e, "i2h_weight") for e in mine])
    r = np.stack([piece(e, "h2h_weight") for e in mine])
    b = np.stack([np.concatenate([piece(e, "i2h_bias"), piece(e, "h2h_bias")]) for e in mine])
    return w, r, b


@converts("RNN")
def rnn(ctx: NodeContext) -> None:
    a = ctx.attrs
    mode, layers, hidden = a["mode"], int(a["num_layers"]), int(a["state_size"])
    dirs = 2 if a.get("bidirectional") else 1
    if a.get("lstm_state_clip_min") is not None:
        raise ctx.unsupported("with lstm_state_clip_min/max is not exported (ONNX's LSTM "
                              "clips the gates' inputs, not the cell state)")
    src, _ = ctx.node.inputs[1]
    if not (src.is_variable and src.name in ctx.b.params):
        raise ctx.unsupported("is exported only with its 'parameters' a parameter of the "
                              "model (their values are rearranged into ONNX's W, R, B)")
    dtype = ctx.in_dtype(0)
    flat = np.asarray(ctx.b.params[src.name], dtype=dtype).reshape(-1)
    width = ctx.fixed_in_dim(0, 2, "input width")   # sizes the W initializers
    entries, _ = param_layout(mode, layers, dirs, width, hidden)
    attrs = {"hidden_size": hidden, "direction": "bidirectional" if dirs == 2 else "forward"}
    if mode == "gru":
        attrs["linear_before_reset"] = 1  # MXNet's (cuDNN's) GRU: r multiplies R h + b
    if mode.startswith("rnn_"):
        attrs["activations"] = ["Relu" if mode == "rnn_relu" else "Tanh"] * dirs
    x, finals_h, finals_c = ctx.input(0), [], []
    for layer in range(layers):
        w, r, b = _layer_weights(flat, entries, layer, dirs, mode)
        span = (ctx.ints(f"l{layer}_begin", [layer * dirs]),
                ctx.ints(f"l{layer}_end", [(layer + 1) * dirs]), ctx.ints(f"l{layer}_ax", [0]))
        h0 = ctx.add("Slice", [ctx.input(2), *span])
        ins = [x, ctx.const(f"l{layer}_W", w), ctx.const(f"l{layer}_R", r),
               ctx.const(f"l{layer}_B", b), "", h0]
        outs = [ctx.fresh(f"l{layer}_Y"), ctx.fresh(f"l{layer}_Yh")]
        if mode == "lstm":
            ins.append(ctx.add("Slice", [ctx.input(3), *span]))
            outs.append(ctx.fresh(f"l{layer}_Yc"))
        ctx.add(_ONNX_OP[mode], ins, outs, **attrs)
        finals_h.append(outs[1])
        if mode == "lstm":
            finals_c.append(outs[2])
        # (T, D, N, H) -> (T, N, D*H): the next layer's input, or the output
        y = ctx.add("Transpose", [outs[0]], perm=[0, 2, 1, 3])
        last = layer == layers - 1
        x = ctx.add("Reshape", [y, ctx.ints(f"l{layer}_shape", [0, 0, -1])],
                    ctx.output(0) if last else None)
    if a.get("state_outputs"):
        for k, finals in ((1, finals_h), (2, finals_c)):
            if finals:
                ctx.add("Concat", finals, ctx.output(k), axis=0)

"""RNN: MXNet's fused multi-layer recurrent layer (vanilla ReLU/tanh, LSTM, GRU)."""
from __future__ import annotations

import functools

from ... import random as rm_random
from ...base import AttributeValueError, ShapeError
from ..base import Op, Param, merge_shape
from . import _lstm_wavefront

_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}
# LSTM stacks with states this small run as a wavefront (see _lstm_wavefront): there numpy's
# per-call cost dominates, and at 2 layers of 32 forward + backward take 0.7x the per-layer
# loops from batch 2 to 32; at 64 units they break even, at 128 they take 1.4-2x (every wave
# multiplies the whole block matrix, zero blocks included)
WAVEFRONT_MAX_STATE = 32


@functools.lru_cache(maxsize=256)
def _layout(mode, num_layers, directions, input_size, state_size) -> tuple[tuple, int]:
    """:func:`param_layout` as tuples of ``(name, offset, shape)``, kept per configuration."""
    entries, total = param_layout(mode, num_layers, directions, input_size, state_size)
    return tuple(tuple((k, o, s) for k, (o, s) in e.items()) for e in entries), total


def param_layout(mode: str, num_layers: int, directions: int, input_size: int,
                 state_size: int) -> tuple[list, int]:
    """Where each weight and bias lies in MXNet's flat ``parameters`` vector.

    Returns ``(entries, total)``; ``entries[layer * directions + d]`` maps ``i2h_weight``,
    ``h2h_weight``, ``i2h_bias`` and ``h2h_bias`` to ``(offset, shape)``. All weights come
    first (per layer, per direction: input-to-hidden then hidden-to-hidden), then all biases in
    the same order; gate rows are stacked in MXNet's order (LSTM i, f, g, o; GRU r, z, n).
    """
    rows = _GATES[mode] * state_size
    entries, offset = [], 0
    for layer in range(num_layers):
        width = input_size if layer == 0 else directions * state_size
        for _ in range(directions):
            entry = {"i2h_weight": (offset, (rows, width))}
            offset += rows * width
            entry["h2h_weight"] = (offset, (rows, state_size))
            offset += rows * state_size
            entries.append(entry)
    for entry in entries:
        entry["i2h_bias"] = (offset, (rows,))
        entry["h2h_bias"] = (offset + rows, (rows,))
        offset += 2 * rows
    return entries, offset


def _sigmoid(xp, z):
    return 1 / (1 + xp.exp(-z))


class RNN(Op):
    """A stack of recurrent layers over a whole sequence, with one flat parameter vector.

    ``data`` has shape ``(T, N, I)`` (time major); ``state`` (and ``state_cell`` for LSTM)
    ``(num_layers * D, N, H)`` with ``D = 2`` when bidirectional and ``H = state_size``.
    ``parameters`` is MXNet's flat vector (see :func:`param_layout`). Per step,
    ``rnn_relu``/``rnn_tanh``: ``h = act(W x + b + R h + c)``; ``lstm``: gates
    ``i, f, o = sigmoid(.)``, ``g = tanh(.)``, ``c = f c + i g``, ``h = o tanh(c)``; ``gru``:
    ``r, z = sigmoid(.)``, ``n = tanh(W_n x + b_n + r (R_n h + c_n))``, ``h = (1 - z) n + z h``.
    A bidirectional layer runs a second cell over the reversed sequence and concatenates the
    two outputs, which feed the next layer. In training, dropout with rate ``p`` (drawn from
    :func:`raymod.random.device_generator`) is applied to the output of every layer but the
    last. Outputs: ``output`` ``(T, N, D * H)``, and with ``state_outputs`` the final hidden
    state (``state_output``) and, for LSTM, the final cell state (``statecell_output``).
    ``lstm_state_clip_min``/``max`` clip the LSTM cell state at every step (no gradient
    flows through a clipped entry), as MXNet's cuDNN path does (MXNet 1.9.1's CPU kernel
    ignores them); with ``lstm_state_clip_nan`` a NaN cell state becomes the upper bound.

    ``projection_size`` and ``use_sequence_length`` are not supported (AttributeValueError).

    Backward (through time: loops over layers, directions and steps only) keeps every
    layer's input, the hidden and cell states and the gate activations of each step, and the
    dropout masks.
    """

    name = "RNN"
    params = {"state_size": Param("int"), "num_layers": Param("int"),
              "bidirectional": Param("bool", False),
              "mode": Param("str", choices=tuple(_GATES)),
              "p": Param("float", 0.0), "state_outputs": Param("bool", False),
              "projection_size": Param("int", None, optional=True),
              "lstm_state_clip_min": Param("float", None, optional=True),
              "lstm_state_clip_max": Param("float", None, optional=True),
              "lstm_state_clip_nan": Param("bool", False),
              "use_sequence_length": Param("bool", False)}
    inputs = ("data", "parameters", "state", "state_cell", "sequence_length")
    outputs = ("output", "state_output", "statecell_output")
    no_grad_inputs = ("sequence_length",)

    def check(self) -> None:
        if self.state_size <= 0:
            raise AttributeValueError(f"RNN: state_size must be positive, got {self.state_size}")
        if self.num_layers <= 0:
            raise AttributeValueError(f"RNN: num_layers must be positive, got {self.num_layers}")
        if not 0 <= self.p <= 1:
            raise AttributeValueError(f"RNN: p must be in [0, 1], got {self.p}")
        if self.projection_size is not None:
            raise AttributeValueError(f"RNN: projection_size (LSTMP) is not supported by "
                                      f"raymod, got projection_size={self.projection_size}")
        if self.use_sequence_length:
            raise AttributeValueError("RNN: use_sequence_length=True (variable-length "
                                      "sequences) is not supported by raymod; got True")
        if (self.lstm_state_clip_min is None) != (self.lstm_state_clip_max is None):
            raise AttributeValueError(
                f"RNN: lstm_state_clip_min and lstm_state_clip_max must be given together, got "
                f"{self.lstm_state_clip_min} and {self.lstm_state_clip_max}")

    @property
    def _dirs(self) -> int:
        return 2 if self.bidirectional else 1

    @property
    def _lstm(self) -> bool:
        return self.mode == "lstm"

    def list_arguments(self) -> list[str]:
        return ["data", "parameters", "state"] + ["state_cell"] * self._lstm

    def list_outputs(self) -> list[str]:
        if not self.state_outputs:
            return ["output"]
        return ["output", "state_output"] + ["statecell_output"] * self._lstm

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        if data is not None and len(data) != 3:
            raise ShapeError(f"RNN: data must be 3-D (T, N, I), got shape {data}")
        hidden, states = self.state_size, self.num_layers * self._dirs
        state = None
        for s in in_shapes[2:]:
            state = merge_shape(state, s, "RNN: state and state_cell must share a shape")
        if state is not None and len(state) != 3:
            raise ShapeError(f"RNN: state must be 3-D (layers * directions, N, H), got {state}")
        batch = (data[1] if data is not None and data[1] else
                 state[1] if state is not None else 0)
        state = merge_shape(state, (states, batch, hidden),
                            f"RNN: state must have shape ({states}, N, {hidden}) for "
                            f"num_layers={self.num_layers}, bidirectional={self.bidirectional}, "
                            f"state_size={hidden}; got")
        if data is None or not data[2]:
            return [data, in_shapes[1]] + [state] * (len(in_shapes) - 2), [None] * len(
                out_shapes), []
        if batch and data[1] != batch:
            data = (data[0], batch, data[2])
        size = param_layout(self.mode, self.num_layers, self._dirs, data[2], hidden)[1]
        params = merge_shape(in_shapes[1], (size,),
                             f"RNN: parameters must have shape ({size},) for input size "
                             f"{data[2]}, got")
        outs = [(data[0], data[1], self._dirs * hidden)] + [state] * (len(out_shapes) - 1)
        return [data, params] + [state] * (len(in_shapes) - 2), outs, []

    # --- forward -------------------------------------------------------------------------
    def _weights(self, xp, flat, input_size):
        """Views of each layer and direction's weights and biases in the flat vector."""
        entries, _ = _layout(self.mode, self.num_layers, self._dirs, input_size,
                             self.state_size)
        return [{k: flat[o:o + _size(s)].reshape(s) for k, o, s in e} for e in entries]

    def _clip(self, xp, c):
        """Clip LSTM cell states; returns the clipped values and where the gradient passes."""
        lo, hi = self.lstm_state_clip_min, self.lstm_state_clip_max
        if lo is None:
            return c, None
        if self.lstm_state_clip_nan:
            c = xp.where(xp.isnan(c), c.dtype.type(hi), c)
        passes = (c >= lo) & (c <= hi)
        return xp.clip(c, lo, hi), passes

    def _run_direction(self, xp, x, w, h, reverse):
        """One vanilla or GRU cell over the sequence (LSTM: :meth:`_lstm_direction`);
        returns the outputs (T, N, H), the final state and what backward needs."""
        steps = x.shape[0]
        hidden = self.state_size
        xw = x @ w["i2h_weight"].T + w["i2h_bias"]  # every step's input term in one matmul
        out = xp.empty(x.shape[:2] + (hidden,), x.dtype)
        h_prev = xp.empty_like(out)
        acts = xp.empty(x.shape[:2] + (xw.shape[2],), x.dtype)
        extra = xp.empty_like(out) if self.mode == "gru" else None
        order = range(steps - 1, -1, -1) if reverse else range(steps)
        for t in order:  # loop over time: each step needs the previous state
            h_prev[t] = h
            hw = h @ w["h2h_weight"].T + w["h2h_bias"]
            pre = xw[t] + hw
            if self.mode == "rnn_relu":
                h = xp.maximum(pre, 0)
                acts[t] = h
            elif self.mode == "rnn_tanh":
                h = xp.tanh(pre)
                acts[t] = h
            else:
                xr, xz, xn = xp.split(xw[t], 3, axis=1)
                hr, hz, hn = xp.split(hw, 3, axis=1)
                r, z = _sigmoid(xp, xr + hr), _sigmoid(xp, xz + hz)
                n = xp.tanh(xn + r * hn)
                h = (1 - z) * n + z * h
                acts[t] = xp.concatenate([r, z, n], axis=1)
                extra[t] = hn
            out[t] = h
        return out, h, None, {"h_prev": h_prev, "acts": acts, "extra": extra}

    def _lstm_direction(self, xp, x, w, h, c, reverse):
        """One LSTM cell over the sequence (see :meth:`_run_direction`), lean per step.

        Every step's input term is one GEMM before the loop, which holds only the recurrent
        GEMM and the gate arithmetic, written into buffers made once. The gates use
        ``sigmoid(z) = (tanh(z / 2) + 1) / 2``: with the sigmoid gates' weight rows halved
        (exact in floating point) one ``tanh`` over all four gates gives them all, then one
        scale and one shift per step. A reversed direction runs on the reversed views.
        """
        if reverse:
            x = x[::-1]
        steps, batch = x.shape[:2]
        hidden = self.state_size
        dtype = x.dtype
        half = xp.ones((4, 1), dtype)
        half[(0, 1, 3), 0] = 0.5  # rows of the i, f and o gates
        shift = (1 - half).reshape(4, 1)
        half_rows = xp.repeat(half, hidden, axis=0)  # (4H, 1)
        wx = w["i2h_weight"] * half_rows
        wh_t = (w["h2h_weight"] * half_rows).T
        bias = (w["i2h_bias"] + w["h2h_bias"]) * half_rows[:, 0]
        acts = (x.reshape(steps * batch, -1) @ wx.T + bias).reshape(steps, batch, 4, hidden)
        hs = xp.empty((steps + 1, batch, hidden), dtype)  # hs[t]: the state step t reads
        cs = xp.empty_like(hs)
        tcs = xp.empty((steps, batch, hidden), dtype)  # tanh of each step's cell state
        hs[0], cs[0] = h, c
        ig = xp.empty((batch, hidden), dtype)
        clip = self.lstm_state_clip_min is not None
        passes = [] if clip else None
        for t in range(steps):  # loop over time: each step needs the previous state
            a = acts[t]
            a += (hs[t] @ wh_t).reshape(batch, 4, hidden)
            xp.tanh(a, out=a)
            a *= half
            a += shift  # a = [i, f, g, o]
            c = cs[t + 1]
            xp.multiply(a[:, 1], cs[t], out=c)
            xp.multiply(a[:, 0], a[:, 2], out=ig)
            c += ig
            if clip:
                clipped, mask = self._clip(xp, c)
                c[...] = clipped
                passes.append(mask)
            xp.tanh(c, out=tcs[t])
            xp.multiply(a[:, 3], tcs[t], out=hs[t + 1])
        out = hs[1:]
        saved = {"acts": acts, "hs": hs, "cs": cs, "tcs": tcs, "passes": passes}
        return (out[::-1] if reverse else out), hs[steps], cs[steps], saved

    def _lstm_back_direction(self, xp, w, s, x, dy, dh, dc, reverse):
        """Gradients of :meth:`_lstm_direction`: what each gate's gradient multiplies is
        worked out for all steps before the loop, which keeps only the per-step chain
        through ``h`` and ``c``; the weight gradients are one GEMM each after it."""
        if reverse:
            x, dy = x[::-1], dy[::-1]
        acts, hs, cs, tcs, passes = s["acts"], s["hs"], s["cs"], s["tcs"], s["passes"]
        steps, batch = dy.shape[:2]
        hidden = self.state_size
        i, f, g, o = acts[:, :, 0], acts[:, :, 1], acts[:, :, 2], acts[:, :, 3]
        # d pre / d c for the i, f, g gates, and d pre / d h for the o gate
        factors = xp.empty((steps, batch, 3, hidden), dtype=acts.dtype)
        xp.multiply(g, i * (1 - i), out=factors[:, :, 0])
        xp.multiply(cs[:-1], f * (1 - f), out=factors[:, :, 1])
        xp.multiply(i, 1 - g * g, out=factors[:, :, 2])
        out_factor = tcs * o * (1 - o)
        cell_factor = o * (1 - tcs * tcs)  # d c / d h through h = o tanh(c)
        dpre = xp.empty((steps, batch, 4, hidden), dtype=acts.dtype)
        wh = w["h2h_weight"]
        for t in range(steps - 1, -1, -1):  # backward through time
            dh = dh + dy[t]
            dc = dc + dh * cell_factor[t]
            if passes is not None:
                dc = dc * passes[t]
            xp.multiply(factors[t], dc[:, None, :], out=dpre[t, :, :3])
            xp.multiply(dh, out_factor[t], out=dpre[t, :, 3])
            dc = dc * f[t]
            dh = dpre[t].reshape(batch, 4 * hidden) @ wh
        flat = dpre.reshape(steps * batch, 4 * hidden)
        bias = flat.sum(axis=0)
        grads = {"i2h_weight": flat.T @ x.reshape(steps * batch, -1),
                 "h2h_weight": flat.T @ hs[:-1].reshape(steps * batch, hidden),
                 "i2h_bias": bias, "h2h_bias": bias}
        dx = (flat @ w["i2h_weight"]).reshape(steps, batch, -1)
        return (dx[::-1] if reverse else dx), dh, dc, grads

    def _wavefront(self, is_train: bool) -> bool:
        """Whether the layers run as one wavefront: a small one-direction LSTM stack whose
        layers meet only through their outputs (no dropout between them, no clipping)."""
        return (self._lstm and not self.bidirectional and self.lstm_state_clip_min is None
                and self.num_layers > 1 and self.state_size <= WAVEFRONT_MAX_STATE
                and (self.p == 0 or not is_train))

    def forward(self, xp, inputs, aux, is_train):
        x, flat, h0 = inputs[0], inputs[1], inputs[2]
        c0 = inputs[3] if self._lstm else None
        weights = self._weights(xp, flat, x.shape[2])
        if self._wavefront(is_train):
            results, saved = _lstm_wavefront.forward(xp, x, weights, h0, c0,
                                                     self.state_outputs)
            return results, {"wavefront": saved, "input_size": x.shape[2]}
        dirs = self._dirs
        hy, cy, layers = [], [], []
        layer_in = x
        for layer in range(self.num_layers):  # loop over layers and directions (few)
            outs, saves = [], []
            for d in range(dirs):
                k = layer * dirs + d
                if self._lstm:
                    out, h, c, saved = self._lstm_direction(xp, layer_in, weights[k], h0[k],
                                                            c0[k], d == 1)
                else:
                    out, h, c, saved = self._run_direction(xp, layer_in, weights[k], h0[k],
                                                           d == 1)
                outs.append(out)
                saves.append(saved)
                hy.append(h)
                cy.append(c)
            y = outs[0] if dirs == 1 else xp.concatenate(outs, axis=2)
            mask = None
            if is_train and self.p > 0 and layer < self.num_layers - 1:
                keep = 1 - self.p
                if keep == 0:
                    mask = xp.zeros(y.shape, y.dtype)
                else:
                    u = rm_random.device_generator(xp).random(y.shape, dtype=y.dtype)
                    mask = (u < keep).astype(y.dtype) * y.dtype.type(1 / keep)
                y = y * mask
            layers.append({"input": layer_in, "dirs": saves, "mask": mask})
            layer_in = y
        results = [layer_in]
        if self.state_outputs:
            results.append(xp.stack(hy))
            if self._lstm:
                results.append(xp.stack(cy))
        # kept after an inference forward too: backward may follow it (the executor drops
        # what nothing will differentiate)
        return results, {"layers": layers, "weights": weights}

    # --- backward ------------------------------------------------------------------------
    def _back_direction(self, xp, w, s, x, dy, dh, dc, reverse):
        """Gradients of one vanilla or GRU cell over the sequence: input, initial state and
        parameters (LSTM: :meth:`_lstm_back_direction`)."""
        steps = dy.shape[0]
        acts, h_prev = s["acts"], s["h_prev"]
        dpre_x = xp.empty_like(acts)  # gradient of the input term W x + b per step
        dpre_h = xp.empty_like(acts)  # gradient of the recurrent term R h + c per step
        order = range(steps) if reverse else range(steps - 1, -1, -1)
        for t in order:  # backward through time, opposite to the forward order
            dh = dh + dy[t]
            a = acts[t]
            carry = 0  # what reaches the previous state other than through R h
            if self.mode == "rnn_relu":
                dpre_x[t] = dpre_h[t] = dh * (a > 0)
            elif self.mode == "rnn_tanh":
                dpre_x[t] = dpre_h[t] = dh * (1 - a * a)
            else:
                r, z, n = xp.split(a, 3, axis=1)
                dn = dh * (1 - z) * (1 - n * n)
                dz = dh * (h_prev[t] - n) * z * (1 - z)
                dr = dn * s["extra"][t] * r * (1 - r)
                dpre_x[t] = xp.concatenate([dr, dz, dn], axis=1)
                dpre_h[t] = xp.concatenate([dr, dz, dn * r], axis=1)
                carry = dh * z
            dh = carry + dpre_h[t] @ w["h2h_weight"]
        grads = {"i2h_weight": xp.einsum("tng,tni->gi", dpre_x, x),
                 "h2h_weight": xp.einsum("tng,tnh->gh", dpre_h, h_prev),
                 "i2h_bias": dpre_x.sum(axis=(0, 1)), "h2h_bias": dpre_h.sum(axis=(0, 1))}
        dx = dpre_x @ w["i2h_weight"]
        return dx, dh, dc, grads

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if "wavefront" in saved:
            width = saved["input_size"]
            _, total = _layout(self.mode, self.num_layers, 1, width, self.state_size)
            dflat = xp.empty((total,), out_grads[0].dtype)
            dy, dhy, dcy = (list(out_grads) + [None, None])[:3]
            dx, dh0, dc0 = _lstm_wavefront.backward(xp, saved["wavefront"], dy, dhy, dcy,
                                                    self._weights(xp, dflat, width))
            return [g if need else None for g, need in zip([dx, dflat, dh0, dc0], need_grad)]
        weights = saved["weights"]
        x = saved["layers"][0]["input"]
        dirs, hidden = self._dirs, self.state_size
        zeros = xp.zeros((self.num_layers * dirs,) + x.shape[1:2] + (hidden,), x.dtype)
        dhy = out_grads[1] if self.state_outputs and out_grads[1] is not None else zeros
        dcy = (out_grads[2] if self.state_outputs and self._lstm and out_grads[2] is not None
               else zeros)
        _, total = _layout(self.mode, self.num_layers, dirs, x.shape[2], hidden)
        dflat = xp.empty((total,), x.dtype)
        dweights = self._weights(xp, dflat, x.shape[2])  # views: gradients written in place
        layers = saved["layers"]
        dh0 = xp.empty_like(zeros)
        dc0 = xp.empty_like(zeros)
        dy = out_grads[0]
        for layer in range(self.num_layers - 1, -1, -1):  # layers in reverse (few)
            info = layers[layer]
            if info["mask"] is not None:
                dy = dy * info["mask"]
            dx = None
            for d in range(dirs):
                k = layer * dirs + d
                part = dy[:, :, d * hidden:(d + 1) * hidden]
                back = self._lstm_back_direction if self._lstm else self._back_direction
                gx, dh, dc, grads = back(xp, weights[k], info["dirs"][d], info["input"], part,
                                         dhy[k], dcy[k], d == 1)
                dx = gx if dx is None else dx + gx
                dh0[k] = dh
                dc0[k] = dc
                for key, view in dweights[k].items():
                    view[...] = grads[key].reshape(view.shape)
            dy = dx
        grads = [dy, dflat, dh0]
        if self._lstm:
            grads.append(dc0)
        return [g if need else None for g, need in zip(grads, need_grad)]


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n

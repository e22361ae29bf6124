"""A stack of one-direction LSTM layers run as a wavefront: layer ``l`` takes step ``k - l`` in
wave ``k``, so every layer advances in the same wave and ``L`` layers over ``T`` steps cost
``T + L - 1`` rounds of small calls in place of ``T * L``.

Wave ``k`` reads one column block ``S[k]`` (per sample): every layer's hidden state (layer
``l``'s after its step ``k - l - 1``: its own recurrent input, and the input of layer
``l + 1``'s step in the same wave), the sequence's input at step ``k`` and a one. So a single
product ``B @ S[k]`` gives every layer's gate pre-activations, the first layer's input term
and the biases included: layer ``l``'s rows of ``B`` hold its recurrent weights against its own
state, its input weights against layer ``l - 1``'s state (the sequence's input for ``l = 0``)
and its biases against the one. Backward runs the waves in reverse with the transpose of
``B``'s state columns, then takes ``B``'s gradient, and the input's from the first layer's
gates, as one product each over all waves.

The batch is the last axis (``S[k]`` is ``(L*H + I + 1, N)``, a wave's gates ``(4, L, H, N)``):
every gate and state a wave touches is then one contiguous block, which numpy runs several
times faster than the strided views of a batch-first layout at these small sizes.

Used by :class:`raymod.ops.sequence.rnn.RNN` for LSTM stacks without dropout between layers
or cell clipping.
"""
from __future__ import annotations

import functools

import numpy as np

#: per gate (MXNet's order i, f, g, o) the factor on its rows of the block matrix: the
#: sigmoid gates' are halved, since ``sigmoid(z) = (tanh(z / 2) + 1) / 2`` (halving is exact)
_SCALE = (0.5, 0.5, 1.0, 0.5)
#: and what turns the gates' ``tanh`` into their activations: ``a * _SCALE + _SHIFT``
_SHIFT = (0.5, 0.5, 0.0, 0.5)


@functools.lru_cache(maxsize=16)
def _gate_column(values: tuple, dtype, ndim: int):
    """``values`` (one per gate) as a read-only (4, 1, ...) numpy array of ``ndim`` dims."""
    column = np.array(values, dtype).reshape((4,) + (1,) * (ndim - 1))
    column.flags.writeable = False
    return column


def _gates(xp, values, dtype, ndim):
    column = _gate_column(values, np.dtype(dtype), ndim)
    return column if xp is np else xp.asarray(column)


@functools.lru_cache(maxsize=64)
def _busy(steps: int, layers: int):
    """(T + L - 1, 1, L, 1, 1) booleans: which layers take a step in each wave (numpy; callers
    move it to their device)."""
    wave = np.arange(steps + layers - 1)[:, None] - np.arange(layers)
    return ((wave >= 0) & (wave < steps))[:, None, :, None, None]


def _block(xp, weights, hidden, inputs):
    """``B`` as (4, L, H, L*H + I + 1): the gates (MXNet's order, rows scaled by
    ``_SCALE``) of each layer and unit against every layer's state, the sequence's input and
    a one."""
    layers = len(weights)
    width = layers * hidden
    dtype = weights[0]["h2h_weight"].dtype
    block = xp.zeros((4, layers, hidden, width + inputs + 1), dtype)
    scale = _gates(xp, _SCALE, dtype, 3)
    for layer, w in enumerate(weights):
        own = slice(layer * hidden, (layer + 1) * hidden)
        below = (slice(width, width + inputs) if layer == 0 else
                 slice((layer - 1) * hidden, layer * hidden))
        xp.multiply(w["h2h_weight"].reshape(4, hidden, hidden), scale,
                    out=block[:, layer, :, own])
        xp.multiply(w["i2h_weight"].reshape(4, hidden, -1), scale,
                    out=block[:, layer, :, below])
        bias = block[:, layer, :, -1]
        xp.add(w["i2h_bias"].reshape(4, hidden), w["h2h_bias"].reshape(4, hidden), out=bias)
        bias *= scale[:, :, 0]
    return block


def forward(xp, x, weights, h0, c0, final_states):
    """Run the stack over ``x`` (T, N, I) from the states ``h0``, ``c0`` (L, N, H).

    Returns the outputs, the last layer's output (T, N, H) followed, with ``final_states``,
    by the final hidden and cell states (L, N, H); and what :func:`backward` needs. Every
    wave runs every layer, so that each call covers one contiguous block: a layer outside its
    steps computes values nothing reads (its initial states are put in place just before its
    first step). All four gates take one ``tanh``: the sigmoid gates' rows are halved (see
    ``_SCALE``), one scale and one shift finish them.
    """
    steps, batch, inputs = x.shape
    layers, hidden, dtype = len(weights), h0.shape[2], x.dtype
    count, width = steps + layers - 1, layers * hidden
    block = _block(xp, weights, hidden, inputs)
    flat_block = block.reshape(4 * width, -1)
    scale, shift = _gates(xp, _SCALE, dtype, 4), _gates(xp, _SHIFT, dtype, 4)
    # cols[k]: what wave k multiplies, hidden[k] its view of the layers' states
    cols = xp.empty((count + 1, width + inputs + 1, batch), dtype)
    cols[:steps, width:-1] = x.transpose(0, 2, 1)
    cols[steps:, width:-1] = 0
    cols[:, -1] = 1
    hidden_states = cols[:, :width].reshape(count + 1, layers, hidden, batch)
    hidden_states[0] = h0.transpose(0, 2, 1)
    # acts[k]: wave k's gates i, f, g, o and, fifth, the cell states it starts from, so that
    # (i, f) * (g, c) is one call
    acts = xp.empty((count + 1, 5, layers, hidden, batch), dtype)
    cs = acts[:, 4]
    cs[0] = c0.transpose(0, 2, 1)
    tcs = xp.empty((count, layers, hidden, batch), dtype)  # tanh of each new cell state
    both = xp.empty((2, layers, hidden, batch), dtype)
    # views per wave, taken by iteration (one C call each) rather than indexing in the loop
    pre = acts.reshape(count + 1, 5 * width, batch)[:, :4 * width]
    for k, (a, p, col, tc, h_next, c_next) in enumerate(zip(
            acts, pre, cols, tcs, hidden_states[1:], cs[1:])):  # waves: each needs the last
        if 0 < k < layers:  # layer k's first step
            hidden_states[k, k], cs[k, k] = hidden_states[0, k], cs[0, k]
        xp.matmul(flat_block, col, out=p)
        gates = a[:4]
        xp.tanh(gates, out=gates)
        gates *= scale
        gates += shift
        xp.multiply(a[:2], a[2::2], out=both)  # i g and f c
        xp.add(both[0], both[1], out=c_next)
        xp.tanh(c_next, out=tc)
        xp.multiply(a[3], tc, out=h_next)
    outs = [hidden_states[layers:, layers - 1].transpose(0, 2, 1).copy()]
    if final_states:
        outs += [xp.stack([states[steps + layer, layer].T for layer in range(layers)])
                 for states in (hidden_states, cs)]
    return outs, {"acts": acts, "cols": cols, "tcs": tcs, "block": flat_block,
                  "input_weight": weights[0]["i2h_weight"]}


def backward(xp, saved, dy, dhy, dcy, grads):
    """Gradients of :func:`forward` from those of its output ``dy`` (T, N, H) and final
    states ``dhy``, ``dcy`` (L, N, H; None for none): returns those of the input, ``h0`` and
    ``c0``, and writes each layer's weight and bias gradients into ``grads`` (a list of
    dicts of arrays keyed like the forward pass's ``weights``).

    The loop carries the gradients of the forward pass's scaled pre-activations (twice the
    true ones for the sigmoid gates), so that it multiplies by the same block, transposed.
    A layer outside its steps has zero factors and a forget gate of one, so that it passes
    nothing on and carries its cell gradient through unchanged.
    """
    acts, cols, tcs, block = (saved[k] for k in ("acts", "cols", "tcs", "block"))
    steps, batch = dy.shape[:2]
    count, layers, hidden = tcs.shape[:3]
    width, dtype = layers * hidden, dy.dtype
    i, f, g, o, cs = (acts[:count, j] for j in range(5))
    busy = xp.asarray(_busy(steps, layers))
    twice = xp.where(busy, dtype.type(2), dtype.type(0))
    # d pre / d c for the i, f, g gates, d pre / d h for the o gate, d c / d h through h
    factors = xp.empty((count, 3, layers, hidden, batch), dtype)
    xp.multiply(i * (1 - i), g, out=factors[:, 0])
    xp.multiply(f * (1 - f), cs, out=factors[:, 1])
    factors[:, :2] *= twice
    xp.multiply(1 - g * g, i, out=factors[:, 2])
    factors[:, 2:] *= busy
    out_factor = (1 - o) * o
    out_factor *= tcs
    out_factor *= twice[:, 0]
    cell_factor = 1 - tcs * tcs
    cell_factor *= o
    cell_factor *= busy[:, 0]
    forget = xp.where(busy[:, 0], f, dtype.type(1))
    # dhidden[k]: the gradient of the states wave k reads; the output's and the final
    # states' gradients enter first
    dhidden = xp.zeros((count + 1, layers, hidden, batch), dtype)
    dhidden[layers:, layers - 1] = dy.transpose(0, 2, 1)
    if dhy is not None:
        for layer in range(layers):
            dhidden[steps + layer, layer] += dhy[layer].T
    # each layer's cell gradient, carried back a step at a time
    dc = (xp.zeros((layers, hidden, batch), dtype) if dcy is None else
          dcy.transpose(0, 2, 1).copy())
    dpre = xp.empty((count, 4, layers, hidden, batch), dtype)  # gradients of i, f, g, o
    tmp = xp.empty((layers, hidden, batch), dtype)
    block_t = block[:, :width].T  # the states' columns
    for k in range(count - 1, -1, -1):  # waves in reverse
        dh = dhidden[k + 1]
        xp.multiply(dh, cell_factor[k], out=tmp)
        dc += tmp
        p = dpre[k]
        xp.multiply(factors[k], dc, out=p[:3])
        xp.multiply(dh, out_factor[k], out=p[3])
        dc *= forget[k]
        dhidden[k] += (block_t @ p.reshape(4 * width, batch)).reshape(layers, hidden, batch)
    dh0 = xp.stack([dhidden[layer, layer].T for layer in range(layers)])
    dc0 = dc.transpose(0, 2, 1).copy()
    # the gradients of every wave's gates at their true scale (4, L, H, K, N)
    true = xp.empty((4, layers, hidden, count, batch), dtype)
    true[...] = dpre.transpose(1, 2, 3, 0, 4)
    true *= _gates(xp, _SCALE, dtype, 5)
    first = true[:, 0, :, :steps].reshape(4 * hidden, -1)
    dx = (first.T @ saved["input_weight"]).reshape(steps, batch, -1)
    # B's gradient: those against what each wave multiplied, in one product
    dblock = (true.reshape(4 * width, -1) @ cols[:count].transpose(0, 2, 1).reshape(
        count * batch, -1)).reshape(4, layers, hidden, -1)
    inputs = dx.shape[2]
    for layer, out in enumerate(grads):
        below = (slice(width, width + inputs) if layer == 0 else
                 slice((layer - 1) * hidden, layer * hidden))
        out["h2h_weight"].reshape(4, hidden, hidden)[...] = dblock[
            :, layer, :, layer * hidden:(layer + 1) * hidden]
        out["i2h_weight"].reshape(4, hidden, -1)[...] = dblock[:, layer, :, below]
        out["i2h_bias"].reshape(4, hidden)[...] = dblock[:, layer, :, -1]
        out["h2h_bias"][...] = out["i2h_bias"]
    return dx, dh0, dc0

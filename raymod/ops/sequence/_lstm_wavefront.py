"""A stack of one-direction LSTM layers run as a wavefront: layer ``l`` takes step ``k - l`` in
wave ``k``, so every layer advances in the same wave and ``L`` layers over ``T`` steps cost
``T + L - 1`` rounds of small calls in place of ``T * L``.

Wave ``k`` reads the states ``S[k]``: ``S[k][l]`` is layer ``l``'s hidden state after step
``k - l - 1``, both its own recurrent input and the input of layer ``l + 1``'s step in the same
wave. So one product with a block matrix ``B`` (layer ``l``'s rows: its recurrent weights on
its own state, its input weights on the state of layer ``l - 1``) gives every active layer's
pre-activation; the first layer's input term is one product for all steps before the loop.
Backward runs the waves in reverse with ``B``'s transpose.

States and gates are kept with the batch last (a state is ``(L, H, N)``, a wave's gates
``(4, L, H, N)``): the product is then ``B @ S`` and every gate, layer range and state a wave
touches is one contiguous block, which numpy runs several times faster than the strided views
of a batch-first layout at these small sizes.

Used by :class:`raymod.ops.sequence.rnn.RNN` for LSTM stacks without dropout between layers
or cell clipping.
"""
from __future__ import annotations

import functools

# gates are kept in the order o, i, f, g (MXNet's indices 3, 0, 1, 2): the sigmoid gates
# o, i, f are one block for the forward pass, and the gates whose gradient goes through the
# cell state (i, f, g) one block for backward
_ORDER = (3, 0, 1, 2)


def _reorder(xp, w, hidden, out=None):
    """MXNet's gate rows of ``w`` (4H, ...) as (4, H, ...) in the order o, i, f, g, the
    sigmoid gates' rows halved (``sigmoid(z) = (tanh(z / 2) + 1) / 2``; halving is exact)."""
    w = w.reshape((4, hidden) + w.shape[1:])
    if out is None:
        out = xp.empty_like(w)
    xp.multiply(w[3], 0.5, out=out[0])
    xp.multiply(w[:2], 0.5, out=out[1:3])
    out[3] = w[2]
    return out


def _restore(xp, halved, out):
    """The inverse of :func:`_reorder` for gradients: ``halved`` (4, H, ...) taken against the
    reordered, halved pre-activations, written to ``out`` as those of MXNet's rows."""
    xp.multiply(halved[1:3], 0.5, out=out[:2])
    out[2] = halved[3]
    xp.multiply(halved[0], 0.5, out=out[3])
    return out


@functools.lru_cache(maxsize=64)
def _busy(steps: int, layers: int):
    """(T + L - 1, 1, L, 1, 1) booleans: which layers take a step in each wave (numpy; callers
    move it to their device)."""
    import numpy
    wave = numpy.arange(steps + layers - 1)[:, None] - numpy.arange(layers)
    return ((wave >= 0) & (wave < steps))[:, None, :, None, None]


def _block(xp, weights, hidden):
    """``B`` (4 * L * H, L * H), rows (gate, layer, unit) and columns (layer, unit): layer
    ``l``'s recurrent weights on its own state and its input weights on layer ``l - 1``'s,
    reordered and halved like :func:`_reorder`."""
    layers = len(weights)
    block = xp.zeros((4, layers, hidden, layers, hidden), weights[0]["h2h_weight"].dtype)
    for layer, w in enumerate(weights):
        _reorder(xp, w["h2h_weight"], hidden, block[:, layer, :, layer])
        if layer:
            _reorder(xp, w["i2h_weight"], hidden, block[:, layer, :, layer - 1])
    return block.reshape(4 * layers * hidden, layers * hidden)


def _biases(xp, w, hidden, batch):
    """A layer's two biases added, reordered and halved, repeated over the batch (4, H, N)."""
    bias = _reorder(xp, w["i2h_bias"] + w["h2h_bias"], hidden)
    return xp.repeat(bias[:, :, None], batch, axis=2)


def forward(xp, x, weights, h0, c0, final_states):
    """Run the stack over ``x`` (T, N, I) from the states ``h0``, ``c0`` (L, N, H).

    Returns the outputs, the last layer's output (T, N, H) followed, with ``final_states``,
    by the final hidden and cell states (L, N, H); and what :func:`backward` needs. Every wave runs every layer, so that each call covers one
    contiguous block: a layer outside its steps computes values nothing reads (its initial
    states are put in place just before its first step). All four gates take one ``tanh``:
    the sigmoid gates' rows are halved (see :func:`_reorder`), one scale and one shift
    finish them.
    """
    steps, batch = x.shape[:2]
    layers, hidden, dtype = len(weights), h0.shape[2], x.dtype
    count = steps + layers - 1
    block = _block(xp, weights, hidden)
    # acts[k, :, l]: layer l's gates (o, i, f, g) in wave k, pre-activations until it runs
    acts = xp.empty((count, 4, layers, hidden, batch), dtype)
    wx = _reorder(xp, weights[0]["i2h_weight"], hidden).reshape(4 * hidden, -1)
    xp.add((wx @ x.transpose(0, 2, 1)).reshape(steps, 4, hidden, batch),
           _biases(xp, weights[0], hidden, batch), out=acts[:steps, :, 0])
    acts[steps:, :, 0] = 0
    for layer in range(1, layers):
        acts[:, :, layer] = _biases(xp, weights[layer], hidden, batch)
    hs = xp.empty((count + 1, layers, hidden, batch), dtype)  # hs[k]: the states wave k reads
    cs = xp.empty_like(hs)
    hs[0], cs[0] = h0.transpose(0, 2, 1), c0.transpose(0, 2, 1)
    tcs = xp.empty((count, layers, hidden, batch), dtype)  # tanh of each new cell state
    ig = xp.empty((layers, hidden, batch), dtype)
    for k in range(count):  # loop over waves: each needs the last one's states
        if 0 < k < layers:  # layer k's first step
            hs[k, k], cs[k, k] = hs[0, k], cs[0, k]
        a = acts[k]
        a += (block @ hs[k].reshape(-1, batch)).reshape(4, layers, hidden, batch)
        xp.tanh(a, out=a)
        sig = a[:3]
        sig *= 0.5
        sig += 0.5
        c = cs[k + 1]
        xp.multiply(a[2], cs[k], out=c)
        xp.multiply(a[1], a[3], out=ig)
        c += ig
        xp.tanh(c, out=tcs[k])
        xp.multiply(a[0], tcs[k], out=hs[k + 1])
    outs = [hs[layers:, layers - 1].transpose(0, 2, 1).copy()]
    if final_states:
        outs += [xp.stack([states[steps + layer, layer].T for layer in range(layers)])
                 for states in (hs, cs)]
    return outs, {"acts": acts, "hs": hs, "cs": cs, "tcs": tcs, "x": x, "block": block}


def backward(xp, weights, saved, dy, dhy, dcy, grads):
    """Gradients of :func:`forward` from those of its output ``dy`` (T, N, H) and final
    states ``dhy``, ``dcy`` (L, N, H; None for none): returns those of the input, ``h0`` and
    ``c0``, and writes each layer's weight and bias gradients into ``grads`` (a list of
    dicts of arrays keyed like ``weights``).

    The loop carries the gradients of the forward pass's halved pre-activations (twice the
    true ones for the sigmoid gates), so that it multiplies by the same block, transposed.
    A layer outside its steps has zero factors and a forget gate of one, so that it passes
    nothing on and carries its cell gradient through unchanged.
    """
    acts, hs, cs, tcs = saved["acts"], saved["hs"], saved["cs"], saved["tcs"]
    x, block = saved["x"], saved["block"]
    steps, batch = dy.shape[:2]
    layers, hidden, dtype = len(weights), dy.shape[2], dy.dtype
    count = steps + layers - 1
    o, i, f, g = acts[:, 0], acts[:, 1], acts[:, 2], acts[:, 3]
    busy = xp.asarray(_busy(steps, layers))
    twice = xp.where(busy, dtype.type(2), dtype.type(0))
    # d pre / d c for the i, f, g gates, d pre / d h for the o gate, d c / d h through h
    factors = xp.empty((count, 3, layers, hidden, batch), dtype)
    xp.multiply(i * (1 - i), g, out=factors[:, 0])
    xp.multiply(f * (1 - f), cs[:-1], out=factors[:, 1])
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
    # dhs[k]: the gradient of hs[k]; the output's and the final states' gradients enter first
    dhs = xp.zeros((count + 1, layers, hidden, batch), dtype)
    dhs[layers:, layers - 1] = dy.transpose(0, 2, 1)
    if dhy is not None:
        for layer in range(layers):
            dhs[steps + layer, layer] += dhy[layer].T
    # each layer's cell gradient, carried back a step at a time
    dc = (xp.zeros((layers, hidden, batch), dtype) if dcy is None else
          dcy.transpose(0, 2, 1).copy())
    dpre = xp.empty((count, 4, layers, hidden, batch), dtype)
    tmp = xp.empty((layers, hidden, batch), dtype)
    block_t = block.T
    for k in range(count - 1, -1, -1):  # waves in reverse
        dh = dhs[k + 1]
        xp.multiply(dh, cell_factor[k], out=tmp)
        dc += tmp
        p = dpre[k]
        xp.multiply(factors[k], dc, out=p[1:])
        xp.multiply(dh, out_factor[k], out=p[0])
        dc *= forget[k]
        dhs[k] += (block_t @ p.reshape(-1, batch)).reshape(layers, hidden, batch)
    dh0 = xp.stack([dhs[layer, layer].T for layer in range(layers)])
    dc0 = dc.transpose(0, 2, 1).copy()
    dx = None
    dp = xp.empty((4, hidden, steps, batch), dtype)
    for layer, (w, out) in enumerate(zip(weights, grads)):
        # (4H, T*N): the layer's gradients of its pre-activations in MXNet's gate order, a
        # column per step and sample
        _restore(xp, dpre[layer:layer + steps, :, layer].transpose(1, 2, 0, 3), dp)
        flat = dp.reshape(4 * hidden, -1)
        below = (x.reshape(steps * batch, -1) if layer == 0 else
                 hs[layer:layer + steps, layer - 1].transpose(0, 2, 1).reshape(-1, hidden))
        own = hs[layer:layer + steps, layer].transpose(0, 2, 1).reshape(-1, hidden)
        xp.matmul(flat, below, out=out["i2h_weight"])
        xp.matmul(flat, own, out=out["h2h_weight"])
        flat.sum(axis=1, out=out["i2h_bias"])
        out["h2h_bias"][...] = out["i2h_bias"]
        if layer == 0:
            dx = (flat.T @ w["i2h_weight"]).reshape(steps, batch, -1)
    return dx, dh0, dc0

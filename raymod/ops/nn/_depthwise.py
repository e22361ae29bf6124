"""Depthwise convolution (one filter per channel, ``num_group == channels == num_filter``).

A grouped GEMM would multiply a ``(1, prod(kernel))`` matrix per channel, after an im2col copy
and a transpose; here each kernel offset is one broadcast multiply-add over a strided view of
the (padded) input, with no column buffer and the data in its own ``(N, C, *spatial)`` layout.
Written against ``xp`` (numpy or cupy).
"""
from __future__ import annotations

import itertools

from ._im2col import window


def _offsets(kernel):
    return itertools.product(*map(range, kernel))


def _per_channel(w, offsets, nd: int):
    """The weight of kernel position ``offsets`` for every channel, shaped to broadcast
    over ``(N, C, *spatial)``."""
    return w[(slice(None), 0) + tuple(offsets)].reshape((1, -1) + (1,) * nd)


def padded(xp, x, pad):
    return xp.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad]) if any(pad) else x


def forward(xp, x, w, out, kernel, stride, dilate, pad):
    """``y[n, c] = sum_k w[c, 0, k] * x[n, c, window k]``: shape (N, C, *out)."""
    xp_ = padded(xp, x, pad)
    y = xp.zeros(x.shape[:2] + tuple(out), dtype=x.dtype)
    term = xp.empty_like(y)
    lead = (slice(None), slice(None))
    for offsets in _offsets(kernel):
        xp.multiply(xp_[lead + window(offsets, out, stride, dilate)],
                    _per_channel(w, offsets, len(out)), out=term)
        y += term
    return y


def backward(xp, gy, x, w, kernel, stride, dilate, pad, need_data: bool, need_weight: bool):
    """(data gradient or None, weight gradient or None) of :func:`forward`."""
    out, nd = gy.shape[2:], gy.ndim - 2
    lead = (slice(None), slice(None))
    axes = (0,) + tuple(range(2, 2 + nd))
    term = xp.empty_like(gy)
    gw = xp.empty_like(w) if need_weight else None
    xp_ = padded(xp, x, pad) if need_weight else None
    gx = xp.zeros(x.shape[:2] + tuple(s + 2 * p for s, p in zip(x.shape[2:], pad)),
                  dtype=gy.dtype) if need_data else None
    for offsets in _offsets(kernel):
        win = lead + window(offsets, out, stride, dilate)
        if need_weight:
            xp.multiply(gy, xp_[win], out=term)
            gw[(slice(None), 0) + tuple(offsets)] = term.sum(axis=axes)
        if need_data:
            xp.multiply(gy, _per_channel(w, offsets, nd), out=term)
            gx[win] += term
    if need_data:
        gx = xp.ascontiguousarray(gx[lead + tuple(slice(p, p + s) for s, p in
                                                   zip(x.shape[2:], pad))])
    return gx, gw

"""Depthwise convolution (one filter per channel, ``num_group == channels == num_filter``).

A grouped GEMM would multiply a ``(1, prod(kernel))`` matrix per channel, after an im2col copy
and a transpose; here each kernel offset is one broadcast multiply-add over a strided view of
the (padded) input, with no column buffer. The work runs in the data's ``(N, C, *spatial)``
layout, or channels last ``(N, *spatial, C)`` when there are at least twice as many channels
as output columns: each multiply's innermost run is then the channels instead of a short row
(measured, numpy: 1.3-2x faster on MobileNet's 16x16 to 2x2 maps with 32 to 256 channels,
slower with 16 channels on 16 columns or 8 on 32).
Written against ``xp`` (numpy or cupy).
"""
from __future__ import annotations

import itertools

import numpy as np

from ..padding import constant_pad
from ._channel_sums import channel_sums
from ._im2col import window


# stride-1 2-D numpy layers with outputs at least this wide run along whole rows (see
# _rows_forward): 0.66-0.78x the time on MobileNet's 16x16 and 32x32 maps at batch 2 and 32,
# even at 8x8, 1.15-3.7x at 4x4 and 2x2 (measured, one thread)
ROWS_MIN_WIDTH = 12


def _offsets(kernel):
    return itertools.product(*map(range, kernel))


def channels_last(channels: int, out) -> bool:
    """Whether the multiply-adds run channels last (see the module docstring)."""
    return channels >= 2 * out[-1]


def _per_channel(w, offsets, nd: int, last: bool):
    """The weight of kernel position ``offsets`` for every channel, shaped to broadcast
    over the working layout."""
    wk = w[(slice(None), 0) + tuple(offsets)]
    return wk if last else wk.reshape((1, -1) + (1,) * nd)


def _spatial_first(a):
    """``(N, C, *S)`` seen as ``(N, *S, C)`` (a view)."""
    return a.transpose((0,) + tuple(range(2, a.ndim)) + (1,))


def _channels_first(xp, a):
    """``(N, *S, C)`` copied to ``(N, C, *S)``."""
    return xp.ascontiguousarray(a.transpose((0, a.ndim - 1) + tuple(range(1, a.ndim - 1))))


def _interior(shape, pad, last: bool):
    """The index of the unpadded part of a padded array in the working layout."""
    inner = tuple(slice(p, p + s) for s, p in zip(shape[2:], pad))
    return (slice(None),) + inner if last else (slice(None), slice(None)) + inner


def _padded_zeros(xp, shape, pad, dtype, last: bool):
    spatial = tuple(s + 2 * p for s, p in zip(shape[2:], pad))
    full = (shape[0],) + spatial + (shape[1],) if last else tuple(shape[:2]) + spatial
    return xp.zeros(full, dtype=dtype)


def _padded(xp, x, pad, last: bool):
    """``x`` zero-padded, in the working layout (a fresh array, or ``x`` itself)."""
    spatial = [(p, p) for p in pad]
    if last:  # the copy into the padded array also makes the channels-last layout
        return constant_pad(xp, _spatial_first(x), [(0, 0)] + spatial + [(0, 0)])
    return constant_pad(xp, x, [(0, 0), (0, 0)] + spatial) if any(pad) else x


def forward(xp, x, w, out, kernel, stride, dilate, pad):
    """``y[n, c] = sum_k w[c, 0, k] * x[n, c, window k]``: shape (N, C, *out)."""
    nd, last = len(out), channels_last(x.shape[1], out)
    if xp is np and nd == 2 and tuple(stride) == (1, 1) and out[-1] >= ROWS_MIN_WIDTH:
        return _rows_forward(x, w, kernel, dilate, pad)
    xw = _padded(xp, x, pad, last)
    lead = (slice(None),) if last else (slice(None), slice(None))
    shape = (x.shape[0],) + tuple(out) + (x.shape[1],) if last else x.shape[:2] + tuple(out)
    y = xp.empty(shape, dtype=x.dtype)
    term = xp.empty_like(y)
    for k, offsets in enumerate(_offsets(kernel)):
        xp.multiply(xw[lead + window(offsets, out, stride, dilate)],
                    _per_channel(w, offsets, nd, last), out=term if k else y)
        if k:
            y += term
    return _channels_first(xp, y) if last else y


def _rows_forward(x, w, kernel, dilate, pad):
    """:func:`forward` of a stride-1 2-D numpy layer on the padded maps laid out row after
    row: kernel offset ``(i, j)`` reads them shifted by ``i*dh*Wp + j*dw``, so each
    multiply-add runs along whole output rows computed ``Wp`` wide (the extra columns are cut
    off at the end), whatever the channel count."""
    n, c, h, wd = x.shape
    (kh, kw), (dh, dw), (ph, pw) = kernel, dilate, pad
    hp, wp = h + 2 * ph, wd + 2 * pw
    ho, wo = hp - dh * (kh - 1), wp - dw * (kw - 1)
    padded = np.zeros((n, c, hp + 1, wp), dtype=x.dtype)  # a spare row: the last shifts
    padded[:, :, ph:ph + h, pw:pw + wd] = x
    flat = padded.reshape(n, c, -1)
    length = ho * wp
    y = np.empty((n, c, length), dtype=np.result_type(x, w))
    term = np.empty_like(y)
    for k, (i, j) in enumerate(_offsets(kernel)):
        start = i * dh * wp + j * dw
        np.multiply(flat[:, :, start:start + length], w[:, 0, i, j][None, :, None],
                    out=term if k else y)
        if k:
            y += term
    return np.ascontiguousarray(y.reshape(n, c, ho, wp)[..., :wo])


def backward(xp, gy, x, w, kernel, stride, dilate, pad, need_data: bool, need_weight: bool,
             full_pad=None):
    """(data gradient or None, weight gradient or None) of :func:`forward`.

    ``full_pad``: the padding that makes the data gradient a stride-1 layer's forward of the
    output gradient with the flipped kernel (see :func:`._im2col.transposed_pad`); given, it
    runs so (reads strided, adds contiguous: 0.5x the time of adding into strided windows of
    the gradient, MobileNet's layers at batch 32)."""
    out, nd = gy.shape[2:], gy.ndim - 2
    gx = None
    if need_data and full_pad is not None:
        flipped = w[(slice(None), slice(None)) + (slice(None, None, -1),) * nd]
        gx = forward(xp, gy, flipped, x.shape[2:], kernel, (1,) * nd, dilate, full_pad)
        need_data = False
    last = channels_last(x.shape[1], out)
    if last:
        gy = xp.ascontiguousarray(_spatial_first(gy))
        lead, axis = (slice(None),), nd + 1
    else:
        lead, axis = (slice(None), slice(None)), 1
    term = xp.empty_like(gy)
    gw = xp.empty_like(w) if need_weight else None
    xw = _padded(xp, x, pad, last) if need_weight else None
    if need_data:
        gx = _padded_zeros(xp, x.shape, pad, gy.dtype, last)
    for offsets in _offsets(kernel) if need_weight or need_data else ():
        win = lead + window(offsets, out, stride, dilate)
        if need_weight:
            xp.multiply(gy, xw[win], out=term)
            gw[(slice(None), 0) + tuple(offsets)] = channel_sums(xp, axis, term)
        if need_data:
            xp.multiply(gy, _per_channel(w, offsets, nd, last), out=term)
            gx[win] += term
    if need_data:
        gx = gx[_interior(x.shape, pad, last)]
        gx = _channels_first(xp, gx) if last else xp.ascontiguousarray(gx)
    return gx, gw

"""Stride-1 2-D convolution of large maps as shifted GEMMs, a block of output rows at a time
(numpy).

:mod:`._shifted` stacks ``kw`` column-shifted copies of the whole padded map, so each kernel
row is one product against one leading dimension: ``kw`` copies of the map instead of
im2col's ``kh*kw``. On a large map those copies no longer fit in the cache before the
products read them. Here they are made for one block of output rows at a time (the rows it
reads: ``dh*(kh-1)`` more than it has), straight from the unpadded data into a buffer reused
from block to block, while the previous block's are still cached; the products and the
accumulation of the ``kh`` kernel rows run on the block.

Against im2col by row blocks (:func:`._im2col.blocked_forward`, ``blocked_weight_grad``) the
products are the same size and run as fast (OpenBLAS, one thread: 39-41 ms for VGG-16's
conv1_2 either way), and a block copies ``kw*(rows + dh*(kh-1))`` rows of the map in place of
``kh*kw*rows``.
"""
from __future__ import annotations

import numpy as np

from ._shifted import flipped_rows, weight_from_rows, weight_rows


def _stacked_blocks(x, kernel: tuple, dilate: tuple, pad: tuple, budget: int):
    """Per sample and block of output rows: ``(sample, first row, end row, stacked)``, where
    ``stacked`` (``(kw*C, span*Wp)``, rows ordered ``(j, c)``) holds the ``span`` padded
    rows the block reads, copy ``j`` shifted left by ``j*dw`` columns (zeros past the map), in
    at most about ``budget`` elements (one output row at least). The buffer is reused: use
    each block before taking the next."""
    n, c, h, w = x.shape
    (kh, kw), (dh, dw), (ph, pw) = kernel, dilate, pad
    wp = w + 2 * pw
    ho = h + 2 * ph - dh * (kh - 1)
    reach = dh * (kh - 1)
    rows = max(1, budget // (kw * c * wp) - reach)
    buffers: dict[int, np.ndarray] = {}
    for s in range(n):
        for r0 in range(0, ho, rows):
            r1 = min(ho, r0 + rows)
            span = r1 - r0 + reach
            buf = buffers.get(span)
            if buf is None:  # zeros where no copy writes: the shifted copies' ends
                buf = buffers[span] = np.zeros((kw, c, span, wp), dtype=x.dtype)
            # padded rows r0 .. r0+span-1 are data rows r0-ph ..; those outside are padding
            d0, d1 = max(0, r0 - ph), min(h, r0 + span - ph)
            q0, q1 = d0 - (r0 - ph), d1 - (r0 - ph)
            for j in range(kw):
                shift = j * dw  # copy j's column q is padded column q + shift
                first, end = max(0, pw - shift), min(wp - shift, pw + w - shift)
                if q0:
                    buf[j, :, :q0, first:end] = 0
                if q1 < span:
                    buf[j, :, q1:, first:end] = 0
                buf[j, :, q0:q1, first:end] = x[s, :, d0:d1,
                                                first + shift - pw:end + shift - pw]
            yield s, r0, r1, buf.reshape(kw * c, span * wp)


def convolve(x, weight_rows, kernel: tuple, dilate: tuple, pad: tuple, budget: int):
    """The stride-1 convolution of ``x`` (N, C, H, W) with a kernel given as
    ``weight_rows`` (kh, F, kw*C) (kernel row ``i``'s weights in ``(j, c)`` order, as
    :func:`._shifted.convolve` takes them): ``(N, F, Ho, Wo)``."""
    kh, f = weight_rows.shape[:2]
    n, _, h, w = x.shape
    wp = w + 2 * pad[1]
    ho, wo = h + 2 * pad[0] - dilate[0] * (kh - 1), wp - dilate[1] * (kernel[1] - 1)
    y = np.empty((n, f, ho, wo), dtype=np.result_type(x, weight_rows))
    term = None
    for s, r0, r1, stacked in _stacked_blocks(x, kernel, dilate, pad, budget):
        length = (r1 - r0) * wp
        acc = weight_rows[0] @ stacked[:, :length]
        if term is None or term.shape != acc.shape:
            term = np.empty_like(acc)
        for i in range(1, kh):
            start = i * dilate[0] * wp
            acc += np.matmul(weight_rows[i], stacked[:, start:start + length], out=term)
        y[s, :, r0:r1] = acc.reshape(f, r1 - r0, wp)[:, :, :wo]
    return y


def forward(x, w, dilate: tuple, pad: tuple, budget: int):
    """The stride-1 convolution of ``x`` (N, C, H, W) with ``w`` (F, C, kh, kw)."""
    return convolve(x, weight_rows(w), w.shape[2:], dilate, pad, budget)


def data_grad(gy, w, dilate: tuple, full_pad: tuple, budget: int):
    """The data gradient ``(N, C, H, W)`` of a stride-1 convolution with weight ``w``
    (F, C, kh, kw) for output gradient ``gy``: the convolution of ``gy`` with the flipped,
    transposed kernel, padded by ``full_pad`` (:func:`._im2col.transposed_pad`)."""
    return convolve(gy, flipped_rows(w), w.shape[2:], dilate, full_pad, budget)


def weight_grad(x, gy, kernel: tuple, dilate: tuple, pad: tuple, budget: int, out=None):
    """The weight gradient ``(F, C, kh, kw)`` of :func:`forward` for output gradient ``gy``
    (N, F, Ho, Wo), summed over blocks: per kernel row ``i``, the block's stacked rows from
    ``i*dh`` times the block's gradient on the ``Wp``-wide grid (zeros past ``Wo``),
    positions first, so that both operands have their long axis in rows (as
    :func:`._im2col.blocked_weight_grad`). Written into ``out`` when given."""
    f, wo = gy.shape[1], gy.shape[3]
    kh, kw = kernel
    grad = None  # (kh, kw*C, F)
    for s, r0, r1, stacked in _stacked_blocks(x, kernel, dilate, pad, budget):
        wp = stacked.shape[1] // (r1 - r0 + dilate[0] * (kh - 1))
        length = (r1 - r0) * wp
        spread = np.zeros((r1 - r0, wp, f), dtype=gy.dtype)
        spread[:, :wo] = gy[s, :, r0:r1].transpose(1, 2, 0)
        spread = spread.reshape(length, f)
        if grad is None:
            grad = np.zeros((kh, stacked.shape[0], f), dtype=np.result_type(x, gy))
        for i in range(kh):
            start = i * dilate[0] * wp
            grad[i] += stacked[:, start:start + length] @ spread
    return weight_from_rows(grad, kw, out)

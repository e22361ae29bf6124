"""Stride-1 2-D convolution as a few GEMMs over shifted copies of the padded map (numpy).

Laid out row after row, a padded ``(Hp, Wp)`` map shifted by ``i*dh*Wp + j*dw`` elements is
what kernel offset ``(i, j)`` reads, if every output row is computed ``Wp`` wide (``Wo``
valid entries, the rest cut off at the end). Stacking ``kw`` copies of the map, the ``j``-th
shifted left by ``j*dw`` columns, puts a kernel row's ``kw*C`` inputs in one matrix with one
leading dimension, so the convolution is ``kh`` products ``(F, kw*C) @ (kw*C, Ho*Wp)`` per
sample, summed: the map is copied ``kw`` times instead of im2col's ``kh*kw``.

That pays where im2col's copy costs about what its product does, on layers padded to keep
their size (Convolution's ``SHIFTED_*`` thresholds say where; measured, numpy, one thread):
- data gradients, the forward of the output gradient with the flipped, transposed kernel
  (see :func:`._im2col.transposed_pad`), up to a couple of hundred channels on maps up to
  64 wide: 0.37-0.95x the column routes' time at batch 1-2, 0.29-0.76x at 16-32;
- forward passes with 8-32 channels, keeping the stacked rows, from which the weight gradient
  is ``kh`` products ``(kw*C, Ho*Wp) @ (Ho*Wp, F)`` per sample: forward + backward
  0.60-0.98x.
"""
from __future__ import annotations

import numpy as np


def stacked_rows(x, kernel: tuple, dilate: tuple, pad: tuple):
    """``kw`` column-shifted copies of ``x`` (N, C, H, W) zero-padded by ``pad``:
    ``(N, kw*C, Hp*Wp)``, rows ordered ``(j, c)``, and ``Hp``, ``Wp``. Copy ``j`` holds the
    padded map shifted left by ``j*dw`` columns; zeros fill each row's end, which only cut-off
    outputs read."""
    n, c, h, w = x.shape
    kw, dw = kernel[1], dilate[1]
    ph, pw = pad
    hp, wp = h + 2 * ph, w + 2 * pw
    rows = np.zeros((n, kw, c, hp, wp), dtype=x.dtype)
    for j in range(kw):
        s = j * dw  # column q of copy j is padded column q + s, data column q + s - pw
        first, end = max(0, pw - s), min(wp - s, pw + w - s)
        rows[:, j, :, ph:ph + h, first:end] = x[:, :, :, first + s - pw:end + s - pw]
    return rows.reshape(n, kw * c, hp * wp), hp, wp


def convolve(x, weight_rows, kernel: tuple, dilate: tuple, pad: tuple, rows=None):
    """The stride-1 convolution of ``x`` (N, C, H, W) with a kernel given as
    ``weight_rows`` (kh, F, kw*C) (kernel row ``i``'s weights in :func:`stacked_rows`'
    ``(j, c)`` order): ``(N, F, Ho, Wo)``. ``rows``: ``x``'s stacked rows, if made."""
    kh, f = weight_rows.shape[:2]
    n = x.shape[0]
    rows, hp, wp = rows or stacked_rows(x, kernel, dilate, pad)
    ho, wo = hp - dilate[0] * (kernel[0] - 1), wp - dilate[1] * (kernel[1] - 1)
    length = ho * wp
    y = np.matmul(weight_rows[0], rows[:, :, :length])
    term = np.empty_like(y) if kh > 1 else None
    for i in range(1, kh):
        start = i * dilate[0] * wp
        y += np.matmul(weight_rows[i], rows[:, :, start:start + length], out=term)
    y = y.reshape(n, f, ho, wp)
    return y if wo == wp else np.ascontiguousarray(y[..., :wo])


def weight_rows(w):
    """``w`` (F, C, kh, kw) as the ``(kh, F, kw*C)`` rows :func:`convolve` takes: kernel row
    ``i``'s weights in ``(j, c)`` order."""
    f, c, kh, kw = w.shape
    return np.ascontiguousarray(w.transpose(2, 0, 3, 1)).reshape(kh, f, kw * c)


def flipped_rows(w):
    """The rows (``(kh, C, kw*F)``) of the flipped, transposed kernel: the data gradient's
    convolution, ``[i, c, (j, f)] = w[f, c, kh-1-i, kw-1-j]``."""
    f, c, kh, kw = w.shape
    flipped = np.ascontiguousarray(w[:, :, ::-1, ::-1].transpose(2, 1, 3, 0))
    return flipped.reshape(kh, c, kw * f)


def weight_from_rows(grad, kw: int, out=None):
    """A weight gradient summed as ``(kh, (j, c), F)`` laid out as ``(F, C, kh, kw)``;
    written into ``out`` when given."""
    kh, f = grad.shape[0], grad.shape[2]
    grad = grad.reshape(kh, kw, -1, f).transpose(3, 2, 0, 1)
    if out is None:
        return np.ascontiguousarray(grad)
    out[...] = grad
    return out


def data_grad(gy, w, dilate: tuple, full_pad: tuple):
    """The data gradient ``(N, C, H, W)`` of a stride-1, ungrouped 2-D convolution with
    weight ``w`` (F, C, kh, kw), for output gradient ``gy`` (N, F, Ho, Wo); ``full_pad`` as
    :func:`._im2col.transposed_pad` gives it."""
    return convolve(gy, flipped_rows(w), w.shape[2:], dilate, full_pad)


def forward(x, w, dilate: tuple, pad: tuple):
    """The stride-1 convolution of ``x`` (N, C, H, W) with ``w`` (F, C, kh, kw), and the
    stacked rows it read (``(rows, Hp, Wp)``, for :func:`weight_grad`)."""
    rows = stacked_rows(x, w.shape[2:], dilate, pad)
    return convolve(x, weight_rows(w), w.shape[2:], dilate, pad, rows), rows


def weight_grad(rows, gy, kernel: tuple, dilate: tuple, out=None):
    """The weight gradient ``(F, C, kh, kw)`` of :func:`forward` from its stacked ``rows``
    and the output gradient ``gy`` (N, F, Ho, Wo); written into ``out`` when given."""
    rows, _, wp = rows
    n, f, ho, wo = gy.shape
    kh, kw = kernel
    length = ho * wp
    # gy on the rows' Wp-wide grid, positions first: (N, Ho*Wp, F), zero past Wo
    spread = np.zeros((n, ho, wp, f), dtype=gy.dtype)
    spread[:, :, :wo] = gy.transpose(0, 2, 3, 1)
    spread = spread.reshape(n, length, f)
    grad = np.empty((kh, rows.shape[1], f), dtype=np.result_type(rows, gy))
    for i in range(kh):
        start = i * dilate[0] * wp
        np.sum(np.matmul(rows[:, :, start:start + length], spread), axis=0, out=grad[i])
    return weight_from_rows(grad, kw, out)

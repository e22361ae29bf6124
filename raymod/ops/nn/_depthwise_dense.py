"""Depthwise 2-D convolution on tiny maps as one dense matrix per channel (numpy).

On a map of ``L`` positions with ``Lo`` outputs, a depthwise layer is per channel ``c`` a
linear map ``y[n, c] = M[c] @ x[n, c]`` with ``M[c] = sum_k w[c, k] P[k]``: ``P[k]`` is the
fixed ``(Lo, L)`` 0/1 matrix of which input position kernel offset ``k`` reads for each
output (padding reads nothing). All channels' ``M`` are then one GEMM, ``w (C, K) @ P
(K, Lo*L)``, and the layer one stacked matrix-vector product. At MobileNet's 4x4 maps
(``C*Lo*L`` up to 32K) this is a handful of calls where im2col's gather, the grouped
product and col2im's bincount take several more. Forward + backward against the grouped
route (measured, numpy, one thread, batch 2 / 8 / 32): 0.64-0.88x on 4x4 maps of 64-128
channels, 0.28-0.35x at batch 32 with stride 2, 1.06-1.09x on 8x8 maps at stride 2 and
batch 2; MobileNet's whole step at batch 2 0.95-0.97x. On larger maps ``M`` grows with
``L*Lo`` and the route loses: 64 channels at 8x8, stride 2 (65K elements), forward 1.08x;
stride 1 (262K), 1.8-5.6x.

Backward: the data gradient is ``gy[n, c] @ M[c]``; the weight gradient
``sum_n sum_o gy[n, c, o] * cols[n, c, k, o]``, with the columns ``cols = x @ P^T`` one more
GEMM. Forward keeps ``M`` (at most ``MAX_DENSE`` elements) for backward.
"""
from __future__ import annotations

import functools

import numpy as np

#: per-channel matrices up to this many elements in all (``C * Lo * L``) take this route
MAX_DENSE = 1 << 15
#: on maps of at least this many positions: on 2x2 maps the stacked products' cost per
#: matrix outgrows their work from batch 8 (forward + backward 1.17-1.34x the grouped
#: route's at (8-32, 256, 2, 2); 0.90x at batch 2)
MIN_POSITIONS = 16


def _matvec_as_matmul(a, v):
    """``a @ v`` over stacks of matrices and vectors, for numpy before 2.2."""
    return np.matmul(a, v[..., None])[..., 0]


def _vecmat_as_matmul(v, a):
    """``v @ a`` over stacks of vectors and matrices, for numpy before 2.2."""
    return np.matmul(v[..., None, :], a)[..., 0, :]


# numpy 2.2's stacked matrix-vector gufuncs (one C loop, no column views)
_matvec = getattr(np, "matvec", None) or _matvec_as_matmul
_vecmat = getattr(np, "vecmat", None) or _vecmat_as_matmul


def applies(x_shape: tuple, out: tuple) -> bool:
    """Whether a 2-D depthwise layer's maps are small enough (``MAX_DENSE``) and not too
    small (``MIN_POSITIONS``) for this route."""
    positions = x_shape[2] * x_shape[3]
    return MIN_POSITIONS <= positions and x_shape[1] * positions * out[0] * out[1] <= MAX_DENSE


@functools.lru_cache(maxsize=64)
def taps(spatial: tuple, out: tuple, kernel: tuple, stride: tuple, dilate: tuple,
         pad: tuple, dtype) -> np.ndarray:
    """``P`` as a read-only ``(K, Lo, L)`` array: ``P[k, o, i] = 1`` where output position
    ``o`` reads input position ``i`` at kernel offset ``k`` (row-major positions)."""
    (h, w), (ho, wo) = spatial, out
    ki, kj = np.meshgrid(np.arange(kernel[0]), np.arange(kernel[1]), indexing="ij")
    oy, ox = np.meshgrid(np.arange(ho), np.arange(wo), indexing="ij")
    # (K, Lo): the input row and column each offset reads for each output
    iy = oy.reshape(1, -1) * stride[0] - pad[0] + ki.reshape(-1, 1) * dilate[0]
    ix = ox.reshape(1, -1) * stride[1] - pad[1] + kj.reshape(-1, 1) * dilate[1]
    inside = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
    k, o = np.nonzero(inside)
    p = np.zeros((ki.size, ho * wo, h * w), dtype)
    p[k, o, iy[inside] * w + ix[inside]] = 1
    p.flags.writeable = False
    return p


def forward(x, w, out: tuple, kernel: tuple, stride: tuple, dilate: tuple, pad: tuple):
    """The layer's output ``(N, C, Ho, Wo)`` and the per-channel matrices ``M`` (C, Lo, L)
    that :func:`backward` takes."""
    n, c = x.shape[:2]
    p = taps(x.shape[2:], out, kernel, stride, dilate, pad, x.dtype)
    k, lo, length = p.shape
    m = (w.reshape(c, k) @ p.reshape(k, lo * length)).reshape(c, lo, length)
    y = _matvec(m, x.reshape(n, c, length))
    return y.reshape((n, c) + out), m


def backward(gy, x, m, kernel: tuple, stride: tuple, dilate: tuple, pad: tuple,
             need_data: bool, need_weight: bool):
    """The data and weight gradients (None where not needed) from the output gradient
    ``gy``, the data ``x`` and :func:`forward`'s matrices ``m``."""
    n, c = x.shape[:2]
    out = gy.shape[2:]
    g3 = gy.reshape(n, c, -1)
    dx = _vecmat(g3, m).reshape(x.shape) if need_data else None
    dw = None
    if need_weight:
        p = taps(x.shape[2:], out, kernel, stride, dilate, pad, x.dtype)
        k, lo, length = p.shape
        cols = (x.reshape(n * c, length) @ p.reshape(k * lo, length).T).reshape(n, c, k, lo)
        per_sample = _matvec(cols, g3)  # (N, C, K)
        dw = per_sample[0] if n == 1 else np.add.reduce(per_sample, axis=0)
        dw = dw.reshape((c, 1) + kernel)
    return dx, dw

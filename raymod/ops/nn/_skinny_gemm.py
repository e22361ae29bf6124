"""GEMMs of a dense layer with a small batch, cut into cache-sized slices of the weight
(also a convolution's forward on maps of a few positions: the same product, columns for rows).

With a handful of rows (batch 2 to 8) OpenBLAS's sgemm packs the whole (large) weight before
multiplying, so ``x @ W.T``, ``gy @ W`` and ``gy.T @ x`` run at a third of memory speed
(measured on one thread, numpy 2 / OpenBLAS 0.3: a (2, 9216) x (9216, 4096) product takes
30 ms whole, 8 ms as 32-row slices of ``W``). Slicing ``W`` into blocks of rows that fit the
cache makes each call small enough to stream. Only numpy takes these paths: on CuPy one
call is the fast way, so every function falls back to the plain product there.
"""
from __future__ import annotations

import numpy as np

# At most this many rows of data (batch) take the sliced path: from 32 rows up the whole
# product is as fast or faster, and the data gradient already gains nothing at 8 (measured
# as above).
MAX_ROWS = 8
DATA_GRAD_MAX_ROWS = 4
# Below this many weight elements the per-slice call overhead outweighs the gain.
MIN_WEIGHT = 1 << 20
# Bytes of weight per slice: forward, data-gradient and weight-gradient products (measured,
# the best of 8 to 64-row slices of a 9216-column weight).
FORWARD_BYTES = 1 << 20
# With more than this many rows the forward slices shrink to FORWARD_NARROW_BYTES (at 8
# rows: 0.65-0.77x the whole product's time against 1.07x with 1 MiB slices; measured on
# (512, 4608) and (512, 2304) weights, the 2x2 maps of ResNet-18's and VGG's last layers).
FORWARD_WIDE_ROWS = 4
FORWARD_NARROW_BYTES = 1 << 18
DATA_GRAD_BYTES = 1 << 19
WEIGHT_GRAD_BYTES = 1 << 18


def sliced(xp, rows: int, weight, max_rows: int = MAX_ROWS) -> bool:
    """Whether a product of ``rows`` data rows with ``weight`` takes the sliced path."""
    return xp is np and rows <= max_rows and weight.size >= MIN_WEIGHT


def _block(weight, budget: int) -> int:
    return max(8, budget // (weight.shape[1] * weight.itemsize))


def forward(xp, x, weight):
    """``x @ weight.T`` for x (M, K) and weight (H, K): (M, H)."""
    if not sliced(xp, x.shape[0], weight):
        return x @ weight.T
    return np.ascontiguousarray(times_columns(xp, weight, np.ascontiguousarray(x.T)).T)


def times_columns(xp, weight, cols):
    """``weight @ cols`` for weight (H, K) and cols (K, M) with few columns: the rows of
    :func:`forward`, or the positions of a convolution's forward on a map of a few pixels."""
    m = cols.shape[1]
    if not sliced(xp, m, weight):
        return xp.matmul(weight, cols)
    y = np.empty((weight.shape[0], m), dtype=np.result_type(cols, weight))
    step = _block(weight, FORWARD_BYTES if m <= FORWARD_WIDE_ROWS else FORWARD_NARROW_BYTES)
    for s in range(0, weight.shape[0], step):
        np.matmul(weight[s:s + step], cols, out=y[s:s + step])
    return y


def data_grad(xp, gy, weight):
    """``gy @ weight`` for gy (M, H) and weight (H, K): (M, K)."""
    if not sliced(xp, gy.shape[0], weight, DATA_GRAD_MAX_ROWS):
        return gy @ weight
    step = _block(weight, DATA_GRAD_BYTES)
    dx = gy[:, :step] @ weight[:step]
    for s in range(step, weight.shape[0], step):
        dx += gy[:, s:s + step] @ weight[s:s + step]
    return dx


def weight_grad(xp, gy, x, out=None):
    """``gy.T @ x`` for gy (M, H) and x (M, K): (H, K), written into ``out`` when given."""
    h, k = gy.shape[1], x.shape[1]
    if not (xp is np and gy.shape[0] <= MAX_ROWS and h * k >= MIN_WEIGHT):
        return xp.matmul(gy.T, x, out=out)
    if out is None:
        out = np.empty((h, k), dtype=np.result_type(gy, x))
    step = max(8, WEIGHT_GRAD_BYTES // (k * out.itemsize))
    for s in range(0, h, step):
        np.matmul(gy[:, s:s + step].T, x, out=out[s:s + step])
    return out

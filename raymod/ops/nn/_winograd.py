"""Winograd F(2x2, 3x3): stride-1, undilated 3x3 2-D convolution with 2.25x fewer multiplies.

The output is cut into 2x2 tiles; each reads a 4x4 input tile. With the transforms
``B^T`` (4x4), ``G`` (4x3) and ``A^T`` (2x4) of Lavin & Gray (2016), one output tile is
``A^T [(G w G^T) . (B^T d B)] A``, so a layer is 16 independent GEMMs
``(F, C) @ (C, tiles)``, one per position of the 4x4 transformed tile.

Both gradients are the exact adjoints of that formula, so they too are 16 GEMMs:

- weight: ``dw = G^T [sum over tiles (A dy A^T) . (B^T d B)] G`` (the input transform
  ``B^T d B`` is the one forward made and kept);
- data: ``dd = B [sum over filters (G w G^T) . (A dy A^T)] B^T``, tiles overlap-added.

Arrays are channel-major, ``(C, N, rows, cols)``, so tiles of the whole batch are the GEMM
columns and no transform needs a transpose. Every transform is a handful of strided slice
additions; all of it is written against ``xp`` (numpy or cupy).
"""
from __future__ import annotations

import math

from ._im2col import times_transposed


def _tiles(out: tuple) -> tuple[int, int]:
    return math.ceil(out[0] / 2), math.ceil(out[1] / 2)


def _filter_rows(xp, k, dst):
    """``G`` along one axis: three kernel values ``k`` to four transformed ``dst``."""
    xp.add(k[0], k[2], out=dst[1])
    xp.subtract(dst[1], k[1], out=dst[2])
    dst[1] += k[1]
    dst[1] *= 0.5
    dst[2] *= 0.5
    dst[0] = k[0]
    dst[3] = k[2]


def transform_weight(xp, w):
    """``G w G^T`` for a weight (F, C, 3, 3), as a contiguous (16, F, C) stack."""
    f, c = w.shape[:2]
    rows = xp.empty((4, 3, f, c), dtype=w.dtype)
    _filter_rows(xp, [w[:, :, i].transpose(2, 0, 1) for i in range(3)], rows)
    full = xp.empty((4, 4, f, c), dtype=w.dtype)
    for a in range(4):
        _filter_rows(xp, rows[a], full[a])
    return full.reshape(16, f, c)


def _input_rows(xp, rows, dst):
    """``B^T`` along one axis: four strided views ``rows`` to the four transformed ``dst``."""
    r0, r1, r2, r3 = rows
    xp.subtract(r0, r2, out=dst[0])
    xp.add(r1, r2, out=dst[1])
    xp.subtract(r2, r1, out=dst[2])
    xp.subtract(r1, r3, out=dst[3])


def transform_input(xp, x, pad: tuple, out: tuple):
    """``B^T d B`` of every 4x4 input tile of ``x`` (N, C, H, W): a (16, C, N*tiles) array."""
    n, c, h, w = x.shape
    th, tw = _tiles(out)
    # padded so that every tile (2*th + 2 rows, 2*tw + 2 cols) lies inside
    extra_h, extra_w = 2 * th + 2 - (h + 2 * pad[0]), 2 * tw + 2 - (w + 2 * pad[1])
    xt = xp.zeros((c, n, h + 2 * pad[0] + extra_h, w + 2 * pad[1] + extra_w), dtype=x.dtype)
    xt[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w] = x.swapaxes(0, 1)
    cols_t = xp.empty((4, c, n, th, xt.shape[3]), dtype=x.dtype)
    _input_rows(xp, [xt[:, :, i:i + 2 * th:2] for i in range(4)], cols_t)
    d = xp.empty((4, 4, c, n, th, tw), dtype=x.dtype)
    for a in range(4):
        _input_rows(xp, [cols_t[a][..., j:j + 2 * tw:2] for j in range(4)], d[a])
    return d.reshape(16, c, n * th * tw)


def _output_rows(xp, m, dst):
    """``A^T`` along one axis: four transformed values ``m`` to two outputs ``dst``."""
    xp.add(m[0], m[1], out=dst[0])
    dst[0] += m[2]
    xp.subtract(m[1], m[2], out=dst[1])
    dst[1] -= m[3]


def inverse_output(xp, y, n: int, out: tuple):
    """``A^T Y A`` of the (16, F, N*tiles) GEMM results: the output (N, F, Ho, Wo)."""
    th, tw = _tiles(out)
    f = y.shape[1]
    y = y.reshape(4, 4, f, n, th, tw)
    rows = xp.empty((2, 4, f, n, th, tw), dtype=y.dtype)  # (output row, transformed col)
    for b in range(4):
        _output_rows(xp, y[:, b], rows[:, b])
    z = xp.empty((f, n, th, 2, tw, 2), dtype=y.dtype)
    for i in range(2):
        _output_rows(xp, rows[i], [z[:, :, :, i, :, 0], z[:, :, :, i, :, 1]])
    z = z.reshape(f, n, 2 * th, 2 * tw)[:, :, :out[0], :out[1]]
    return xp.ascontiguousarray(z.swapaxes(0, 1))


def transform_grad(xp, gy):
    """``A dy A^T`` of every 2x2 tile of the output gradient (N, F, Ho, Wo): (16, F, N*tiles)."""
    n, f = gy.shape[:2]
    th, tw = _tiles(gy.shape[2:])
    g = xp.zeros((f, n, 2 * th, 2 * tw), dtype=gy.dtype)
    g[:, :, :gy.shape[2], :gy.shape[3]] = gy.swapaxes(0, 1)
    g = g.reshape(f, n, th, 2, tw, 2)
    rows = xp.empty((4, f, n, th, 2 * tw), dtype=gy.dtype).reshape(4, f, n, th, tw, 2)
    _grad_rows(xp, g[:, :, :, 0], g[:, :, :, 1], rows)
    t = xp.empty((4, 4, f, n, th, tw), dtype=gy.dtype)
    for a in range(4):
        _grad_rows(xp, rows[a][..., 0], rows[a][..., 1], t[a])
    return t.reshape(16, f, n * th * tw)


def _grad_rows(xp, r0, r1, dst):
    """``A`` along one axis (the adjoint of :func:`_output_rows`): two values to four."""
    dst[0] = r0
    xp.add(r0, r1, out=dst[1])
    xp.subtract(r0, r1, out=dst[2])
    xp.negative(r1, out=dst[3])


def _filter_adjoint(xp, m, dst):
    """``G^T`` along one axis: four transformed values ``m`` to three kernel values ``dst``."""
    xp.add(m[1], m[2], out=dst[0])
    dst[0] *= 0.5
    xp.add(dst[0], m[3], out=dst[2])
    dst[0] += m[0]
    xp.subtract(m[1], m[2], out=dst[1])
    dst[1] *= 0.5


def weight_grad(xp, gt, d, shape):
    """``G^T [sum over tiles gt . d] G``: the (F, C, 3, 3) weight gradient."""
    f, c = shape[:2]
    m = times_transposed(xp, gt, d).reshape(4, 4, f, c)  # (16, F, C) products
    rows = xp.empty((3, 4, f, c), dtype=m.dtype)
    _filter_adjoint(xp, m, rows)
    out = xp.empty((f, c, 3, 3), dtype=m.dtype)
    for i in range(3):
        _filter_adjoint(xp, rows[i], [out[:, :, i, j] for j in range(3)])
    return out


def _data_rows(xp, v, targets):
    """``B`` along one axis (the adjoint of :func:`_input_rows`): four transformed values
    ``v`` added into four (overlapping, strided) views ``targets``."""
    t0, t1, t2, t3 = targets
    t0 += v[0]
    t1 += v[1]
    t1 -= v[2]
    t1 += v[3]
    t2 += v[1]
    t2 += v[2]
    t2 -= v[0]
    t3 -= v[3]


def data_grad(xp, wt, gt, shape, pad: tuple, out: tuple):
    """``B [sum over filters wt . gt] B^T`` with the tiles overlap-added: the data gradient
    (N, C, H, W) from the transformed weight (16, F, C) and output gradient (16, F, P)."""
    n, c, h, w = shape
    th, tw = _tiles(out)
    v = xp.matmul(wt.swapaxes(1, 2), gt).reshape(4, 4, c, n, th, tw)
    width = 2 * tw + 2
    rows = xp.zeros((4, c, n, th, width), dtype=v.dtype)
    for a in range(4):
        _data_rows(xp, v[a], [rows[a][..., j:j + 2 * tw:2] for j in range(4)])
    acc = xp.zeros((c, n, 2 * th + 2, width), dtype=v.dtype)
    _data_rows(xp, rows, [acc[:, :, i:i + 2 * th:2] for i in range(4)])
    acc = acc[:, :, pad[0]:pad[0] + h, pad[1]:pad[1] + w]
    return xp.ascontiguousarray(acc.swapaxes(0, 1))

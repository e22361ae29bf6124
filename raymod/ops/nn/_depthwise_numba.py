"""MobileNet's depthwise layer (3x3, stride 1, padded by 1, one filter per channel) as compiled
loops, where numba is installed.

numpy runs a depthwise layer as one pass over the maps per kernel offset (``_depthwise``), or
through columns: memory-bound, MobileNet's 3x3 layers at 224x224 took 2.6-4.6x MXNet's (oneDNN)
time. Here each output row is one expression of the nine taps over three input rows, which
LLVM vectorises; the data gradient is the same loop over the output gradient with the kernel
flipped, and the weight gradient nine float64 sums per channel in one sweep. Forward and
backward, one thread, 2-core Xeon: 0.63 ms against numpy's 2.84-2.97 ms at batch 2 (8 x 112^2,
32 x 56^2), 0.39 against 1.10 at 128 x 14^2, 12.5 against 64.6 ms at batch 32 (32 x 56^2);
MXNet's own layers take 0.4-0.9 ms at batch 2. A loop over any kernel shape or stride, with
the taps as a loop, did not vectorise (0.69-0.76 ms forward where this takes 0.17): other
geometries keep numpy's routes.

``pip install 'raymod[numba]'`` brings numba; without it (or with ``RAYMOD_NUMBA=0``) the numpy
routes run. The taps are added in another order than numpy's routes add them, so the two
agree to float rounding (1-4e-7 relative in float32), not to the bit.
"""
from __future__ import annotations

import os

import numpy as np

try:  # an optional extra: the numpy routes stand in without it
    import numba
except ImportError:  # pragma: no cover - exercised where numba is missing
    numba = None


def available() -> bool:
    """Whether the compiled loops run: numba imports and ``RAYMOD_NUMBA`` is not ``0``."""
    return numba is not None and os.environ.get("RAYMOD_NUMBA", "1") != "0"


#: maps narrower than this keep numpy's routes: at batch 2 their per-call costs (the pads, the
#: dispatch) outweigh the loops' (forward + backward 0.15 against 0.17 ms at 16x16, 0.14
#: against 0.11 at 8x8, 0.12 against 0.07 at 4x4)
MIN_WIDTH = 16


def applies(x_shape: tuple, kernel: tuple, stride: tuple, dilate: tuple, pad: tuple) -> bool:
    """Whether a depthwise layer with data of ``x_shape`` has the geometry these loops take."""
    return (kernel == (3, 3) and stride == (1, 1) and dilate == (1, 1) and pad == (1, 1)
            and len(x_shape) == 4 and x_shape[-1] >= MIN_WIDTH)


if numba is not None:
    @numba.njit(cache=True, nogil=True, fastmath=True)
    def _correlate3x3(xp, w, out):  # pragma: no cover - compiled
        """``out[b, c]``: ``xp[b, c]`` (padded by 1) correlated with ``w[c, 0]`` (3x3)."""
        n, c, oh, ow = out.shape
        for b in range(n):
            for ch in range(c):
                w00, w01, w02 = w[ch, 0, 0, 0], w[ch, 0, 0, 1], w[ch, 0, 0, 2]
                w10, w11, w12 = w[ch, 0, 1, 0], w[ch, 0, 1, 1], w[ch, 0, 1, 2]
                w20, w21, w22 = w[ch, 0, 2, 0], w[ch, 0, 2, 1], w[ch, 0, 2, 2]
                for oy in range(oh):
                    r0, r1, r2 = xp[b, ch, oy], xp[b, ch, oy + 1], xp[b, ch, oy + 2]
                    o = out[b, ch, oy]
                    for ox in range(ow):
                        o[ox] = (w00 * r0[ox] + w01 * r0[ox + 1] + w02 * r0[ox + 2]
                                 + w10 * r1[ox] + w11 * r1[ox + 1] + w12 * r1[ox + 2]
                                 + w20 * r2[ox] + w21 * r2[ox + 1] + w22 * r2[ox + 2])
        return out

    @numba.njit(cache=True, nogil=True, fastmath=True)
    def _weight_grad3x3(gy, xp, dw):  # pragma: no cover - compiled
        """``dw[c, 0, i, j]``: the sum of ``gy[b, c] * xp[b, c]`` shifted by ``(i, j)``."""
        n, c, oh, ow = gy.shape
        for ch in range(c):
            a00 = a01 = a02 = a10 = a11 = a12 = a20 = a21 = a22 = 0.0  # float64 sums
            for b in range(n):
                for oy in range(oh):
                    g = gy[b, ch, oy]
                    r0, r1, r2 = xp[b, ch, oy], xp[b, ch, oy + 1], xp[b, ch, oy + 2]
                    for ox in range(ow):
                        gv = np.float64(g[ox])
                        a00 += gv * r0[ox]
                        a01 += gv * r0[ox + 1]
                        a02 += gv * r0[ox + 2]
                        a10 += gv * r1[ox]
                        a11 += gv * r1[ox + 1]
                        a12 += gv * r1[ox + 2]
                        a20 += gv * r2[ox]
                        a21 += gv * r2[ox + 1]
                        a22 += gv * r2[ox + 2]
            dw[ch, 0, 0, 0], dw[ch, 0, 0, 1], dw[ch, 0, 0, 2] = a00, a01, a02
            dw[ch, 0, 1, 0], dw[ch, 0, 1, 1], dw[ch, 0, 1, 2] = a10, a11, a12
            dw[ch, 0, 2, 0], dw[ch, 0, 2, 1], dw[ch, 0, 2, 2] = a20, a21, a22
        return dw


_PAD = ((0, 0), (0, 0), (1, 1), (1, 1))


def forward(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(N, C, H, W)``: each channel of ``x`` correlated with its own 3x3 filter ``w``
    (C, 1, 3, 3), padded by 1; and ``x`` padded, which the weight gradient reads too."""
    padded = np.pad(x, _PAD)
    return _correlate3x3(padded, np.ascontiguousarray(w, x.dtype), np.empty_like(x)), padded


def backward(gy: np.ndarray, x: np.ndarray, w: np.ndarray, need_data: bool,
             need_weight: bool, padded: np.ndarray | None = None) -> tuple:
    """The data and weight gradients (None where not needed) of :func:`forward`, which
    gave ``padded`` (None: ``x`` is padded again)."""
    gy = np.ascontiguousarray(gy, x.dtype)
    dx = dw = None
    if need_data:  # the output gradient correlated with the flipped filters
        flipped = np.ascontiguousarray(w[:, :, ::-1, ::-1], x.dtype)
        dx = _correlate3x3(np.pad(gy, _PAD), flipped, np.empty_like(x))
    if need_weight:
        padded = np.pad(x, _PAD) if padded is None else padded
        dw = _weight_grad3x3(gy, padded, np.empty(w.shape, x.dtype))
    return dx, dw

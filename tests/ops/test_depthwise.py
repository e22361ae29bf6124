"""Depthwise convolution in both working layouts (channels first and channels last)."""
import numpy as np
import pytest

import raymod.ops.nn.convolution as conv_module
from raymod.ops.nn import _depthwise, _depthwise_dense
from raymod.ops.nn import _im2col as im2col_module
from raymod.test_utils import check_forward, check_gradient, op_symbol


def reference_depthwise(x, w, b, stride, pad, dilate):
    """``y[n, c, o] = sum_k w[c, 0, k] * xpad[n, c, o * stride + k * dilate]``, one loop."""
    k = w.shape[2:]
    xpad = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out = [(n - d * (kk - 1) - 1) // s + 1
           for n, kk, s, d in zip(xpad.shape[2:], k, stride, dilate)]
    y = np.zeros(x.shape[:2] + tuple(out))
    for pos in np.ndindex(*out):
        for off in np.ndindex(*k):
            src = tuple(o * s + kk * d for o, kk, s, d in zip(pos, off, stride, dilate))
            y[(slice(None), slice(None)) + pos] += xpad[(slice(None), slice(None)) + src] * \
                w[(slice(None), 0) + off]
    return y if b is None else y + b.reshape((1, -1) + (1,) * len(k))

CASES = [  # data shape, kernel, stride, pad, dilate, no_bias
    ((2, 3, 7, 6), (3, 3), (1, 1), (1, 1), (1, 1), False),
    ((2, 5, 4, 4), (3, 3), (2, 2), (1, 1), (1, 1), True),  # MobileNet-like: more channels
    ((2, 4, 9, 8), (3, 2), (2, 1), (1, 0), (1, 2), True),
    ((2, 3, 11), (3,), (2,), (2,), (2,), False),
    ((1, 2, 4, 5, 4), (2, 3, 2), (1, 2, 1), (1, 0, 1), (1, 1, 1), True),
    ((2, 3, 8, 9), (3, 2), (1, 1), (2, 1), (2, 2), False),  # stride 1, dilated, asymmetric
]


@pytest.mark.parametrize("layout", ["channels_first", "channels_last", "rows"])
@pytest.mark.parametrize("shape,kernel,stride,pad,dilate,no_bias", CASES)
def test_depthwise_layouts(ctx, rng, monkeypatch, layout, shape, kernel, stride, pad, dilate,
                           no_bias):
    """Each working layout, and stride-1 2-D numpy layers along whole rows (``rows``:
    forward and, where the padding allows, the data gradient)."""
    monkeypatch.setattr(conv_module, "DEPTHWISE_MIN_POSITIONS", 0)
    monkeypatch.setattr(im2col_module, "IM2COL_TAKE_MAX", 0)  # small numpy maps take it too
    # the rows route (tested in test_convolution.py) would take the stride-1 same-padded cases
    monkeypatch.setattr(conv_module, "DEPTHWISE_ROWS_MIN_WIDTH", 1 << 30)
    monkeypatch.setattr(_depthwise_dense, "MAX_DENSE", 0)  # and the dense one, the tiny ones
    monkeypatch.setattr(_depthwise, "channels_last",
                        lambda channels, out: layout == "channels_last")
    monkeypatch.setattr(_depthwise, "ROWS_MIN_WIDTH", 0 if layout == "rows" else 1 << 30)
    calls = []
    original = _depthwise._rows_forward
    monkeypatch.setattr(_depthwise, "_rows_forward", lambda *a: calls.append(1) or original(*a))
    c = shape[1]
    names = ["data", "weight"] + ([] if no_bias else ["bias"])
    sym = op_symbol("Convolution", names, kernel=kernel, stride=stride, pad=pad, dilate=dilate,
                    num_filter=c, num_group=c, no_bias=no_bias)
    inputs = {"data": rng.standard_normal(shape), "weight": rng.standard_normal((c, 1) + kernel)}
    if not no_bias:
        inputs["bias"] = rng.standard_normal(c)
    check_forward(sym, inputs, lambda data, weight, bias=None: reference_depthwise(
        data, weight, bias, stride, pad, dilate), ctx)
    check_gradient(sym, inputs, ctx)
    if ctx.device_type == "cpu":
        assert bool(calls) == (layout == "rows" and len(kernel) == 2 and stride == (1, 1))


def test_depthwise_layout_choice():
    """Channels last once there are at least twice as many channels as output columns."""
    assert _depthwise.channels_last(128, (4, 4)) and _depthwise.channels_last(32, (16, 16))
    assert not _depthwise.channels_last(16, (16, 16)) and not _depthwise.channels_last(8, (32, 32))


def test_small_numpy_depthwise_layers_take_the_grouped_gemm():
    """Their im2col / col2im are one gather and one bincount; large ones and other array
    modules keep the depthwise path."""
    op = conv_module.Convolution(kernel=(3, 3), pad=(1, 1), num_filter=128, num_group=128)
    assert not op._depthwise(np, (2, 128, 4, 4))
    assert op._depthwise(np, (2, 128, 56, 56))
    assert op._depthwise(object(), (2, 128, 4, 4))
    grouped = conv_module.Convolution(kernel=(3, 3), num_filter=8, num_group=4)
    assert not grouped._depthwise(np, (2, 4, 56, 56))


def test_depthwise_float32_outputs_are_contiguous(rng):
    x = rng.standard_normal((2, 6, 4, 4)).astype(np.float32)
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    y = _depthwise.forward(np, x, w, (4, 4), (3, 3), (1, 1), (1, 1), (1, 1))
    gx, gw = _depthwise.backward(np, np.ones_like(y), x, w, (3, 3), (1, 1), (1, 1), (1, 1),
                                 True, True)
    assert y.dtype == gx.dtype == gw.dtype == np.float32
    assert y.flags.c_contiguous and gx.flags.c_contiguous
    ref = reference_depthwise(x.astype(np.float64), w.astype(np.float64), None, (1, 1), (1, 1),
                              (1, 1))
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)

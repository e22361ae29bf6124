import math

import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


def reference_pool(x, kernel, stride, pad, kind, full=False, include_pad=True, p=None):
    """Pool window by window, clipping windows to the padded and to the real input."""
    out = [(n + 2 * q - k + (s - 1 if full else 0)) // s + 1
           for n, k, s, q in zip(x.shape[2:], kernel, stride, pad)]
    y = np.empty(x.shape[:2] + tuple(out))
    for pos in np.ndindex(*out):
        lo = [o * s - q for o, s, q in zip(pos, stride, pad)]
        hi = [min(a + k, n + q) for a, k, n, q in zip(lo, kernel, x.shape[2:], pad)]
        real = tuple(slice(max(a, 0), min(b, n)) for a, b, n in zip(lo, hi, x.shape[2:]))
        win = x[(slice(None), slice(None)) + real].reshape(x.shape[:2] + (-1,))
        if kind == "max":
            v = win.max(-1)
        elif kind == "lp":
            v = np.cbrt((win ** p).sum(-1)) if p == 3 else (win ** p).sum(-1) ** (1 / p)
        else:
            count = math.prod(b - a for a, b in zip(lo, hi)) if include_pad else win.shape[-1]
            v = win.sum(-1) / (count if kind == "avg" else 1)
        y[(slice(None), slice(None)) + pos] = v
    return y


CASES = [  # data shape, kernel, stride, pad, convention
    ((2, 3, 6, 7), (2, 2), (2, 2), (0, 0), "valid"),
    ((2, 3, 6, 7), (3, 3), (2, 2), (1, 1), "full"),
    ((2, 2, 5, 6), (3, 2), (1, 2), (1, 0), "valid"),
    ((2, 3, 8), (3,), (2,), (1,), "full"),
    ((1, 2, 4, 3, 5), (2, 2, 2), (2, 1, 2), (0, 1, 0), "full"),
    # stride 1: numpy's separable box sums for avg and sum, padded and clipped
    ((2, 3, 6, 7), (3, 3), (1, 1), (1, 1), "valid"),
    ((2, 2, 5, 4), (2, 3), (1, 1), (1, 0), "full"),
    ((2, 2, 7), (4,), (1,), (2,), "valid"),
    ((1, 2, 3, 4, 5), (2, 3, 2), (1, 1, 1), (1, 1, 0), "valid"),
    # windows that tile the map (stride = kernel, no padding): max pools them as tiles
    ((2, 3, 6, 8), (2, 2), (2, 2), (0, 0), "valid"),
    ((1, 2, 4, 6, 4), (2, 3, 2), (2, 3, 2), (0, 0, 0), "full"),
    # one window over the whole unpadded map: pooled as global_pool
    ((2, 3, 4, 5), (4, 5), (1, 1), (0, 0), "valid"),
]


@pytest.mark.parametrize("shape,kernel,stride,pad,conv", CASES)
@pytest.mark.parametrize("kind,extra", [("max", {}), ("avg", {}), ("sum", {}),
                                        ("avg", {"count_include_pad": False}),
                                        ("lp", {"p_value": 2}), ("lp", {"p_value": 3})])
def test_pooling(ctx, rng, shape, kernel, stride, pad, conv, kind, extra):
    sym = op_symbol("Pooling", ["data"], kernel=kernel, stride=stride, pad=pad,
                    pool_type=kind, pooling_convention=conv, **extra)
    x = rng.standard_normal(shape)
    ref = reference_pool(x, kernel, stride, pad, kind, conv == "full",
                         extra.get("count_include_pad", True), extra.get("p_value"))
    check_forward(sym, {"data": x}, [ref], ctx)
    check_gradient(sym, {"data": x}, ctx, max_elements=24)


@pytest.mark.parametrize("kind", ["max", "avg", "sum", "lp"])
def test_global_pooling(ctx, rng, kind):
    sym = op_symbol("Pooling", ["data"], global_pool=True, kernel=(2, 2), pad=(1, 1),
                    pool_type=kind, p_value=2 if kind == "lp" else None)
    x = rng.standard_normal((2, 3, 4, 5))
    check_forward(sym, {"data": x}, [reference_pool(x, (4, 5), (1, 1), (0, 0), kind, p=2)], ctx)
    check_gradient(sym, {"data": x}, ctx)


def test_max_pooling_ties_go_to_first_maximum(ctx):
    x = np.array([[1, 3, 3, 1], [0, 3, 2, 0], [1, 1, 1, 1]], np.float32)[None, None]
    ex = bind(op_symbol("Pooling", ["data"], kernel=(2, 2), pool_type="max"), {"data": x}, ctx)
    ex.forward(is_train=True)
    ex.backward([np.ones((1, 1, 2, 3), np.float32)])
    expected = [[0, 2, 1, 0], [0, 2, 1, 0], [0, 0, 0, 0]]  # as MXNet 1.9 (row-major first)
    np.testing.assert_array_equal(as_numpy(ex.grad_dict["data"])[0, 0], expected)


def reference_max_grad(x, gy, kernel, stride, pad):
    """Each output's gradient added to the first maximum of its window (row-major), window by
    window, on the -inf padded input."""
    xp_ = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad], constant_values=-np.inf)
    g = np.zeros_like(xp_)
    for n, c, *pos in np.ndindex(*gy.shape):
        corner = [o * s for o, s in zip(pos, stride)]
        win = xp_[(n, c) + tuple(slice(a, a + k) for a, k in zip(corner, kernel))]
        first = np.unravel_index(np.argmax(win), kernel)
        g[(n, c) + tuple(a + f for a, f in zip(corner, first))] += gy[(n, c, *pos)]
    return g[(slice(None), slice(None)) + tuple(slice(p, p + d) for p, d in
                                                zip(pad, x.shape[2:]))]


@pytest.mark.parametrize("shape,kernel,stride,pad", [
    ((2, 9, 3, 3), (3, 3), (1, 1), (1, 1)),     # small map, many channels: channels-last rows
    ((2, 3, 9, 11), (3, 3), (2, 2), (0, 0)),
    ((1, 2, 5, 4, 6), (2, 3, 2), (1, 2, 1), (1, 1, 0)),
    ((2, 3, 6, 8), (2, 2), (2, 2), (0, 0)),  # tiles
    ((1, 2, 4, 6, 3), (2, 3, 3), (2, 3, 3), (0, 0, 0)),
])
def test_max_pooling_gradient_with_ties_in_overlapping_windows(ctx, rng, shape, kernel, stride,
                                                               pad):
    # after a ReLU most windows tie at zero: each gradient goes to the window's first zero
    x = np.maximum(rng.integers(-2, 2, shape), 0).astype(np.float32)
    ex = bind(op_symbol("Pooling", ["data"], kernel=kernel, stride=stride, pad=pad,
                        pool_type="max"), {"data": x}, ctx)
    ex.forward(is_train=True)
    gy = rng.integers(1, 5, ex.outputs[0].shape).astype(np.float32)
    ex.backward([gy])
    np.testing.assert_array_equal(as_numpy(ex.grad_dict["data"]),
                                  reference_max_grad(x, gy, kernel, stride, pad))


@pytest.mark.parametrize("dtype,rtol", [(np.float32, 1e-6), (np.float16, 2e-3)])
@pytest.mark.parametrize("kind", ["avg", "sum"])
def test_global_sums_keep_the_dtype(ctx, rng, kind, dtype, rtol):
    """float32 sums as a matrix-vector product; float16 through numpy's own sums."""
    sym = op_symbol("Pooling", ["data"], global_pool=True, kernel=(1, 1), pool_type=kind)
    x = rng.standard_normal((2, 5, 3, 7)).astype(dtype)
    ref = reference_pool(x.astype(np.float64), (3, 7), (1, 1), (0, 0), kind)
    out = check_forward(sym, {"data": x}, [ref], ctx, rtol=rtol, atol=rtol)
    assert out[0].dtype == dtype


def test_pooling_shapes_and_errors(rng):
    sym = op_symbol("Pooling", ["data"], kernel=(3, 3), stride=(2, 2), pooling_convention="full")
    assert sym.infer_shape(data=(2, 3, 6, 6))[1] == [(2, 3, 3, 3)]
    out = check_forward(sym, {"data": rng.standard_normal((2, 1, 6, 6)).astype(np.float32)},
                        lambda data: reference_pool(data, (3, 3), (2, 2), (0, 0), "max", True))
    assert out[0].dtype == np.float32
    with pytest.raises(ShapeError, match=r"Pooling 'op'.*kernel \(3, 3\) exceeds"):
        sym.infer_shape(data=(2, 3, 2, 6))
    for bad in [dict(pooling_convention="same"), dict(layout="NHWC"), dict(pool_type="lp"),
                dict(kernel=())]:
        with pytest.raises(AttributeValueError, match=r"Pooling: .*(same|layout|p_value|kernel)"):
            op_symbol("Pooling", ["data"], **{"kernel": (2, 2), **bad})


@pytest.mark.parametrize("with_nan", [False, True])
@pytest.mark.parametrize("shape,kernel,stride,pad", [
    ((2, 9, 3, 3), (3, 3), (1, 1), (1, 1)),     # channels-last window rows (see _window_order)
    ((2, 3, 9, 11), (3, 3), (2, 2), (1, 1)),
    ((2, 3, 8), (3,), (2,), (1,)),
    ((1, 2, 5, 4, 6), (2, 3, 2), (1, 2, 1), (1, 1, 0)),
])
def test_max_pooling_coded_forward_matches_the_recomputed_gradient(monkeypatch, rng, shape,
                                                                   kernel, stride, pad,
                                                                   with_nan):
    """A training forward takes its maxima from the window matrix and keeps each window's
    first-maximum offset, so backward only scatters. Output and gradient equal the stride-1
    maxima's with the offsets found again in backward (after an inference forward, or with the
    coded forward off), ties included; without NaN, the window-by-window reference's."""
    from raymod.ops.nn import pooling
    x = np.maximum(rng.integers(-2, 2, shape), 0).astype(np.float32)
    if with_nan:  # windows whose maximum is NaN
        x.reshape(-1)[x.size // 2] = np.nan
    op = pooling.Pooling(kernel=kernel, stride=stride, pad=pad, pool_type="max")
    (y, ), first = op.forward(np, [x], [], True)
    assert first is not None and first.shape == (y.size,)
    gy = rng.integers(1, 5, y.shape).astype(np.float32)
    coded = op.backward(np, [gy], [x], [y], first, (True,))[0]
    (y_inf, ), saved = op.forward(np, [x], [], False)
    assert saved is None
    np.testing.assert_array_equal(y_inf, y)
    np.testing.assert_array_equal(op.backward(np, [gy], [x], [y_inf], None, (True,))[0], coded)
    monkeypatch.setattr(pooling, "CODED_FORWARD", False)
    (y_box, ), saved = op.forward(np, [x], [], True)
    assert saved is None
    np.testing.assert_array_equal(y_box, y)
    np.testing.assert_array_equal(op.backward(np, [gy], [x], [y_box], None, (True,))[0], coded)
    if not with_nan:
        np.testing.assert_array_equal(coded, reference_max_grad(x, gy, kernel, stride, pad))

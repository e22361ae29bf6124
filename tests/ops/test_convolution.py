import itertools

import numpy as np
import pytest

import raymod.ops.nn._im2col as im2col_module
import raymod.ops.nn.convolution as conv_module
from raymod.base import AttributeValueError, ShapeError
from raymod.ops.nn import _depthwise_numba
from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.fixture(autouse=True)
def numpy_routes(request, monkeypatch):
    """These tests check numpy's routes: the compiled depthwise loops stand aside, except in
    the tests marked ``compiled``."""
    if "compiled" not in request.keywords:
        monkeypatch.setenv("RAYMOD_NUMBA", "0")


def reference_conv(x, w, b, stride, pad, dilate, groups):
    """Direct convolution: one dot product per filter and output position."""
    k = w.shape[2:]
    xpad = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out = [(n - d * (kk - 1) - 1) // s + 1
           for n, kk, s, d in zip(xpad.shape[2:], k, stride, dilate)]
    y = np.zeros(x.shape[:1] + w.shape[:1] + tuple(out))
    cg, fg = x.shape[1] // groups, w.shape[0] // groups
    for f in range(w.shape[0]):
        chans = slice(f // fg * cg, (f // fg + 1) * cg)
        for pos in np.ndindex(*out):
            win = tuple(slice(o * s, o * s + d * (kk - 1) + 1, d)
                        for o, s, d, kk in zip(pos, stride, dilate, k))
            y[(slice(None), f) + pos] = (xpad[(slice(None), chans) + win] * w[f]).reshape(
                len(x), -1).sum(1)
    return y if b is None else y + b.reshape((1, -1) + (1,) * len(k))


def reference_grads(x, w, gy, pad, dilate):
    """The data and weight gradients of ``sum(y * gy)`` for a stride-1 2-D convolution
    ``y`` of ``x`` with ``w``: its adjoint, written out kernel offset by kernel offset."""
    xpad = np.pad(x, [(0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])])
    gxpad, dw = np.zeros_like(xpad), np.zeros(w.shape)
    for i, j in np.ndindex(*w.shape[2:]):
        rows = slice(i * dilate[0], i * dilate[0] + gy.shape[2])
        cols = slice(j * dilate[1], j * dilate[1] + gy.shape[3])
        dw[:, :, i, j] = np.einsum("nfhw,nchw->fc", gy, xpad[:, :, rows, cols])
        gxpad[:, :, rows, cols] += np.einsum("nfhw,fc->nchw", gy, w[:, :, i, j])
    return gxpad[:, :, pad[0]:pad[0] + x.shape[2], pad[1]:pad[1] + x.shape[3]], dw


def check_conv(rng, shape, kernel, stride, pad, dilate, nf, ng, no_bias, ctx=None):
    """A Convolution's forward against the written-out one, and its numerical gradient."""
    names = ["data", "weight"] + ([] if no_bias else ["bias"])
    sym = op_symbol("Convolution", names, kernel=kernel, stride=stride, pad=pad, dilate=dilate,
                    num_filter=nf, num_group=ng, no_bias=no_bias)
    inputs = {"data": rng.standard_normal(shape),
              "weight": rng.standard_normal((nf, shape[1] // ng) + kernel)}
    if not no_bias:
        inputs["bias"] = rng.standard_normal(nf)
    check_forward(sym, inputs, lambda data, weight, bias=None: reference_conv(
        data, weight, bias, stride, pad, dilate, ng), ctx)
    check_gradient(sym, inputs, ctx)


CASES = [  # data shape, kernel, stride, pad, dilate, num_filter, num_group, no_bias
    ((2, 3, 6, 7), (3, 3), (1, 1), (0, 0), (1, 1), 4, 1, False),
    ((2, 4, 9, 8), (3, 2), (2, 3), (1, 2), (2, 1), 6, 2, False),
    ((3, 2, 9), (3,), (2,), (1,), (2,), 3, 1, True),
    ((2, 2, 20), (3,), (1,), (1,), (2,), 4, 2, False),  # long rows: batch-first columns
    ((2, 2, 4, 5, 4), (2, 3, 2), (1, 2, 1), (1, 0, 1), (1, 1, 1), 2, 2, False),
    # depthwise (num_group == channels == num_filter): strided, padded, dilated, 1-D to 3-D
    ((2, 3, 7, 6), (3, 3), (1, 1), (1, 1), (1, 1), 3, 3, False),
    ((2, 4, 9, 8), (3, 2), (2, 1), (1, 0), (1, 2), 4, 4, True),
    ((2, 3, 11), (3,), (2,), (2,), (2,), 3, 3, False),
    ((1, 2, 4, 5, 4), (2, 3, 2), (1, 2, 1), (1, 0, 1), (1, 1, 1), 2, 2, True),
    # stride 1, ungrouped: the data gradient runs as a convolution of the output gradient
    # (dilated, asymmetric kernel and pads); pad beyond the kernel's reach falls back
    ((2, 3, 9, 8), (3, 2), (1, 1), (2, 0), (2, 3), 3, 1, False),
    ((2, 3, 5, 9), (1, 5), (1, 1), (0, 2), (1, 1), 2, 1, True),
    ((2, 3, 6, 7), (3, 3), (1, 1), (1, 1), (1, 1), 5, 1, True),  # more filters: col2im
    # padded to keep their size, dilated or asymmetric: shifted GEMMs in that variant
    ((2, 3, 9, 8), (3, 3), (1, 1), (2, 2), (2, 2), 3, 1, False),
    ((1, 2, 7, 9), (5, 3), (1, 1), (2, 1), (1, 1), 4, 1, True),
    ((2, 2, 6, 6), (2, 2), (1, 1), (2, 2), (1, 1), 3, 1, False),
    # channel multiplier 2: grouped, not depthwise
    ((2, 3, 6, 6), (3, 3), (1, 1), (1, 1), (1, 1), 6, 3, False),
    # output rows of more than 12: batch-first columns (row blocks in that variant)
    ((1, 2, 5, 14), (3, 3), (1, 1), (1, 1), (1, 1), 2, 1, False),
    ((2, 2, 6, 29), (3, 2), (2, 2), (1, 1), (1, 2), 3, 1, True),
    # 1x1, stride 1, unpadded, at least 16 positions: per-sample products (pointwise)
    ((3, 3, 5, 4), (1, 1), (1, 1), (0, 0), (1, 1), 4, 1, False),
    # fewer filters than channels on a long map: the weight gradient as x g^T, transposed
    ((2, 5, 9, 8), (1, 1), (1, 1), (0, 0), (1, 1), 2, 1, False),
    ((2, 2, 3, 3, 2), (1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 1, 1), 3, 1, True),
]


def use_strided_columns(monkeypatch):
    """Make numpy's im2col / col2im take their strided paths, not the indexed ones that
    small buffers take."""
    monkeypatch.setattr(im2col_module, "IM2COL_TAKE_MAX", 0)
    monkeypatch.setattr(im2col_module, "COL2IM_BINCOUNT_MAX", 0)


def shifted_data_grad_off(monkeypatch):
    """Leave stride-1 data gradients to the column routes (as a convolution, or GEMM and
    col2im), which small 2-D layers would otherwise not take."""
    monkeypatch.setattr(conv_module, "SHIFTED_MAX_KW", 0)


def takes_shifted_data_grad(shape, kernel, stride, pad, dilate, ng) -> bool:
    """Whether a layer can run its data gradient as shifted GEMMs (2-D, stride 1,
    ungrouped, padded to keep its size, kernels up to SHIFTED_MAX_KW wide, not an unpadded
    1x1 layer: CASES' are pointwise)."""
    return (len(kernel) == 2 and stride == (1, 1) and ng == 1
            and not (kernel == (1, 1) and not any(pad))
            and im2col_module.transposed_pad(kernel, stride, dilate, pad) == tuple(pad)
            and kernel[1] <= conv_module.SHIFTED_MAX_KW)


@pytest.mark.parametrize("columns", ["indexed", "strided", "row_blocks", "shifted",
                                     "shifted_blocks"])
@pytest.mark.parametrize("shape,kernel,stride,pad,dilate,nf,ng,no_bias", CASES)
def test_convolution(ctx, rng, monkeypatch, shape, kernel, stride, pad, dilate, nf, ng,
                     no_bias, columns):
    monkeypatch.setattr(conv_module, "DEPTHWISE_MIN_POSITIONS", 0)  # small maps take it too
    calls = {"data_grad": [], "forward": [], "weight_grad": []}
    if columns == "shifted":  # every layer that can, forward too: whatever its size
        for name, value in [("SHIFTED_ANY_WIDTH", 1 << 30), ("SHIFTED_FORWARD_MIN_CHANNELS", 1),
                            ("SHIFTED_FORWARD_MAX_CHANNELS", 1 << 30),
                            ("SHIFTED_FORWARD_MIN_WIDTH", 1)]:
            monkeypatch.setattr(conv_module, name, value)
        for name in calls:
            def spy(*a, _name=name, _original=getattr(conv_module._shifted, name), **k):
                calls[_name].append(1)
                return _original(*a, **k)
            monkeypatch.setattr(conv_module._shifted, name, spy)
    elif columns == "shifted_blocks":  # where the row blocks below can, as shifted GEMMs
        monkeypatch.setattr(conv_module, "SHIFTED_BLOCKS_MAX_CHANNELS", 1 << 30)
        block_calls = {"forward": [], "data_grad": [], "weight_grad": []}
        for name in block_calls:
            def spy(*a, _name=name, _original=getattr(conv_module._shifted_blocks, name), **k):
                block_calls[_name].append(1)
                return _original(*a, **k)
            monkeypatch.setattr(conv_module._shifted_blocks, name, spy)
    else:
        shifted_data_grad_off(monkeypatch)
    if columns == "strided":
        use_strided_columns(monkeypatch)
    if columns in ("row_blocks", "shifted_blocks"):  # an output row at a time, none kept
        monkeypatch.setattr(conv_module, "KEEP_COLS_MAX", 0)
        monkeypatch.setattr(conv_module, "BLOCKED_FORWARD_MIN", 0)
        monkeypatch.setattr(conv_module, "BLOCKED_BACKWARD_MIN", 0)
        monkeypatch.setattr(conv_module, "BLOCKED_FORWARD_BUDGET", 1)
        monkeypatch.setattr(conv_module, "BLOCKED_FORWARD_MIN_POSITIONS", 0)
    check_conv(rng, shape, kernel, stride, pad, dilate, nf, ng, no_bias, ctx)
    if columns == "shifted" and ctx.device_type == "cpu":
        shifted = takes_shifted_data_grad(shape, kernel, stride, pad, dilate, ng)
        assert {name: bool(c) for name, c in calls.items()} == dict.fromkeys(calls, shifted)
    if columns == "shifted_blocks" and ctx.device_type == "cpu":
        route = conv_module.Convolution(kernel=kernel, stride=stride, pad=pad, dilate=dilate,
                                        num_filter=nf, num_group=ng)._route(np, shape)
        fits = takes_shifted_data_grad(shape, kernel, stride, pad, dilate, ng)
        assert route.shifted_blocks or not fits
        backward = fits and route.blocked_backward
        assert {name: bool(c) for name, c in block_calls.items()} == {
            "forward": fits and route.blocked_forward, "data_grad": backward,
            "weight_grad": backward}


SHIFTED_BLOCKS_CASES = [  # data shape, kernel, dilate, pad (stride 1, size kept)
    ((2, 3, 7, 6), (3, 3), (1, 1), (1, 1)),
    ((1, 2, 9, 8), (3, 3), (2, 2), (2, 2)),  # dilated: blocks read 4 rows more
    ((2, 2, 8, 9), (5, 3), (1, 2), (2, 2)),  # asymmetric kernel, dilated columns
    ((1, 3, 5, 7), (1, 3), (1, 1), (0, 1)),  # unpadded rows
]


@pytest.mark.parametrize("budget", [1, 150, 1 << 20])  # a row a block, a few, all of them
@pytest.mark.parametrize("shape,kernel,dilate,pad", SHIFTED_BLOCKS_CASES)
def test_shifted_blocks(rng, shape, kernel, dilate, pad, budget):
    """Shifted GEMMs by blocks of output rows (``_shifted_blocks``) against the written-out
    convolution: forward, and both gradients against their written-out adjoints (float64);
    the weight gradient written into a given array too."""
    from raymod.ops.nn import _shifted_blocks

    nf = 4
    x = rng.standard_normal(shape)
    w = rng.standard_normal((nf, shape[1]) + kernel)
    y = _shifted_blocks.forward(x, w, dilate, pad, budget)
    want = reference_conv(x, w, None, (1, 1), pad, dilate, 1)
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    # the gradients of sum(y * gy): the adjoint of the convolution, taken entry by entry
    gy = rng.standard_normal(y.shape)
    full_pad = im2col_module.transposed_pad(kernel, (1, 1), dilate, pad)
    dx = _shifted_blocks.data_grad(gy, w, dilate, full_pad, budget)
    dw = np.empty_like(w)
    assert _shifted_blocks.weight_grad(x, gy, kernel, dilate, pad, budget, out=dw) is dw
    want_dx, want_dw = reference_grads(x, w, gy, pad, dilate)
    np.testing.assert_allclose(dx, want_dx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw, want_dw, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_shifted_blocks.weight_grad(x, gy, kernel, dilate, pad, budget),
                               want_dw, rtol=1e-12, atol=1e-12)


def test_convolution_rebuilds_columns_when_too_big(rng, monkeypatch):
    monkeypatch.setattr(conv_module, "KEEP_COLS_MAX", 0)
    sym = op_symbol("Convolution", ["data", "weight", "bias"], kernel=(2, 2), pad=(1, 1),
                    stride=(2, 2), num_filter=3)
    check_gradient(sym, {"data": rng.standard_normal((2, 2, 5, 5)),
                         "weight": rng.standard_normal((3, 2, 2, 2)),
                         "bias": rng.standard_normal(3)})


WINOGRAD_CASES = [  # data shape, pad, num_filter, no_bias: odd and even outputs, pad 0..2
    ((2, 3, 6, 7), (1, 1), 4, False),
    ((1, 2, 5, 5), (0, 0), 3, True),
    ((3, 2, 4, 6), (2, 1), 2, False),
]


def lower_winograd_thresholds(monkeypatch):
    for name in ("WINOGRAD_MIN_TILES", "WINOGRAD_MIN_CHANNELS", "WINOGRAD_BACKWARD_MIN_TILES",
                 "WINOGRAD_BACKWARD_MIN_CHANNELS", "WINOGRAD_BACKWARD_WIDE_MIN_TILES"):
        monkeypatch.setattr(conv_module, name, 0)


@pytest.mark.parametrize("data_grad", ["winograd", "shifted"])
@pytest.mark.parametrize("mode", ["1", "backward"])
@pytest.mark.parametrize("shape,pad,nf,no_bias", WINOGRAD_CASES)
def test_convolution_winograd(ctx, rng, monkeypatch, shape, pad, nf, no_bias, mode, data_grad):
    """Stride-1 3x3 layers run as Winograd F(2x2, 3x3) (thresholds lowered so small shapes
    take that path), in forward and backward or (the default) backward only, the data
    gradient Winograd's or shifted GEMMs': forward against the direct loop, both gradients
    numerically."""
    monkeypatch.setattr(conv_module, "WINOGRAD", mode)
    lower_winograd_thresholds(monkeypatch)
    if data_grad == "winograd":
        shifted_data_grad_off(monkeypatch)
    else:
        monkeypatch.setattr(conv_module, "SHIFTED_ANY_WIDTH", 1 << 30)
    shifted = []
    original_shifted = conv_module._shifted.data_grad
    monkeypatch.setattr(conv_module._shifted, "data_grad",
                        lambda *a: shifted.append(1) or original_shifted(*a))
    calls = []
    original = conv_module._winograd.transform_input
    monkeypatch.setattr(conv_module._winograd, "transform_input",
                        lambda *a: calls.append(1) or original(*a))
    names = ["data", "weight"] + ([] if no_bias else ["bias"])
    sym = op_symbol("Convolution", names, kernel=(3, 3), pad=pad, num_filter=nf,
                    no_bias=no_bias)
    inputs = {"data": rng.standard_normal(shape),
              "weight": rng.standard_normal((nf, shape[1], 3, 3))}
    if not no_bias:
        inputs["bias"] = rng.standard_normal(nf)
    check_forward(sym, inputs, lambda data, weight, bias=None: reference_conv(
        data, weight, bias, (1, 1), pad, (1, 1), 1), ctx)
    check_gradient(sym, inputs, ctx)
    assert calls, "the Winograd path was not taken"
    if ctx.device_type == "cpu":
        assert bool(shifted) == (data_grad == "shifted" and pad == (1, 1))  # "same" only


def test_convolution_winograd_float32(rng, monkeypatch):
    """float32 Winograd stays within float32 rounding of the float64 direct convolution,
    for the data and weight gradients too (written out as correlations of the output grad)."""
    monkeypatch.setattr(conv_module, "WINOGRAD", "1")
    lower_winograd_thresholds(monkeypatch)
    x, w = rng.standard_normal((2, 8, 9, 10)), rng.standard_normal((6, 8, 3, 3))
    gy = rng.standard_normal((2, 6, 9, 10))
    op = conv_module.Convolution(kernel=(3, 3), pad=(1, 1), num_filter=6, no_bias=True)
    op.check()
    assert op._winograd(x.shape, (9, 10), forward=True)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    (y,), saved = op.forward(np, [x32, w32], [], True)
    dx, dw = op.backward(np, [gy.astype(np.float32)], [x32, w32], [y], saved, [True, True])
    ref = reference_conv(x, w, None, (1, 1), (1, 1), (1, 1), 1)
    dw_ref = reference_grads(x, w, gy, (1, 1), (1, 1))[1]
    dx_ref = reference_conv(gy, np.flip(w, (2, 3)).swapaxes(0, 1), None, (1, 1), (1, 1),
                            (1, 1), 1)
    for ours, want in [(y, ref), (dw, dw_ref), (dx, dx_ref)]:
        assert ours.dtype == np.float32
        np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_convolution_default_winograd_leaves_forward_to_im2col(rng, monkeypatch):
    """By default Winograd runs only in backward: forward is bit for bit the im2col one (the
    last bits of a forward pass decide downstream ReLUs and max-pool picks), while the
    gradients take Winograd and match the written-out formulas."""
    lower_winograd_thresholds(monkeypatch)
    op = conv_module.Convolution(kernel=(3, 3), pad=(1, 1), num_filter=16, no_bias=True)
    op.check()
    x = rng.standard_normal((2, 16, 12, 12)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32)
    forwards = {}
    for mode in ("0", "1", "backward"):
        monkeypatch.setattr(conv_module, "WINOGRAD", mode)
        forwards[mode] = op.forward(np, [x, w], [], False)[0][0]
    assert not np.array_equal(forwards["1"], forwards["0"])  # Winograd rounds otherwise
    assert np.array_equal(forwards["backward"], forwards["0"])
    assert op._winograd(x.shape, (12, 12), forward=False)
    calls = []
    original = conv_module._winograd.transform_input
    monkeypatch.setattr(conv_module._winograd, "transform_input",
                        lambda *a: calls.append(1) or original(*a))
    (y,), saved = op.forward(np, [x, w], [], True)
    assert not calls
    gy = rng.standard_normal(y.shape)
    dx, dw = op.backward(np, [gy.astype(np.float32)], [x, w], [y], saved, [True, True])
    assert calls, "the gradients did not take Winograd"
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    dw_ref = reference_grads(x64, w64, gy, (1, 1), (1, 1))[1]
    dx_ref = reference_conv(gy, np.flip(w64, (2, 3)).swapaxes(0, 1), None, (1, 1), (1, 1),
                            (1, 1), 1)
    for ours, want in [(dw, dw_ref), (dx, dx_ref)]:
        np.testing.assert_allclose(ours, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_default_winograd_thresholds(monkeypatch):
    """Backward-only Winograd takes large 3x3 layers (VGG-16's in fcn8s) and leaves small
    maps and few channels to im2col."""
    monkeypatch.setattr(conv_module, "WINOGRAD", "backward")
    op = conv_module.Convolution(kernel=(3, 3), pad=(1, 1), num_filter=256)
    op.check()
    assert op._winograd((1, 256, 57, 57), (57, 57), forward=False)
    assert not op._winograd((1, 256, 57, 57), (57, 57), forward=True)
    assert not op._winograd((2, 256, 14, 14), (14, 14), forward=False)  # 98 tiles
    assert op._winograd((1, 256, 28, 28), (28, 28), forward=False)  # 196 tiles, 256 wide
    assert not op._winograd((1, 128, 28, 28), (28, 28), forward=False)  # 128 wide
    thin = conv_module.Convolution(kernel=(3, 3), pad=(1, 1), num_filter=32)
    thin.check()
    assert not thin._winograd((2, 32, 147, 147), (147, 147), forward=False)


def test_convolution_winograd_switch_default_and_unknown_values():
    import os
    import subprocess
    import sys
    code = "import raymod.ops.nn.convolution as c; print(c.WINOGRAD)"
    env = {k: v for k, v in os.environ.items() if k != "RAYMOD_CONV_WINOGRAD"}
    run = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.strip() == "backward", run.stderr
    run = subprocess.run([sys.executable, "-c", code], env={**env, "RAYMOD_CONV_WINOGRAD": "yes"},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "RAYMOD_CONV_WINOGRAD='yes'" in run.stderr


def test_convolution_float32_and_shapes(rng):
    sym = op_symbol("Convolution", ["data", "weight", "bias"], kernel=(5, 5), num_filter=20)
    x, w = rng.standard_normal((4, 1, 12, 12)), rng.standard_normal((20, 1, 5, 5))
    out = check_forward(sym, {"data": x.astype(np.float32), "weight": w.astype(np.float32),
                              "bias": np.zeros(20, np.float32)},
                        [reference_conv(x, w, None, (1, 1), (0, 0), (1, 1), 1)], rtol=1e-4,
                        atol=1e-4)
    assert out[0].dtype == np.float32
    args, outs, _ = sym.infer_shape_partial(data=(0, 1, 28, 28))
    assert args == [(0, 1, 28, 28), (20, 1, 5, 5), (20,)] and outs == [(0, 20, 24, 24)]
    with pytest.raises(ShapeError, match=r"Convolution 'op'.*exceeds"):
        sym.infer_shape(data=(4, 1, 3, 3))
    grouped = op_symbol("Convolution", ["data", "weight"], kernel=(1, 1), num_filter=4,
                        num_group=2, no_bias=True)
    with pytest.raises(ShapeError, match=r"Convolution 'op'.*3 channels.*num_group=2"):
        grouped.infer_shape(data=(1, 3, 4, 4))
    for bad in [dict(layout="NHWC"), dict(stride=(2,)), dict(num_group=3)]:
        with pytest.raises(AttributeValueError, match=r"Convolution: .*(layout|stride|num_group)"):
            op_symbol("Convolution", ["data"], kernel=(3, 3), num_filter=4, **bad)


def test_convolution_of_a_few_positions_with_a_large_weight(rng):
    """A 2x2 map through a weight large enough for the sliced product of ``_skinny_gemm``
    (the last layers of ResNet-18 and VGG), against the written-out convolution."""
    from raymod.ops.nn import _skinny_gemm

    x = rng.standard_normal((1, 512, 2, 2)).astype(np.float32)
    w = rng.standard_normal((260, 512, 3, 3)).astype(np.float32)  # 260: a short last slice
    assert _skinny_gemm.sliced(np, 4, w.reshape(260, -1))
    op = conv_module.Convolution(kernel=(3, 3), pad=(1, 1), num_filter=260, no_bias=True)
    (y,), saved = op.forward(np, [x, w], [], True)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = reference_conv(x64, w64, None, (1, 1), (1, 1), (1, 1), 1)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)
    # the weight gradient takes the sliced product of rows too
    gy = rng.standard_normal(y.shape)
    _, dw = op.backward(np, [gy.astype(np.float32)], [x, w], [y], saved, [False, True])
    dw_ref = reference_grads(x64, w64, gy, (1, 1), (1, 1))[1]
    np.testing.assert_allclose(dw, dw_ref, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("shape,kernel,pad,dilate,nf", [
    ((2, 16, 28, 28), (3, 3), (1, 1), (1, 1), 16),  # ResNet-20's first stage
    ((1, 8, 20, 17), (5, 3), (4, 1), (2, 1), 12),  # dilated, more filters than channels
    ((2, 64, 7, 7), (3, 3), (1, 1), (1, 1), 64),  # data gradient only: a small map, wide
    ((2, 96, 28, 28), (3, 3), (1, 1), (1, 1), 32),  # Inception-BN's in3a 3x3 layer
])
def test_shifted_routes_in_float32(rng, monkeypatch, shape, kernel, pad, dilate, nf):
    """Layers the default thresholds send to the shifted data gradient (on maps 13 or more
    wide forward and weight gradient too): float32 results against the column routes'
    in float64, the weight gradient from the kept rows and rebuilt after an inference
    forward."""
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((nf, shape[1]) + kernel).astype(np.float32)
    op = conv_module.Convolution(kernel=kernel, pad=pad, dilate=dilate, num_filter=nf,
                                 no_bias=True)
    (y,), saved = op.forward(np, [x, w], [], True)
    route = op._route(np, x.shape)
    assert route.shifted_data_grad and route.shifted_forward == (shape[-1] >= 13)
    gy = rng.standard_normal(y.shape)
    dx, dw = op.backward(np, [gy.astype(np.float32)], [x, w], [y], saved, [True, True])
    _, rebuilt = op.backward(np, [gy.astype(np.float32)], [x, w], [y], None, [False, True])
    shifted_data_grad_off(monkeypatch)
    ref = conv_module.Convolution(kernel=kernel, pad=pad, dilate=dilate, num_filter=nf,
                                  no_bias=True)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    (y64,), saved64 = ref.forward(np, [x64, w64], [], True)
    assert not ref._route(np, x.shape).shifted_data_grad
    dx64, dw64 = ref.backward(np, [gy], [x64, w64], [y64], saved64, [True, True])
    assert y.dtype == dx.dtype == dw.dtype == np.float32 and dx.shape == x.shape
    np.testing.assert_allclose(y, y64, rtol=1e-4, atol=1e-4 * np.abs(y64).max())
    np.testing.assert_allclose(dx, dx64, rtol=1e-4, atol=1e-4 * np.abs(dx64).max())
    for grad in (dw, rebuilt):
        np.testing.assert_allclose(grad, dw64, rtol=1e-4, atol=1e-4 * np.abs(dw64).max())


def check_depthwise_route(ctx, rng, monkeypatch, module, shape, kernel, stride, pad, dilate,
                          no_bias):
    """A depthwise layer that takes ``module``'s route: outputs against the written-out
    convolution, both gradients against finite differences, the same gradients after an
    inference forward, and (on numpy) that the route ran both ways."""
    from raymod.test_utils import check_backward_after_inference

    calls = {"forward": 0, "backward": 0}
    for name in calls:
        def spy(*a, _name=name, _original=getattr(module, name), **k):
            calls[_name] += 1
            return _original(*a, **k)
        monkeypatch.setattr(module, name, spy)
    c = shape[1]
    names = ["data", "weight"] + ([] if no_bias else ["bias"])
    sym = op_symbol("Convolution", names, kernel=kernel, stride=stride, pad=pad, dilate=dilate,
                    num_filter=c, num_group=c, no_bias=no_bias)
    inputs = {"data": rng.standard_normal(shape), "weight": rng.standard_normal((c, 1) + kernel)}
    if not no_bias:
        inputs["bias"] = rng.standard_normal(c)
    check_forward(sym, inputs, lambda data, weight, bias=None: reference_conv(
        data, weight, bias, stride, pad, dilate, c), ctx)
    check_gradient(sym, inputs, ctx)
    out_shape = sym.infer_shape(data=shape)[1][0]
    grads = check_backward_after_inference(sym, inputs, [rng.standard_normal(out_shape)], ctx)
    assert set(grads) == set(names)
    if ctx.device_type == "cpu":
        assert calls["forward"] and calls["backward"]


def check_depthwise_float32(layer, shape, stride, rng):
    """``layer`` (3x3, padded by one) in float32 against float64, and float64 against the
    written-out convolution; either gradient alone."""
    x = rng.standard_normal(shape)
    w = rng.standard_normal((shape[1], 1, 3, 3))
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    (y,), saved = layer.forward(np, [x32, w32], [], True)
    gy = rng.standard_normal(y.shape)
    gx, gw = layer.backward(np, [gy.astype(np.float32)], [x32, w32], [y], saved, [True, True])
    (y64,), saved64 = layer.forward(np, [x, w], [], True)
    gx64, gw64 = layer.backward(np, [gy], [x, w], [y64], saved64, [True, True])
    assert y.dtype == gx.dtype == gw.dtype == np.float32
    np.testing.assert_allclose(y64, reference_conv(x, w, None, stride, (1, 1), (1, 1),
                                                   shape[1]), rtol=1e-10, atol=1e-10)
    for low, high in [(y, y64), (gx, gx64), (gw, gw64)]:
        np.testing.assert_allclose(low, high, rtol=1e-4, atol=1e-4 * np.abs(high).max())
    assert layer.backward(np, [gy], [x, w], [y64], saved64, [True, False])[1] is None
    assert layer.backward(np, [gy], [x, w], [y64], saved64, [False, True])[0] is None


def depthwise_layer(c, stride=(1, 1), pad=(1, 1), group=None):
    """A 3x3 depthwise layer of ``c`` channels (``group`` channels a group when given)."""
    return conv_module.Convolution(kernel=(3, 3), stride=stride, pad=pad, num_filter=c,
                                   num_group=group or c, no_bias=True)


DEPTHWISE_DENSE_CASES = [  # data shape, kernel, stride, pad, dilate, no_bias
    ((2, 5, 4, 4), (3, 3), (1, 1), (1, 1), (1, 1), False),  # MobileNet's 4x4 layers
    ((1, 3, 4, 4), (3, 3), (1, 1), (2, 2), (2, 2), True),  # dilated: most taps on padding
    ((2, 4, 5, 4), (3, 3), (2, 2), (1, 1), (1, 1), True),  # stride 2, odd rows
    ((3, 2, 6, 5), (3, 2), (2, 1), (2, 0), (2, 1), False),  # dilated, asymmetric, unpadded
]


@pytest.mark.parametrize("products", ["numpy", "matmul"])
@pytest.mark.parametrize("shape,kernel,stride,pad,dilate,no_bias", DEPTHWISE_DENSE_CASES)
def test_depthwise_dense(ctx, rng, monkeypatch, shape, kernel, stride, pad, dilate, no_bias,
                         products):
    """Depthwise layers on tiny maps as one dense matrix per channel (``_depthwise_dense``;
    after an inference forward no matrices are kept), with numpy's stacked matrix-vector
    products and with the ``matmul`` forms older numpy takes."""
    from raymod.ops.nn import _depthwise_dense

    if products == "matmul":
        monkeypatch.setattr(_depthwise_dense, "_matvec", _depthwise_dense._matvec_as_matmul)
        monkeypatch.setattr(_depthwise_dense, "_vecmat", _depthwise_dense._vecmat_as_matmul)
    check_depthwise_route(ctx, rng, monkeypatch, _depthwise_dense, shape, kernel, stride, pad,
                          dilate, no_bias)


def test_depthwise_dense_taps_and_where_it_runs(rng):
    """The 0/1 tap matrices against the written-out geometry; MobileNet's 4x4 depthwise
    layers take the route in float32 (against float64); larger maps, 2x2 maps, grouped
    layers with several channels a group, other array modules and 1-D layers do not."""
    from raymod.ops.nn import _depthwise_dense

    taps = _depthwise_dense.taps((3, 4), (2, 2), (2, 2), (2, 1), (1, 2), (1, 0), np.float64)
    assert taps.shape == (4, 4, 12) and not taps.flags.writeable
    for (i, j), (oy, ox) in itertools.product(np.ndindex(2, 2), np.ndindex(2, 2)):
        row, col = oy * 2 - 1 + i, ox + 2 * j
        want = np.zeros(12)
        if 0 <= row < 3 and 0 <= col < 4:
            want[row * 4 + col] = 1
        np.testing.assert_array_equal(taps[i * 2 + j, oy * 2 + ox], want)
    for shape, stride in [((2, 128, 4, 4), (1, 1)), ((2, 128, 4, 4), (2, 2))]:
        layer = depthwise_layer(shape[1], stride)
        assert layer._route(np, shape).depthwise_dense
        check_depthwise_float32(layer, shape, stride, rng)
    assert not depthwise_layer(64)._route(np, (2, 64, 8, 8)).depthwise_dense  # 262K elements
    assert not depthwise_layer(64, (2, 2))._route(np, (2, 64, 8, 8)).depthwise_dense  # 65K
    assert not depthwise_layer(256)._route(np, (2, 256, 2, 2)).depthwise_dense
    assert not depthwise_layer(8, group=4)._route(np, (2, 8, 4, 4)).depthwise_dense
    assert not depthwise_layer(128)._route(object(), (2, 128, 4, 4)).depthwise_dense
    line = conv_module.Convolution(kernel=(3,), pad=(1,), num_filter=4, num_group=4)
    assert not line._route(np, (2, 4, 5)).depthwise_dense


DEPTHWISE_ROWS_CASES = [  # data shape, kernel, pad, dilate, no_bias: stride 1, size kept
    ((2, 3, 7, 6), (3, 3), (1, 1), (1, 1), False),
    ((1, 4, 9, 10), (3, 3), (2, 2), (2, 2), True),  # dilated
    ((2, 2, 8, 5), (5, 3), (2, 1), (1, 1), False),  # asymmetric kernel
    ((3, 2, 5, 9), (1, 3), (0, 2), (1, 2), True),  # unpadded rows, dilated columns
]


@pytest.mark.parametrize("shape,kernel,pad,dilate,no_bias", DEPTHWISE_ROWS_CASES)
def test_depthwise_rows(ctx, rng, monkeypatch, shape, kernel, pad, dilate, no_bias):
    """Depthwise layers over columns read whole maps at a time (``_depthwise_rows``, made
    to run at any width)."""
    from raymod.ops.nn import _depthwise_rows

    monkeypatch.setattr(conv_module, "DEPTHWISE_ROWS_MIN_WIDTH", 1)
    check_depthwise_route(ctx, rng, monkeypatch, _depthwise_rows, shape, kernel, (1, 1), pad,
                          dilate, no_bias)


def test_depthwise_rows_in_float32_and_where_it_runs(rng):
    """MobileNet's stride-1 depthwise layers from 8x8 maps take ``_depthwise_rows`` (float32
    results against float64 ones); 4x4 maps, stride 2, unequal padding and batch 32's
    column buffers do not."""
    for shape in [(2, 8, 32, 32), (2, 64, 8, 8)]:
        layer = depthwise_layer(shape[1])
        assert layer._route(np, shape).depthwise_rows
        check_depthwise_float32(layer, shape, (1, 1), rng)
    assert not depthwise_layer(128)._route(np, (2, 128, 4, 4)).depthwise_rows
    assert not depthwise_layer(16, stride=(2, 2))._route(np, (2, 16, 32, 32)).depthwise_rows
    assert not depthwise_layer(16, pad=(0, 0))._route(np, (2, 16, 32, 32)).depthwise_rows
    assert not depthwise_layer(8)._route(np, (32, 8, 32, 32)).depthwise_rows  # too many columns

# ---- a batch cut into parts on threads (see raymod.ops._batch_parts) ------------------------
@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("shape,kernel,stride,pad,dilate,nf,ng,no_bias", [
    ((5, 3, 6, 7), (3, 3), (1, 1), (1, 1), (1, 1), 4, 1, False),  # shifted routes
    ((4, 4, 9, 8), (3, 2), (2, 3), (1, 2), (2, 1), 6, 2, False),  # grouped, im2col
    ((3, 3, 7, 6), (3, 3), (1, 1), (1, 1), (1, 1), 3, 3, True),  # depthwise
    ((4, 6, 5, 5), (1, 1), (1, 1), (0, 0), (1, 1), 3, 1, False),  # pointwise
])
def test_convolution_cut_into_parts_of_its_batch(rng, monkeypatch, parts, shape, kernel, stride,
                                                 pad, dilate, nf, ng, no_bias):
    """Forward and both gradients of a batch cut into 2 or 3 parts (sizes 1 to 3) on
    threads, against the written-out convolution and the numerical gradient."""
    from raymod.ops import _batch_parts

    cut = []
    monkeypatch.setattr(_batch_parts, "count", lambda batch, flops: cut.append(batch) or
                        min(parts, batch))
    check_conv(rng, shape, kernel, stride, pad, dilate, nf, ng, no_bias)
    assert cut and set(cut) == {shape[0]}  # the whole batch was cut, never a part again


def test_convolution_parts_equal_the_whole_batch_in_float32(rng, monkeypatch):
    """ResNet-20's first stage in float32: the parts give the whole batch's output to the
    bit and its weight gradient up to the order of a sum."""
    from raymod.ops import _batch_parts

    x = rng.standard_normal((8, 16, 32, 32)).astype(np.float32)
    w = rng.standard_normal((16, 16, 3, 3)).astype(np.float32) * 0.1
    gy = rng.standard_normal((8, 16, 32, 32)).astype(np.float32)
    runs = {}
    for parts in (1, 2):
        monkeypatch.setattr(_batch_parts, "count", lambda batch, flops, _p=parts: _p)
        op = conv_module.Convolution(kernel=(3, 3), pad=(1, 1), num_filter=16, no_bias=True)
        (y,), saved = op.forward(np, [x, w], [], True)
        dx, dw = op.backward(np, [gy], [x, w], [y], saved, [True, True])
        runs[parts] = (y, dx, dw)
    (y1, dx1, dw1), (y2, dx2, dw2) = runs[1], runs[2]
    np.testing.assert_array_equal(y2, y1)
    np.testing.assert_array_equal(dx2, dx1)
    np.testing.assert_allclose(dw2, dw1, rtol=1e-5, atol=1e-4)



# ---- depthwise layers as compiled loops (numba, where installed) ------------------------------
@pytest.mark.compiled
@pytest.mark.parametrize("shape,no_bias", [((2, 3, 7, 6), False), ((1, 2, 3, 9), True),
                                           ((3, 4, 1, 1), False)])  # 1x1 maps: all padding
def test_depthwise_compiled(rng, monkeypatch, shape, no_bias):
    """The compiled depthwise loops (3x3, stride 1, padded by 1): outputs against the
    written-out convolution, gradients against finite differences, and that they ran."""
    pytest.importorskip("numba")
    monkeypatch.setenv("RAYMOD_NUMBA", "1")
    monkeypatch.setattr(_depthwise_numba, "MIN_WIDTH", 1)  # small maps, for the checks' sake
    check_depthwise_route(rm_cpu(), rng, monkeypatch, _depthwise_numba, shape, (3, 3), (1, 1),
                          (1, 1), (1, 1), no_bias)


@pytest.mark.compiled
@pytest.mark.parametrize("kernel,stride,pad,dilate", [
    ((3, 3), (2, 2), (1, 1), (1, 1)), ((3, 3), (1, 1), (2, 2), (2, 2)),
    ((5, 5), (1, 1), (2, 2), (1, 1)), ((3, 3), (1, 1), (0, 0), (1, 1))])
def test_other_depthwise_geometries_keep_numpys_routes(monkeypatch, kernel, stride, pad,
                                                       dilate):
    pytest.importorskip("numba")
    monkeypatch.setenv("RAYMOD_NUMBA", "1")
    op = conv_module.Convolution(kernel=kernel, stride=stride, pad=pad, dilate=dilate,
                                 num_filter=8, num_group=8)
    assert not op._route(np, (2, 8, 16, 16)).numba_depthwise
    same = conv_module.Convolution(kernel=(3, 3), pad=(1, 1), num_filter=8, num_group=8)
    assert same._route(np, (2, 8, 16, 16)).numba_depthwise
    assert not same._route(np, (2, 8, 8, 8)).numba_depthwise  # narrower than MIN_WIDTH


@pytest.mark.compiled
def test_depthwise_compiled_in_float32_against_numpy(rng, monkeypatch):
    """MobileNet's 32-channel 56x56 layer in float32: the compiled loops and numpy's route
    agree to float rounding, forward and both gradients."""
    pytest.importorskip("numba")
    x = rng.standard_normal((2, 32, 56, 56)).astype(np.float32)
    w = rng.standard_normal((32, 1, 3, 3)).astype(np.float32)
    gy = rng.standard_normal((2, 32, 56, 56)).astype(np.float32)
    runs = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("RAYMOD_NUMBA", flag)
        op = conv_module.Convolution(kernel=(3, 3), pad=(1, 1), num_filter=32, num_group=32,
                                     no_bias=True)
        assert op._route(np, x.shape).numba_depthwise == (flag == "1")
        (y,), saved = op.forward(np, [x, w], [], True)
        runs[flag] = [y] + list(op.backward(np, [gy], [x, w], [y], saved, [True, True]))
    for compiled, numpy_route in zip(runs["1"], runs["0"]):
        np.testing.assert_allclose(compiled, numpy_route, rtol=1e-4, atol=1e-4)


def test_without_numba_the_numpy_routes_run(monkeypatch):
    monkeypatch.setattr(_depthwise_numba, "numba", None)
    monkeypatch.setenv("RAYMOD_NUMBA", "1")
    assert not _depthwise_numba.available()
    op = conv_module.Convolution(kernel=(3, 3), pad=(1, 1), num_filter=8, num_group=8)
    assert not op._route(np, (2, 8, 16, 16)).numba_depthwise


def rm_cpu():
    import raymod as rm
    return rm.cpu()

import math

import numpy as np
import pytest

import raymod as rm
import raymod.symbol as sym
from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


def reference_nearest(x, out_hw):
    """Each output pixel copies the input pixel its position falls in."""
    n, c, h, w = x.shape
    fh, fw = out_hw[0] // h, out_hw[1] // w
    out = np.empty((n, c) + tuple(out_hw), x.dtype)
    for i in range(out_hw[0]):
        for j in range(out_hw[1]):
            out[:, :, i, j] = x[:, :, i // fh, j // fw]
    return out


def reference_bilinear(x, w, scale):
    """Depthwise transposed convolution: each pixel adds its value times w[c] at stride scale."""
    n, c, h, wd = x.shape
    k, pad = w.shape[-1], math.ceil((scale - 1) / 2)
    full = np.zeros((n, c, scale * (h - 1) + k, scale * (wd - 1) + k))
    for i in range(h):
        for j in range(wd):
            full[:, :, i * scale:i * scale + k, j * scale:j * scale + k] += (
                x[:, :, i, j, None, None] * w[None, :, 0])
    return full[:, :, pad:pad + h * scale, pad:pad + wd * scale]


@pytest.mark.parametrize("scale", [1, 2, 3])
def test_upsampling_nearest_one_input(ctx, rng, scale):
    s = op_symbol("UpSampling", ["arg0"], scale=scale, sample_type="nearest")
    x = rng.standard_normal((2, 3, 3, 4))
    check_forward(s, {"arg0": x}, reference_nearest(x, (3 * scale, 4 * scale)), ctx)
    check_gradient(s, {"arg0": x}, ctx)


@pytest.mark.parametrize("mode", ["concat", "sum"])
def test_upsampling_nearest_many_inputs(ctx, rng, mode):
    names = ["arg0", "arg1", "arg2"]
    chans = [2, 3, 1] if mode == "concat" else [2, 2, 2]
    sizes = [(4, 6), (2, 3), (8, 12)]  # factors 2, 4 and 1 up to (8, 12)
    s = op_symbol("UpSampling", names, scale=2, sample_type="nearest", multi_input_mode=mode)
    inputs = {k: rng.standard_normal((2, c) + hw) for k, c, hw in zip(names, chans, sizes)}
    parts = [reference_nearest(inputs[k], (8, 12)) for k in names]
    expected = sum(parts) if mode == "sum" else np.concatenate(parts, axis=1)
    check_forward(s, inputs, expected, ctx)
    check_gradient(s, inputs, ctx)


@pytest.mark.parametrize("scale", [2, 3])
def test_upsampling_bilinear(ctx, rng, scale):
    s = sym.UpSampling(sym.Variable("data"), sym.Variable("weight"), scale=scale,
                       sample_type="bilinear", num_filter=3)
    k = 2 * scale - scale % 2
    inputs = {"data": rng.standard_normal((2, 3, 3, 4)),
              "weight": rng.standard_normal((3, 1, k, k))}
    check_forward(s, inputs, reference_bilinear(inputs["data"], inputs["weight"], scale), ctx)
    check_gradient(s, inputs, ctx)


def test_upsampling_bilinear_weight_and_mxnet_example(ctx):
    s = sym.UpSampling(sym.Variable("data"), scale=2, sample_type="bilinear", num_filter=1,
                       name="up")
    assert s.list_arguments() == ["data", "up_weight"]
    assert s.attr_dict()["up_weight"]["__init__"] == '["bilinear", {}]'
    assert s.infer_shape(data=(2, 1, 3, 5)) == ([(2, 1, 3, 5), (1, 1, 4, 4)], [(2, 1, 6, 10)], [])
    # the example of MXNet 1.9.1's UpSampling documentation (checked against MXNet)
    x, w = np.ones((1, 1, 3, 3), np.float32), np.ones((1, 1, 4, 4), np.float32)
    out = bind(s, {"data": x, "up_weight": w}, ctx).forward()[0]
    edge = [1, 2, 2, 2, 2, 1]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(as_numpy(out)[0, 0], np.outer(edge, edge))
    # with the Bilinear initializer's kernel, a constant image stays constant inside
    mod = rm.mod.Module(s, data_names=["data"], label_names=None)
    mod.bind(data_shapes=[("data", (1, 1, 3, 3))], for_training=False)
    mod.init_params(rm.init.Uniform(0.01))
    mod.forward(rm.io.DataBatch([np.ones((1, 1, 3, 3), np.float32)]), is_train=False)
    np.testing.assert_allclose(as_numpy(mod.get_outputs()[0])[0, 0, 1:-1, 1:-1], 1, rtol=1e-6)


def test_upsampling_nearest_float32_and_json(ctx, rng):
    s = sym.UpSampling(sym.Variable("a"), sym.Variable("b"), scale=2, sample_type="nearest",
                       name="up")
    assert s.list_arguments() == ["a", "b"]
    assert sym.UpSampling(num_args=2, scale=2, sample_type="nearest",
                          name="u").list_arguments() == ["u_arg0", "u_arg1"]
    back = sym.load_json(s.tojson())
    assert back.infer_shape(a=(1, 2, 3, 3), b=(1, 1, 6, 6))[1] == [(1, 3, 6, 6)]
    x = rng.standard_normal((1, 2, 3, 3)).astype(np.float32)
    out = bind(op_symbol("UpSampling", ["arg0"], scale=2, sample_type="nearest"),
               {"arg0": x}, ctx).forward()[0]
    assert out.dtype == np.float32


def test_upsampling_bad_input():
    near = dict(scale=2, sample_type="nearest")
    with pytest.raises(ShapeError, match=r"UpSampling 'op': arg0 must be 4-D.*\(2, 3, 4\)"):
        op_symbol("UpSampling", ["arg0"], **near).infer_shape(arg0=(2, 3, 4))
    with pytest.raises(ShapeError, match=r"arg1 \(2, 3, 2, 4\) cannot be repeated.*\(8, 8\)"):
        op_symbol("UpSampling", ["arg0", "arg1"], **near).infer_shape(
            arg0=(2, 3, 4, 4), arg1=(2, 3, 2, 4))
    with pytest.raises(ShapeError, match=r"arg1 \(2, 3, 16, 16\) cannot be repeated"):
        op_symbol("UpSampling", ["arg0", "arg1"], **near).infer_shape(
            arg0=(2, 3, 4, 4), arg1=(2, 3, 16, 16))
    with pytest.raises(ShapeError, match=r"arg1 \(1, 3, 2, 2\) has batch size 1.*has 2"):
        op_symbol("UpSampling", ["arg0", "arg1"], **near).infer_shape(
            arg0=(2, 3, 4, 4), arg1=(1, 3, 2, 2))
    with pytest.raises(ShapeError, match=r"'sum' needs equal channel counts.*\[3, 2\]"):
        op_symbol("UpSampling", ["arg0", "arg1"], multi_input_mode="sum", **near).infer_shape(
            arg0=(2, 3, 4, 4), arg1=(2, 2, 4, 4))
    bil = dict(scale=2, sample_type="bilinear")
    with pytest.raises(ShapeError, match=r"data \(2, 3, 4, 4\) has 3 channels but num_filter=1"):
        op_symbol("UpSampling", ["data", "weight"], num_filter=1, **bil).infer_shape(
            data=(2, 3, 4, 4))
    with pytest.raises(ShapeError, match=r"weight"):
        op_symbol("UpSampling", ["data", "weight"], num_filter=3, **bil).infer_shape(
            data=(2, 3, 4, 4), weight=(3, 1, 3, 3))
    with pytest.raises(AttributeValueError, match="UpSampling: sample_type='bilinear' needs "
                                                  "num_filter.*got 0"):
        op_symbol("UpSampling", ["data", "weight"], **bil)
    with pytest.raises(AttributeValueError, match="UpSampling.*sample_type.*'foo'"):
        op_symbol("UpSampling", ["arg0"], scale=2, sample_type="foo")
    with pytest.raises(AttributeValueError, match="UpSampling: scale must be >= 1, got 0"):
        op_symbol("UpSampling", ["arg0"], scale=0, sample_type="nearest")
    with pytest.raises(AttributeValueError, match="UpSampling.*sample_type.*missing"):
        op_symbol("UpSampling", ["arg0"], scale=2)

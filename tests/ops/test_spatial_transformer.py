import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import (bind, check_backward_after_inference, check_forward,
                               check_gradient, op_symbol)

ATTRS = dict(transform_type="affine", sampler_type="bilinear")


def reference_sample(data, grid):
    """Bilinear weights ``(1 - |x - xx|)(1 - |y - yy|)`` of the in-image neighbours."""
    n, c, h, w = data.shape
    out = np.zeros((n, c) + grid.shape[2:])
    for b, i, j in np.ndindex(n, *grid.shape[2:]):
        x = (grid[b, 0, i, j] + 1) * (w - 1) / 2
        y = (grid[b, 1, i, j] + 1) * (h - 1) / 2
        for yy in range(max(0, int(np.floor(y))), min(h, int(np.floor(y)) + 2)):
            for xx in range(max(0, int(np.floor(x))), min(w, int(np.floor(x)) + 2)):
                out[b, :, i, j] += (1 - abs(x - xx)) * (1 - abs(y - yy)) * data[b, :, yy, xx]
    return out


def reference_transform(data, loc, h, w):
    """Source positions loc @ (x, y, 1) for each normalised target pixel, then sampling."""
    grid = np.empty((len(loc), 2, h, w))
    for n, theta in enumerate(loc.reshape(-1, 2, 3)):
        for i in range(h):
            for j in range(w):
                grid[n, :, i, j] = theta @ [-1 + 2 * j / (w - 1), -1 + 2 * i / (h - 1), 1]
    return reference_sample(data, grid)


def off_pixel_loc(rng, data_hw, target):
    """Affine matrices near a zoom (reaching past the border) whose source positions all stay
    0.01 pixel away from whole pixels, where the bilinear gradient jumps (finite differences
    move them by about 1e-6)."""
    for _ in range(100):
        loc = np.array([1.2, 0.1, 0.05, -0.1, 1.3, -0.05]) + rng.uniform(-0.2, 0.2, (2, 6))
        ys, xs = np.meshgrid(np.linspace(-1, 1, target[0]), np.linspace(-1, 1, target[1]),
                             indexing="ij")
        src = loc.reshape(-1, 2, 3) @ np.stack([xs.ravel(), ys.ravel(), np.ones(xs.size)])
        pix = (src + 1) * (np.array(data_hw[::-1]).reshape(1, 2, 1) - 1) / 2
        if np.abs(pix - np.round(pix)).min() > 0.01:
            return loc
    raise AssertionError("no off-pixel affine matrices found")


@pytest.mark.parametrize("target", [(4, 6), (3, 2)])
def test_spatial_transformer(ctx, rng, target):
    s = op_symbol("SpatialTransformer", ["data", "loc"], target_shape=target, **ATTRS)
    inputs = {"data": rng.standard_normal((2, 3, 5, 4)), "loc": off_pixel_loc(rng, (5, 4), target)}
    check_forward(s, inputs, reference_transform(inputs["data"], inputs["loc"], *target), ctx)
    check_gradient(s, inputs, ctx)


@pytest.mark.parametrize("op", ["SpatialTransformer", "BilinearSampler"])
def test_sampling_gradient_after_inference_forward(ctx, rng, op):
    # training forward keeps each pixel's neighbours for backward; after an inference
    # forward backward finds them again, to the same gradients
    data = rng.standard_normal((2, 3, 5, 4))
    loc = off_pixel_loc(rng, (5, 4), (4, 6))
    if op == "SpatialTransformer":
        s = op_symbol(op, ["data", "loc"], target_shape=(4, 6), **ATTRS)
        inputs = {"data": data, "loc": loc}
    else:
        s = op_symbol(op, ["data", "grid"])
        inputs = {"data": data, "grid": rng.uniform(-1.2, 1.2, (2, 2, 4, 6))}
    grads = check_backward_after_inference(s, inputs, [rng.standard_normal((2, 3, 4, 6))], ctx)
    assert any(np.abs(g).max() > 0 for g in grads.values())


def test_spatial_transformer_float32_mxnet_value_and_shapes(ctx):
    s = sym.SpatialTransformer(sym.Variable("data"), sym.Variable("loc"), target_shape=(3, 3),
                               name="st", **ATTRS)
    assert s.list_arguments() == ["data", "loc"] and s.list_outputs() == ["st_output"]
    assert s.infer_shape(data=(2, 3, 4, 5)) == ([(2, 3, 4, 5), (2, 6)], [(2, 3, 3, 3)], [])
    data = np.array([[[[1, 4, 3, 6], [1, 8, 8, 9], [0, 4, 1, 5], [1, 0, 1, 3]]]], np.float32)
    loc = np.array([[0.5, 0, 0, 0, 0.5, 0]], np.float32)
    out = bind(s, {"data": data, "loc": loc}, ctx).forward()[0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(as_numpy(out)[0, 0], [[5.5, 6.875, 7.125], [4.625, 5.25, 5.125],
                                                     [2.3125, 2, 1.875]])  # MXNet 1.9.1's


def test_spatial_transformer_bad_input():
    with pytest.raises(AttributeValueError, match=r"SpatialTransformer: target_shape.*\(0, 0\)"):
        op_symbol("SpatialTransformer", ["data", "loc"], **ATTRS)
    with pytest.raises(AttributeValueError, match="SpatialTransformer.*sampler_type.*missing"):
        op_symbol("SpatialTransformer", ["data", "loc"], target_shape=(2, 2),
                  transform_type="affine")
    with pytest.raises(AttributeValueError, match="transform_type.*'warp'"):
        op_symbol("SpatialTransformer", ["data", "loc"], target_shape=(2, 2),
                  transform_type="warp", sampler_type="bilinear")
    s = op_symbol("SpatialTransformer", ["data", "loc"], target_shape=(2, 2), **ATTRS)
    with pytest.raises(ShapeError, match=r"SpatialTransformer 'op': data must be 4-D"):
        s.infer_shape(data=(2, 3, 4), loc=(2, 6))
    with pytest.raises(ShapeError, match=r"loc must be \(batch, 6\).*\(2, 4\)"):
        s.infer_shape(data=(2, 3, 4, 4), loc=(2, 4))
    with pytest.raises(ShapeError, match=r"data \(2, 3, 4, 4\) and loc \(1, 6\).*batch"):
        s.infer_shape(data=(2, 3, 4, 4), loc=(1, 6))

import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


def reference_sample(data, grid):
    """Loop over output pixels; neighbours outside the image are zeros."""
    n, c, h, w = data.shape
    out = np.zeros((n, c) + grid.shape[2:])
    for b in range(n):
        for i in range(grid.shape[2]):
            for j in range(grid.shape[3]):
                x = (grid[b, 0, i, j] + 1) * (w - 1) / 2
                y = (grid[b, 1, i, j] + 1) * (h - 1) / 2
                x0, y0 = int(np.floor(x)), int(np.floor(y))
                for yy in (y0, y0 + 1):
                    for xx in (x0, x0 + 1):
                        if 0 <= xx < w and 0 <= yy < h:
                            weight = (1 - abs(x - xx)) * (1 - abs(y - yy))
                            out[b, :, i, j] += weight * data[b, :, yy, xx]
    return out


def off_pixel_grid(rng, shape, h, w, margin):
    """A normalised grid whose pixel positions stay 0.15 away from whole pixels (where the
    bilinear gradient jumps); ``margin`` pixels beyond the image are included."""
    def axis(size):
        whole = rng.integers(-margin - 1, size + margin, shape)
        return 2 * (whole + rng.uniform(0.15, 0.85, shape)) / (size - 1) - 1
    return np.stack([axis(w), axis(h)], axis=1)


@pytest.mark.parametrize("margin", [0, 2])
def test_bilinear_sampler(ctx, rng, margin):
    s = op_symbol("BilinearSampler", ["data", "grid"])
    inputs = {"data": rng.standard_normal((2, 3, 4, 5)),
              "grid": off_pixel_grid(rng, (2, 3, 6), 4, 5, margin)}
    check_forward(s, inputs, reference_sample(inputs["data"], inputs["grid"]), ctx)
    check_gradient(s, inputs, ctx)


def test_bilinear_sampler_whole_pixels_and_outside(ctx, rng):
    data = rng.standard_normal((1, 2, 3, 4))
    # exactly on pixels (the identity), and far outside (zeros)
    xs, ys = np.meshgrid(np.linspace(-1, 1, 4), np.linspace(-1, 1, 3))
    grid = np.stack([xs, ys])[None]
    s = op_symbol("BilinearSampler", ["data", "grid"])
    check_forward(s, {"data": data, "grid": grid}, data, ctx)
    check_forward(s, {"data": data, "grid": grid + 3}, np.zeros_like(data), ctx)


def test_bilinear_sampler_mxnet_examples_float32(ctx):
    # the two examples of MXNet 1.9.1's BilinearSampler documentation, as MXNet computes them
    data = np.array([[[[1, 4, 3, 6], [1, 8, 8, 9], [0, 4, 1, 5], [1, 0, 1, 3]]]], np.float32)
    theta = sym.Variable("theta")
    zoom = sym.BilinearSampler(sym.Variable("data"), sym.GridGenerator(
        theta, transform_type="affine", target_shape=(4, 4)))
    out = bind(zoom, {"data": data, "theta": np.array([[2, 0, 0, 0, 2, 0]], np.float32)},
               ctx).forward()[0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(as_numpy(out)[0, 0], [[0, 0, 0, 0], [0, 3.5, 6.5, 0],
                                                     [0, 1.25, 2.5, 0], [0, 0, 0, 0]], rtol=1e-6)
    shift = sym.BilinearSampler(sym.Variable("data"), sym.GridGenerator(
        sym.Variable("flow"), transform_type="warp"))
    flow = np.stack([np.ones((4, 4)), np.zeros((4, 4))])[None].astype(np.float32)
    out = bind(shift, {"data": data, "flow": flow}, ctx).forward()[0]
    np.testing.assert_allclose(as_numpy(out)[0, 0], [[4, 3, 6, 0], [8, 8, 9, 0], [4, 1, 5, 0],
                                                     [0, 1, 3, 0]])


def test_bilinear_sampler_shapes_and_errors():
    s = sym.BilinearSampler(sym.Variable("data"), sym.Variable("grid"), name="bs")
    assert s.list_arguments() == ["data", "grid"] and s.list_outputs() == ["bs_output"]
    assert s.infer_shape(data=(2, 3, 4, 5), grid=(2, 2, 6, 7))[1] == [(2, 3, 6, 7)]
    with pytest.raises(ShapeError, match=r"BilinearSampler 'bs': data must be 4-D.*\(2, 3, 4\)"):
        s.infer_shape(data=(2, 3, 4), grid=(2, 2, 6, 7))
    with pytest.raises(ShapeError, match=r"grid must be \(batch, 2, y, x\).*\(2, 3, 6, 7\)"):
        s.infer_shape(data=(2, 3, 4, 5), grid=(2, 3, 6, 7))
    with pytest.raises(ShapeError, match=r"data \(2, 3, 4, 5\) and grid \(1, 2, 6, 7\).*batch"):
        s.infer_shape(data=(2, 3, 4, 5), grid=(1, 2, 6, 7))

import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


def reference_affine(theta, h, w):
    out = np.empty((len(theta), 2, h, w))
    for n, t in enumerate(theta.reshape(-1, 2, 3)):
        for i in range(h):
            for j in range(w):
                target = np.array([-1 + 2 * j / (w - 1), -1 + 2 * i / (h - 1), 1])
                out[n, :, i, j] = t @ target
    return out


def reference_warp(flow):
    n, _, h, w = flow.shape
    out = np.empty_like(flow)
    for i in range(h):
        for j in range(w):
            out[:, 0, i, j] = (flow[:, 0, i, j] + j) / ((w - 1) / 2) - 1
            out[:, 1, i, j] = (flow[:, 1, i, j] + i) / ((h - 1) / 2) - 1
    return out


@pytest.mark.parametrize("target", [(3, 4), (5, 2)])
def test_grid_generator_affine(ctx, rng, target):
    s = op_symbol("GridGenerator", ["data"], transform_type="affine", target_shape=target)
    theta = rng.standard_normal((2, 6))
    check_forward(s, {"data": theta}, reference_affine(theta, *target), ctx)
    check_gradient(s, {"data": theta}, ctx)


def test_grid_generator_warp(ctx, rng):
    s = op_symbol("GridGenerator", ["data"], transform_type="warp")
    flow = rng.standard_normal((2, 2, 3, 5))
    check_forward(s, {"data": flow}, reference_warp(flow), ctx)
    check_gradient(s, {"data": flow}, ctx)


def test_grid_generator_outputs_float32_and_mxnet_identity(ctx):
    s = sym.GridGenerator(sym.Variable("data"), transform_type="affine", target_shape=(2, 3),
                          name="g")
    assert s.list_outputs() == ["g_output"]
    assert s.infer_shape(data=(4, 6)) == ([(4, 6)], [(4, 2, 2, 3)], [])
    assert '"target_shape": "(2, 3)"' in s.tojson()
    eye = np.array([[1, 0, 0, 0, 1, 0]], np.float32)
    out = bind(s, {"data": eye}, ctx).forward()[0]
    assert out.dtype == np.float32
    # the identity grid, as MXNet 1.9.1 gives it
    np.testing.assert_allclose(as_numpy(out)[0], [[[-1, 0, 1], [-1, 0, 1]],
                                                  [[-1, -1, -1], [1, 1, 1]]])
    warp = op_symbol("GridGenerator", ["data"], transform_type="warp")
    assert warp.infer_shape(data=(2, 2, 3, 4))[1] == [(2, 2, 3, 4)]


def test_grid_generator_bad_input():
    with pytest.raises(AttributeValueError, match=r"GridGenerator: target_shape.*>= 2.*\(0, 0\)"):
        op_symbol("GridGenerator", ["data"], transform_type="affine")
    with pytest.raises(AttributeValueError, match=r"target_shape.*got \(1, 3\)"):
        op_symbol("GridGenerator", ["data"], transform_type="affine", target_shape=(1, 3))
    with pytest.raises(AttributeValueError, match="GridGenerator.*transform_type.*'shear'"):
        op_symbol("GridGenerator", ["data"], transform_type="shear", target_shape=(2, 2))
    with pytest.raises(AttributeValueError, match="GridGenerator: required attribute "
                                                  "'transform_type'"):
        op_symbol("GridGenerator", ["data"], target_shape=(2, 2))
    affine = op_symbol("GridGenerator", ["data"], transform_type="affine", target_shape=(2, 2))
    with pytest.raises(ShapeError, match=r"GridGenerator 'op': data must be \(batch, 6\).*"
                                         r"\(2, 5\)"):
        affine.infer_shape(data=(2, 5))
    warp = op_symbol("GridGenerator", ["data"], transform_type="warp")
    with pytest.raises(ShapeError, match=r"\(batch, 2, y, x\) flow.*\(2, 2, 3\)"):
        warp.infer_shape(data=(2, 2, 3))
    with pytest.raises(ShapeError, match=r"flow.*\(2, 3, 3, 3\)"):
        warp.infer_shape(data=(2, 3, 3, 3))
    with pytest.raises(ShapeError, match=r"data \(2, 2, 1, 3\) needs height and width >= 2"):
        warp.infer_shape(data=(2, 2, 1, 3))

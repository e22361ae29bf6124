import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol

NAMES = ["data", "gamma", "beta"]


def reference_instance_norm(data, gamma, beta, eps):
    out = np.empty_like(data)
    for n in range(data.shape[0]):
        for c in range(data.shape[1]):
            x = data[n, c]
            out[n, c] = gamma[c] * (x - x.mean()) / np.sqrt(((x - x.mean()) ** 2).mean() + eps) \
                + beta[c]
    return out


@pytest.mark.parametrize("shape,eps", [((2, 3, 5), 1e-3), ((3, 2, 3, 4), 0.1),
                                       ((2, 2, 2, 3, 2), 1e-3)])
def test_instance_norm(ctx, rng, shape, eps):
    s = op_symbol("InstanceNorm", NAMES, eps=eps)
    inputs = {"data": rng.standard_normal(shape) * 2 + 1,
              "gamma": rng.uniform(0.5, 2, shape[1]), "beta": rng.standard_normal(shape[1])}
    check_forward(s, inputs, reference_instance_norm(eps=eps, **inputs), ctx)
    check_gradient(s, inputs, ctx)


def test_instance_norm_outputs_float32_and_mxnet_example(ctx):
    s = sym.InstanceNorm(sym.Variable("data"), name="inorm")
    assert s.list_arguments() == ["data", "inorm_gamma", "inorm_beta"]
    assert s.list_outputs() == ["inorm_output"]
    assert s.infer_shape(data=(2, 3, 4)) == ([(2, 3, 4), (3,), (3,)], [(2, 3, 4)], [])
    x = np.array([[[1.1, 2.2]], [[3.3, 4.4]]], np.float32)
    out = bind(s, {"data": x, "inorm_gamma": np.array([1.5], np.float32),
                   "inorm_beta": np.array([0.5], np.float32)}, ctx).forward()[0]
    assert out.dtype == np.float32
    # the example of MXNet 1.9.1's InstanceNorm documentation
    np.testing.assert_allclose(as_numpy(out), [[[-0.997527, 1.99752665]],
                                               [[-0.99752653, 1.99752724]]], rtol=1e-6)


def test_instance_norm_bad_input():
    s = op_symbol("InstanceNorm", NAMES)
    with pytest.raises(ShapeError, match=r"InstanceNorm 'op': data must have rank >= 3.*\(2, 3\)"):
        s.infer_shape(data=(2, 3))
    with pytest.raises(ShapeError, match=r"gamma must have shape \(C,\) = \(3,\).*got \(4,\)"):
        s.infer_shape(data=(2, 3, 4), gamma=(4,))

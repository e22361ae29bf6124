import math

import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import check_forward, check_gradient, op_symbol

LAM, ALPHA = 1.0507009873554805, 1.6732632423543772
REFERENCES = {
    "leaky": lambda x: np.where(x > 0, x, 0.3 * x),
    "elu": lambda x: np.where(x > 0, x, 0.3 * (np.exp(x) - 1)),
    "selu": lambda x: LAM * np.where(x > 0, x, ALPHA * (np.exp(x) - 1)),
    "gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))),
}


@pytest.mark.parametrize("act_type", sorted(REFERENCES))
def test_leaky_relu(ctx, rng, act_type):
    sym = op_symbol("LeakyReLU", ["data"], act_type=act_type, slope=0.3)
    x = rng.standard_normal((3, 4, 5)) * 3
    x[np.abs(x) < 1e-3] = 0.5  # keep finite differences off the kink
    check_forward(sym, {"data": x}, lambda data: REFERENCES[act_type](data), ctx, rtol=1e-12)
    check_gradient(sym, {"data": x}, ctx)


@pytest.mark.parametrize("gamma_shape", [(3,), (1,)])
def test_prelu(ctx, rng, gamma_shape):
    sym = op_symbol("LeakyReLU", ["data", "gamma"], act_type="prelu")
    x = rng.standard_normal((2, 3, 4))
    gamma = rng.uniform(0.1, 0.5, gamma_shape)
    check_forward(sym, {"data": x, "gamma": gamma},
                  lambda data, gamma: np.where(data > 0, data, gamma.reshape(1, -1, 1) * data),
                  ctx)
    check_gradient(sym, {"data": x, "gamma": gamma}, ctx)


def test_prelu_shapes_and_errors():
    sym = op_symbol("LeakyReLU", ["data", "gamma"], act_type="prelu")
    assert sym.infer_shape(data=(2, 6))[0] == [(2, 6), (6,)]
    with pytest.raises(ShapeError, match=r"LeakyReLU 'op'.*gamma"):
        sym.infer_shape(data=(2, 6, 3), gamma=(3,))
    with pytest.raises(AttributeValueError, match="rrelu"):
        op_symbol("LeakyReLU", ["data"], act_type="rrelu")


def test_leaky_relu_float32(rng):
    sym = op_symbol("LeakyReLU", ["data"], act_type="gelu")
    x = rng.standard_normal((4, 5)).astype(np.float32)
    out = check_forward(sym, {"data": x}, REFERENCES["gelu"](x.astype(np.float64)), rtol=1e-6)
    assert out[0].dtype == np.float32


@pytest.mark.parametrize("slope", [0.0, 0.25, 1.0, 1.5, -0.4])
def test_leaky_slopes_and_zero_gradient(ctx, rng, slope):
    """Slopes in [0, 1] take the max / sign path, others the where path: same values; the
    gradient at exactly zero is the slope's (MXNet's: x > 0 is false there)."""
    sym = op_symbol("LeakyReLU", ["data"], act_type="leaky", slope=slope)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x[0, 0, :2] = 0
    out = check_forward(sym, {"data": x}, lambda data: np.where(data > 0, data, slope * data),
                        ctx, rtol=1e-6)
    assert out[0].dtype == np.float32
    exe = sym.simple_bind(ctx, data=x.shape)
    exe.arg_dict["data"][:] = ctx.xp.asarray(x)
    exe.forward(is_train=True)
    head = rng.standard_normal(x.shape).astype(np.float32)
    exe.backward([ctx.xp.asarray(head)])
    expected = np.where(x > 0, head, np.float32(slope) * head)
    np.testing.assert_array_equal(as_numpy(exe.grad_dict["data"]), expected)

import numpy as np
import pytest

from raymod.test_utils import check_forward, check_gradient, op_symbol

REFERENCES = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "square": np.square, "abs": np.abs,
    "negative": np.negative, "reciprocal": lambda x: 1 / x,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0),
    "rsqrt": lambda x: 1 / np.sqrt(x), "log1p": np.log1p, "expm1": np.expm1, "sin": np.sin,
    "cos": np.cos,
}
POSITIVE = {"log", "sqrt", "reciprocal", "rsqrt", "log1p"}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_unary(ctx, rng, name):
    s = op_symbol(name, ["data"])
    x = rng.uniform(0.5, 2, (3, 4)) if name in POSITIVE else rng.standard_normal((3, 4))
    x[np.abs(x) < 1e-3] = 0.5  # keep finite differences off the kinks of abs and relu
    check_forward(s, {"data": x}, lambda data: REFERENCES[name](data), ctx)
    check_gradient(s, {"data": x}, ctx)


@pytest.mark.parametrize("name", ["exp", "sigmoid", "square"])
def test_unary_keeps_float32(rng, name):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    out = check_forward(op_symbol(name, ["data"]), {"data": x},
                        lambda data: REFERENCES[name](data), rtol=1e-6)
    assert out[0].dtype == np.float32


# piecewise-constant ops: MXNet defines their gradient as zero; round takes halves away from 0
STEPS = {"sign": [-1, -1, 0, 1, 1, 1], "floor": [-3, -1, 0, 0, 1, 2],
         "ceil": [-2, -0., 0, 1, 2, 3], "round": [-3, -1, 0, 1, 2, 3],
         "rint": [-2, -0., 0, 0, 2, 2], "trunc": [-2, -0., 0, 0, 1, 2],
         "fix": [-2, -0., 0, 0, 1, 2]}


@pytest.mark.parametrize("name", sorted(STEPS))
def test_piecewise_constant(ctx, name):
    s = op_symbol(name, ["data"])
    x = np.array([-2.5, -0.5, 0, 0.5, 1.5, 2.5])
    check_forward(s, {"data": x}, np.array(STEPS[name], dtype=float), ctx)
    grads = check_gradient(s, {"data": x + 0.1}, ctx)  # off the jumps
    assert not grads["data"].any()

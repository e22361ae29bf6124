import numpy as np
import pytest

from raymod.test_utils import check_forward, check_gradient, op_symbol

REFERENCES = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "square": np.square, "abs": np.abs,
    "negative": np.negative, "reciprocal": lambda x: 1 / x,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0),
}
POSITIVE = {"log", "sqrt", "reciprocal"}


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

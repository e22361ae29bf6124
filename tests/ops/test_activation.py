import numpy as np
import pytest

from raymod.test_utils import check_forward, check_gradient, op_symbol

REFERENCES = {
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "softrelu": lambda x: np.log1p(np.exp(x)),
    "softsign": lambda x: x / (1 + np.abs(x)),
}


@pytest.mark.parametrize("act_type", sorted(REFERENCES))
def test_activation(ctx, rng, act_type):
    sym = op_symbol("Activation", ["data"], act_type=act_type)
    x = rng.standard_normal((4, 6))
    x[np.abs(x) < 1e-3] = 0.5  # keep finite differences away from relu's kink
    check_forward(sym, {"data": x}, lambda data: REFERENCES[act_type](data), ctx)
    check_gradient(sym, {"data": x}, ctx)


def test_activation_float32_keeps_dtype(rng):
    sym = op_symbol("Activation", ["data"], act_type="sigmoid")
    out = check_forward(sym, {"data": rng.standard_normal((2, 3)).astype(np.float32)},
                        lambda data: 1 / (1 + np.exp(-data)), rtol=1e-6)
    assert out[0].dtype == np.float32

import numpy as np
import pytest

import raymod.symbol as sym
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol

REFERENCES = {
    "_plus_scalar": lambda x, s: x + s, "_minus_scalar": lambda x, s: x - s,
    "_rminus_scalar": lambda x, s: s - x, "_mul_scalar": lambda x, s: x * s,
    "_div_scalar": lambda x, s: x / s, "_rdiv_scalar": lambda x, s: s / x,
    "_power_scalar": lambda x, s: x ** s, "_RPowerScalar": lambda x, s: s ** x,
    "_maximum_scalar": np.maximum, "_MinimumScalar": np.minimum,
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_scalar_arith(ctx, rng, name):
    s = op_symbol(name, ["data"], scalar=2.5)
    x = rng.uniform(0.5, 4, (3, 4))  # around the scalar for maximum/minimum
    check_forward(s, {"data": x}, lambda data: REFERENCES[name](data, 2.5), ctx)
    check_gradient(s, {"data": x}, ctx)


def test_symbol_scalar_arithmetic_keeps_float32(rng):
    x = rng.uniform(0.5, 2, (2, 3)).astype(np.float32)
    a = sym.Variable("a")
    out = (3 - 2 / a * 1.5 + 1 - a / 4).eval(a=x)[0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, 3 - 2 / x * 1.5 + 1 - x / 4, rtol=1e-6)


@pytest.mark.parametrize("name, grad", [("_maximum_scalar", [0, 1, 1]),
                                        ("_minimum_scalar", [1, 1, 0])])
def test_maximum_minimum_scalar_tie_passes_gradient(name, grad):
    ex = bind(op_symbol(name, ["data"], scalar=2), {"data": np.array([1., 2, 3])})
    ex.forward(is_train=True)
    ex.backward([np.ones(3)])
    np.testing.assert_array_equal(ex.grad_dict["data"], grad)

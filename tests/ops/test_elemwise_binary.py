import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import ShapeError
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol

REFERENCES = {"elemwise_add": np.add, "elemwise_sub": np.subtract,
              "elemwise_mul": np.multiply, "elemwise_div": np.divide}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_elemwise_binary(ctx, rng, name):
    s = op_symbol(name, ["lhs", "rhs"])
    inputs = {"lhs": rng.standard_normal((3, 4)), "rhs": rng.uniform(0.5, 2, (3, 4))}
    check_forward(s, inputs, lambda lhs, rhs: REFERENCES[name](lhs, rhs), ctx)
    check_gradient(s, inputs, ctx)


def test_symbol_arithmetic_uses_elemwise_ops(rng):
    a, b = sym.Variable("a"), sym.Variable("b")
    x, y = rng.standard_normal((2, 3)), rng.uniform(1, 2, (2, 3))
    out = ((a + b) * a - b / a).eval(a=x, b=y)[0]
    np.testing.assert_allclose(out, (x + y) * x - y / x)
    with pytest.raises(ShapeError, match=r"\(2, 3\).*\(4, 3\)"):
        (a + b).infer_shape(a=(2, 3), b=(4, 3))


POWER_MAX_MIN = {"_power": np.power, "_Maximum": np.maximum, "_minimum": np.minimum}


@pytest.mark.parametrize("name", sorted(POWER_MAX_MIN))
def test_power_maximum_minimum(ctx, rng, name):
    s = op_symbol(name, ["lhs", "rhs"])
    inputs = {"lhs": rng.uniform(0.5, 2, (3, 4)), "rhs": rng.uniform(-2, 2, (3, 4))}
    check_forward(s, inputs, lambda lhs, rhs: POWER_MAX_MIN[name](lhs, rhs), ctx)
    check_gradient(s, inputs, ctx)


@pytest.mark.parametrize("name, lhs_grad", [("_maximum", [1, 1, 0]), ("_minimum", [1, 0, 1])])
def test_maximum_minimum_ties_go_to_lhs(name, lhs_grad):
    ex = bind(op_symbol(name, ["lhs", "rhs"]), {"lhs": np.array([1., 2, 3]),
                                                "rhs": np.array([1., 1, 4])})
    ex.forward(is_train=True)
    ex.backward([np.ones(3)])
    np.testing.assert_array_equal(ex.grad_dict["lhs"], lhs_grad)
    np.testing.assert_array_equal(ex.grad_dict["rhs"], 1 - np.array(lhs_grad))


def test_symbol_power(rng):
    a, b = sym.Variable("a"), sym.Variable("b")
    x, y = rng.uniform(0.5, 2, (2, 3)).astype(np.float32), rng.uniform(1, 2, (2, 3))
    out = (a ** 2 + 2 ** a).eval(a=x)[0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, x ** 2 + 2 ** x, rtol=1e-6)
    np.testing.assert_allclose((a ** b).eval(a=x.astype(np.float64), b=y)[0], x ** y, rtol=1e-6)

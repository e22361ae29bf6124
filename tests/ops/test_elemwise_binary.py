import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol

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

import numpy as np
import pytest

import raymod.symbol as sym
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("name", ["BlockGrad", "stop_gradient", "_copy", "identity"])
def test_identity_forward(ctx, rng, name):
    x = rng.standard_normal((2, 3))
    check_forward(op_symbol(name, ["data"]), {"data": x}, x, ctx)


def test_copy_gradient(ctx, rng):
    check_gradient(op_symbol("identity", ["data"]), {"data": rng.standard_normal((2, 3))}, ctx)


def test_block_grad_stops_the_gradient(ctx, rng):
    x = sym.Variable("x")
    y = sym.BlockGrad(x * 2.0) + x * 3.0
    ex = bind(y, {"x": rng.standard_normal((2, 3))}, ctx)
    ex.forward(is_train=True)
    ex.backward([np.ones((2, 3))])
    np.testing.assert_allclose(as_numpy(ex.grad_dict["x"]), np.full((2, 3), 3.0))

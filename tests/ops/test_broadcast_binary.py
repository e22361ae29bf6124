import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol

REFERENCES = {"broadcast_add": np.add, "broadcast_sub": np.subtract,
              "broadcast_mul": np.multiply, "broadcast_div": np.divide}
SHAPES = [((3, 1, 4), (1, 5, 1)), ((2, 3), (3,)), ((2, 3), (2, 3)), ((1,), (2, 3))]


@pytest.mark.parametrize("name", sorted(REFERENCES))
@pytest.mark.parametrize("lshape, rshape", SHAPES)
def test_broadcast_binary(ctx, rng, name, lshape, rshape):
    s = op_symbol(name, ["lhs", "rhs"])
    inputs = {"lhs": rng.standard_normal(lshape), "rhs": rng.uniform(0.5, 2, rshape)}
    check_forward(s, inputs, lambda lhs, rhs: REFERENCES[name](lhs, rhs), ctx)
    check_gradient(s, inputs, ctx)


def test_broadcast_shapes():
    s = op_symbol("broadcast_plus", ["lhs", "rhs"])
    assert s.infer_shape_partial(lhs=(0, 3), rhs=(1, 3))[1] == [(0, 3)]
    assert s.infer_shape_partial(lhs=(0, 3), rhs=(2, 1))[1] == [(2, 3)]  # 0 is 1 or 2
    with pytest.raises(ShapeError, match=r"broadcast_sub 'op'.*\(2, 3\).*\(4, 3\)"):
        op_symbol("broadcast_minus", ["lhs", "rhs"]).infer_shape(lhs=(2, 3), rhs=(4, 3))


POWER_MAX_MIN = {"broadcast_power": np.power, "broadcast_maximum": np.maximum,
                 "broadcast_minimum": np.minimum}


@pytest.mark.parametrize("name", sorted(POWER_MAX_MIN))
@pytest.mark.parametrize("lshape, rshape", SHAPES[:2])
def test_broadcast_power_maximum_minimum(ctx, rng, name, lshape, rshape):
    s = op_symbol(name, ["lhs", "rhs"])
    inputs = {"lhs": rng.uniform(0.5, 2, lshape), "rhs": rng.uniform(-2, 2, rshape)}
    check_forward(s, inputs, lambda lhs, rhs: POWER_MAX_MIN[name](lhs, rhs), ctx)
    check_gradient(s, inputs, ctx)


def test_broadcast_maximum_tie_goes_to_lhs():
    ex = bind(op_symbol("broadcast_maximum", ["lhs", "rhs"]),
              {"lhs": np.array([[1.], [2]]), "rhs": np.array([1., 2, 0])})
    ex.forward(is_train=True)
    ex.backward([np.ones((2, 3))])
    np.testing.assert_array_equal(ex.grad_dict["lhs"], [[2], [3]])
    np.testing.assert_array_equal(ex.grad_dict["rhs"], [0, 1, 0])

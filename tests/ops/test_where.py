import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("cshape", [(3, 4), (3,)])
def test_where(ctx, rng, cshape):
    s = op_symbol("where", ["condition", "x", "y"])
    inputs = {"condition": rng.integers(-1, 2, cshape).astype(np.float64),
              "x": rng.standard_normal((3, 4)), "y": rng.standard_normal((3, 4))}

    def reference(condition, x, y):
        return np.where(condition.reshape(cshape + (1,) * (2 - len(cshape))) != 0, x, y)

    check_forward(s, inputs, reference, ctx)
    check_gradient(s, inputs, ctx, no_grad=["condition"])


def test_where_gradient_split_and_condition_gets_none(rng):
    s = op_symbol("where", ["condition", "x", "y"])
    ex = bind(s, {"condition": np.array([1., 0]), "x": np.ones((2, 3)), "y": np.ones((2, 3))})
    ex.forward(is_train=True)
    ex.backward([np.full((2, 3), 2.0)])
    np.testing.assert_array_equal(ex.grad_dict["x"], [[2, 2, 2], [0, 0, 0]])
    np.testing.assert_array_equal(ex.grad_dict["y"], [[0, 0, 0], [2, 2, 2]])
    np.testing.assert_array_equal(ex.grad_dict["condition"], [0, 0])


def test_where_shapes():
    s = op_symbol("where", ["condition", "x", "y"])
    assert s.infer_shape_partial(condition=(5,), x=(0, 3))[0] == [(5,), (5, 3), (5, 3)]
    assert s.infer_shape_partial(condition=(5, 3))[1] == [(5, 3)]
    assert s.infer_type(condition=np.int32, x=np.float32)[0] == [np.int32, np.float32,
                                                                 np.float32]
    with pytest.raises(ShapeError, match=r"where 'op'.*condition.*\(4,\).*\(5, 3\)"):
        s.infer_shape(condition=(4,), x=(5, 3))

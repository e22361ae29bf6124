import operator

import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, op_symbol

TESTS = {"equal": operator.eq, "not_equal": operator.ne, "greater": operator.gt,
         "greater_equal": operator.ge, "lesser": operator.lt, "lesser_equal": operator.le}
A = np.array([-3.5, -1, 0.5, 2, 7.25])
B = np.array([-3.5, 2, 0.25, 2, -7.25])  # equal, smaller and larger entries


def check_zero_gradients(ctx, s, inputs):
    ex = bind(s, inputs, ctx)
    out = ex.forward(is_train=True)[0]
    ex.backward([np.ones(out.shape)])
    for name in inputs:
        assert not as_numpy(ex.grad_dict[name]).any(), name


@pytest.mark.parametrize("name", sorted(TESTS))
def test_compare(ctx, name):
    test = TESTS[name]
    for op, inputs, expected in (
            (f"_{name}", {"lhs": A, "rhs": B}, test(A, B)),
            (f"broadcast_{name}", {"lhs": A.reshape(5, 1), "rhs": B}, test(A.reshape(5, 1), B)),
            (f"_{name}_scalar", {"data": A}, test(A, 2.0))):
        s = op_symbol(op, list(inputs), **({"scalar": 2} if "scalar" in op else {}))
        check_forward(s, inputs, expected.astype(float), ctx)
        out = check_forward(s, {k: v.astype(np.float32) for k, v in inputs.items()},
                            expected.astype(float), ctx)
        assert out[0].dtype == np.float32  # 1/0 in the input's dtype
        check_zero_gradients(ctx, s, inputs)


def test_compare_aliases_and_integer_scalars():
    x = np.array([1, 2], np.int32)
    # integer inputs see the scalar as their type: 1.5 becomes 1 (MXNet 1.9.1: [1, 0])
    out = op_symbol("_EqualScalar", ["data"], scalar=1.5).eval(data=x)[0]
    assert out.dtype == np.int32 and out.tolist() == [1, 0]
    out = op_symbol("_Greater", ["lhs", "rhs"]).eval(lhs=A, rhs=B)[0]
    assert out.tolist() == [0, 0, 1, 0, 1]


def test_compare_bad_shapes():
    with pytest.raises(ShapeError, match="_equal 'op'"):
        op_symbol("_equal", ["lhs", "rhs"]).infer_shape(lhs=(2, 3), rhs=(3, 2))
    with pytest.raises(ShapeError, match=r"broadcast_lesser 'op'.*lhs of shape \(2, 3\) and rhs "
                                         r"of shape \(2,\) cannot be broadcast"):
        op_symbol("broadcast_lesser", ["lhs", "rhs"]).infer_shape(lhs=(2, 3), rhs=(2,))

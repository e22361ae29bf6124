import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("attrs, rhs_shape, out_shape", [
    ({}, (6, 4), (6, 4)),
    ({"lhs_begin": 0, "lhs_end": 2, "rhs_begin": 1, "rhs_end": 2}, (5, 6, 7), (6, 4)),
    ({"lhs_begin": -3, "lhs_end": -1, "rhs_begin": 0, "rhs_end": 2}, (3, 2, 5), (3, 2, 4)),
    ({"lhs_begin": 1, "rhs_begin": 0}, (12,), (2, 12)),
    ({"lhs_begin": 1, "rhs_begin": 0, "rhs_end": None}, (4, 3), (2, 4, 3)),
])
def test_reshape_like(ctx, rng, attrs, rhs_shape, out_shape):
    s = op_symbol("reshape_like", ["lhs", "rhs"], **attrs)
    inputs = {"lhs": rng.standard_normal((2, 3, 4)), "rhs": rng.standard_normal(rhs_shape)}
    check_forward(s, inputs, inputs["lhs"].reshape(out_shape), ctx)
    check_gradient(s, inputs, ctx, no_grad=["rhs"])
    inputs32 = {k: v.astype(np.float32) for k, v in inputs.items()}
    assert check_forward(s, inputs32, inputs32["lhs"].reshape(out_shape), ctx)[0].dtype == \
        np.float32


def test_reshape_like_bad_input():
    with pytest.raises(ShapeError, match=r"reshape_like 'op'.*lhs of shape \(2, 3, 4\) has 24 "
                                         r"elements, the shape \(3, 5\).*has 15"):
        op_symbol("reshape_like", ["lhs", "rhs"]).infer_shape(lhs=(2, 3, 4), rhs=(3, 5))
    s = op_symbol("reshape_like", ["lhs", "rhs"], lhs_begin=2, lhs_end=1)
    with pytest.raises(ShapeError, match=r"lhs_begin=2, lhs_end=1 is not a non-empty range of "
                                         r"the axes of lhs of shape \(2, 3, 4\)"):
        s.infer_shape(lhs=(2, 3, 4), rhs=(2, 2))

import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol

# (lhs, rhs, transpose_a, transpose_b, numpy reference); N-d follows MXNet's contraction rule
DOT_CASES = [
    ((3, 4), (4, 5), False, False, lambda a, b: a @ b),
    ((4, 3), (5, 4), True, True, lambda a, b: a.T @ b.T),
    ((4,), (4,), False, False, lambda a, b: np.dot(a, b).reshape(1)),
    ((4,), (4, 3), False, False, lambda a, b: a @ b),
    ((2, 3, 4), (4, 5, 2), False, False, lambda a, b: np.tensordot(a, b, 1)),
    ((2, 3, 4), (2, 5), True, False, lambda a, b: np.tensordot(a, b, ([0], [0]))),
    ((2, 3, 4), (5, 6, 4), False, True, lambda a, b: np.tensordot(a, b, ([2], [2]))),
]


@pytest.mark.parametrize("lshape, rshape, ta, tb, reference", DOT_CASES)
def test_dot(ctx, rng, lshape, rshape, ta, tb, reference):
    s = op_symbol("dot", ["lhs", "rhs"], transpose_a=ta, transpose_b=tb)
    inputs = {"lhs": rng.standard_normal(lshape), "rhs": rng.standard_normal(rshape)}
    check_forward(s, inputs, lambda lhs, rhs: reference(lhs, rhs), ctx)
    check_gradient(s, inputs, ctx)


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True), (True, True)])
def test_batch_dot(ctx, rng, ta, tb):
    s = op_symbol("batch_dot", ["lhs", "rhs"], transpose_a=ta, transpose_b=tb)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    inputs = {"lhs": np.ascontiguousarray(a.swapaxes(1, 2)) if ta else a,
              "rhs": np.ascontiguousarray(b.swapaxes(1, 2)) if tb else b}
    check_forward(s, inputs, np.matmul(a, b), ctx)
    check_gradient(s, inputs, ctx)


def test_dot_shape_errors():
    assert op_symbol("batch_dot", ["lhs", "rhs"]).infer_shape(
        lhs=(2, 3, 4, 5), rhs=(2, 3, 5, 6))[1] == [(2, 3, 4, 6)]
    with pytest.raises(ShapeError, match=r"dot 'op'.*\(3, 4\).*\(5, 6\)"):
        op_symbol("dot", ["lhs", "rhs"]).infer_shape(lhs=(3, 4), rhs=(5, 6))
    with pytest.raises(ShapeError, match=r"batch_dot 'op'.*\(3, 4\)"):
        op_symbol("batch_dot", ["lhs", "rhs"]).infer_shape(lhs=(3, 4), rhs=(4, 6))

import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


def check_all(ctx, s, inputs, expected, no_grad=()):
    check_forward(s, inputs, expected, ctx)
    check_gradient(s, inputs, ctx, no_grad=no_grad)
    inputs32 = {k: v.astype(np.float32) for k, v in inputs.items()}
    assert check_forward(s, inputs32, expected.astype(np.float32), ctx)[0].dtype == np.float32


@pytest.mark.parametrize("data_shape, shape, out_shape", [
    ((3, 1, 2), (0, 4, 0), (3, 4, 2)), ((1, 1, 2), (3, 4, 2), (3, 4, 2)), ((2, 3), (2, 3), (2, 3)),
])
def test_broadcast_to(ctx, rng, data_shape, shape, out_shape):
    x = rng.standard_normal(data_shape)
    expected = x * np.ones(out_shape)  # numpy broadcasting written out
    check_all(ctx, op_symbol("broadcast_to", ["data"], shape=shape), {"data": x}, expected)


@pytest.mark.parametrize("lhs_shape, rhs_shape, attrs, out_shape", [
    ((3, 1, 2), (3, 5, 2), {}, (3, 5, 2)),
    ((3, 1, 1), (7, 4), {"lhs_axes": (1, -1), "rhs_axes": (0, 1)}, (3, 7, 4)),
    ((1, 2), (5, 2), {"lhs_axes": (0,)}, (5, 2)),  # only one of the axes: plain broadcast
])
def test_broadcast_like(ctx, rng, lhs_shape, rhs_shape, attrs, out_shape):
    inputs = {"lhs": rng.standard_normal(lhs_shape), "rhs": rng.standard_normal(rhs_shape)}
    s = op_symbol("broadcast_like", ["lhs", "rhs"], **attrs)
    check_all(ctx, s, inputs, inputs["lhs"] * np.ones(out_shape), no_grad=["rhs"])


@pytest.mark.parametrize("name", ["broadcast_axis", "broadcast_axes"])
def test_broadcast_axis(ctx, rng, name):
    x = rng.standard_normal((3, 1, 1))
    s = op_symbol(name, ["data"], axis=(1, -1), size=(4, 2))
    check_all(ctx, s, {"data": x}, x * np.ones((3, 4, 2)))


def test_broadcast_bad_input():
    to = op_symbol("broadcast_to", ["data"], shape=(3, 4, 3))
    with pytest.raises(ShapeError, match=r"broadcast_to 'op'.*data of shape \(3, 1, 2\) cannot "
                                         r"be broadcast to shape=\(3, 4, 3\)"):
        to.infer_shape(data=(3, 1, 2))
    with pytest.raises(ShapeError, match=r"cannot be broadcast to shape=\(4, 2\): the ranks"):
        op_symbol("broadcast_to", ["data"], shape=(4, 2)).infer_shape(data=(3, 1, 2))
    like = op_symbol("broadcast_like", ["lhs", "rhs"])
    with pytest.raises(ShapeError, match=r"data of shape \(3, 1, 2\) cannot be broadcast to "
                                         r"rhs's shape \(4, 5, 2\)"):
        like.infer_shape(lhs=(3, 1, 2), rhs=(4, 5, 2))
    like = op_symbol("broadcast_like", ["lhs", "rhs"], lhs_axes=(0,), rhs_axes=(0,))
    with pytest.raises(ShapeError, match=r"axis 0 of lhs of shape \(3, 1\) has size 3"):
        like.infer_shape(lhs=(3, 1), rhs=(5,))
    with pytest.raises(AttributeValueError, match="broadcast_like: lhs_axes=.*same length"):
        op_symbol("broadcast_like", ["lhs", "rhs"], lhs_axes=(0, 1), rhs_axes=(0,))
    with pytest.raises(ShapeError, match=r"axis=\(3,\): axis=3 is out of range for data of "
                                         r"shape \(3, 1\)"):
        op_symbol("broadcast_axis", ["data"], axis=3, size=2).infer_shape(data=(3, 1))

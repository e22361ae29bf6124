import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol

# (attributes, numpy axes, output shape)
CASES = [({}, None, (1,)), ({"axis": 1}, 1, (2, 4)), ({"axis": (0, 2), "keepdims": True},
                                                       (0, 2), (1, 3, 1)),
         ({"axis": (0, 1, 2)}, None, (1,)), ({"axis": -1, "keepdims": True}, -1, (2, 3, 1))]


@pytest.mark.parametrize("ord_", [1, 2])
@pytest.mark.parametrize("attrs, axes, shape", CASES)
def test_norm(ctx, rng, ord_, attrs, axes, shape):
    x = rng.standard_normal((2, 3, 4))
    if ord_ == 1:
        expected = np.abs(x).sum(axis=axes)
    else:
        expected = np.sqrt((x * x).sum(axis=axes))
    s = op_symbol("norm", ["data"], ord=ord_, **attrs)
    check_forward(s, {"data": x}, np.reshape(expected, shape), ctx)
    check_gradient(s, {"data": x}, ctx)
    out = check_forward(s, {"data": x.astype(np.float32)},
                        np.reshape(expected, shape).astype(np.float32), ctx, rtol=1e-5)
    assert out[0].dtype == np.float32


def test_norm_out_dtype_and_zero_gradient(ctx):
    x = np.array([[3.0, 4.0], [0.0, 0.0]], np.float32)
    s = op_symbol("norm", ["data"], axis=1, out_dtype="float64")
    assert s.infer_type(data="float32")[1] == [np.dtype("float64")]
    out = check_forward(s, {"data": x}, np.array([5.0, 0.0]), ctx)
    assert out[0].dtype == np.float64  # MXNet 1.9.1 fails at runtime here
    ex = bind(op_symbol("norm", ["data"], axis=1), {"data": x}, ctx)
    ex.forward(is_train=True)
    ex.backward([np.ones(2, np.float32)])
    # x / |x| where the norm is non-zero, 0 where it is 0 (MXNet gives NaN there)
    np.testing.assert_allclose(as_numpy(ex.grad_dict["data"]), [[0.6, 0.8], [0, 0]], rtol=1e-6)


def test_norm_bad_input():
    with pytest.raises(AttributeValueError, match="norm: attribute 'ord' must be 1 or 2, got 3"):
        op_symbol("norm", ["data"], ord=3)
    with pytest.raises(AttributeValueError, match="norm: attribute 'out_dtype' must be one of"):
        op_symbol("norm", ["data"], out_dtype="uint8")
    with pytest.raises(ShapeError, match=r"norm 'op'.*axis=3 is out of range"):
        op_symbol("norm", ["data"], axis=3).infer_shape(data=(2, 3, 4))


@pytest.mark.parametrize("attrs, axes", [({}, None), ({"axis": 1}, 1),
                                         ({"axis": 0, "exclude": True, "keepdims": True},
                                          (1, 2))])
def test_square_sum(ctx, rng, attrs, axes):
    x = rng.standard_normal((2, 3, 4))
    expected = (x ** 2).sum(axis=axes, keepdims=attrs.get("keepdims", False))
    s = op_symbol("_square_sum", ["data"], **attrs)
    check_forward(s, {"data": x}, np.reshape(expected, np.shape(expected) or (1,)), ctx)
    check_gradient(s, {"data": x}, ctx)
    out = check_forward(s, {"data": x.astype(np.float32)},
                        np.reshape(expected, np.shape(expected) or (1,)), ctx, rtol=1e-5)
    assert out[0].dtype == np.float32

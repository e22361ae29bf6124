import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


def np_softmax(x, axis, t=1.0):
    e = np.exp((x - x.max(axis=axis, keepdims=True)) / t)
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis, temperature", [(-1, None), (0, 2.0), (1, 0.5)])
def test_softmax_and_log_softmax(ctx, rng, axis, temperature):
    x = rng.standard_normal((3, 4, 2)) * 3
    t = temperature or 1.0
    attrs = dict(axis=axis, temperature=temperature)
    check_forward(op_symbol("softmax", ["data"], **attrs), {"data": x},
                  lambda data: np_softmax(data, axis, t), ctx)
    check_forward(op_symbol("log_softmax", ["data"], **attrs), {"data": x},
                  lambda data: np.log(np_softmax(data, axis, t)), ctx)
    check_gradient(op_symbol("softmax", ["data"], **attrs), {"data": x}, ctx)
    check_gradient(op_symbol("log_softmax", ["data"], **attrs), {"data": x}, ctx)


@pytest.mark.parametrize("mode, axis", [("instance", -1), ("channel", 1)])
def test_softmax_activation(ctx, rng, mode, axis):
    s = op_symbol("SoftmaxActivation", ["data"], mode=mode)
    x = rng.standard_normal((2, 3, 4))
    check_forward(s, {"data": x}, lambda data: np_softmax(data, axis), ctx)
    check_gradient(s, {"data": x}, ctx)


def test_softmax_is_stable_and_honours_dtype(rng):
    x = np.array([[1000.0, 0.0, -1000.0]], dtype=np.float32)
    out = check_forward(op_symbol("softmax", ["data"], dtype="float64"), {"data": x},
                        np.array([[1.0, 0.0, 0.0]]))
    assert out[0].dtype == np.float64
    assert np.isfinite(check_forward(op_symbol("log_softmax", ["data"]), {"data": x},
                                     np.array([[0.0, -1000.0, -2000.0]]))[0]).all()
    with pytest.raises(AttributeValueError, match="use_length"):
        op_symbol("softmax", ["data"], use_length=True)
    with pytest.raises(ShapeError, match="channel"):
        op_symbol("SoftmaxActivation", ["data"], mode="channel").infer_shape(data=(2, 3))

import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


def reference(data, index, axis, mode, keepdims):
    n = data.shape[axis]
    idx = np.trunc(index).astype(int).reshape(np.delete(data.shape, axis % data.ndim))
    idx = np.clip(idx, 0, n - 1) if mode == "clip" else idx % n
    out = np.take_along_axis(data, np.expand_dims(idx, axis), axis)
    return out if keepdims else out.squeeze(axis)


@pytest.mark.parametrize("axis, mode, keepdims, index_shape", [
    (1, "clip", False, (2, 4)), (-2, "wrap", True, (2, 4)), (1, "wrap", False, (2, 1, 4)),
    (-1, "clip", False, (2, 3)), (0, "wrap", True, (1, 3, 4)),
])
def test_pick(ctx, rng, axis, mode, keepdims, index_shape):
    s = op_symbol("pick", ["data", "index"], axis=axis, mode=mode, keepdims=keepdims)
    index = np.trunc(rng.uniform(-5, 8, index_shape))  # many outside [0, n)
    inputs = {"data": rng.standard_normal((2, 3, 4)), "index": index}
    check_forward(s, inputs, lambda data, index: reference(data, index, axis, mode, keepdims),
                  ctx)
    check_gradient(s, inputs, ctx, no_grad=["index"])
    inputs32 = {k: v.astype(np.float32) for k, v in inputs.items()}
    out = check_forward(s, inputs32, reference(inputs32["data"], index, axis, mode, keepdims),
                        ctx)
    assert out[0].dtype == np.float32


def test_pick_matches_mxnet_literals():
    # recorded from MXNet 1.9.1: pick(arange(12).reshape(3, 4), [0, 5, -1], axis=1)
    data, index = np.arange(12.0).reshape(3, 4), np.array([0.0, 5, -1])
    for mode, expected in (("clip", [0, 7, 8]), ("wrap", [0, 5, 11])):
        out = op_symbol("pick", ["data", "index"], axis=1, mode=mode).eval(data=data, index=index)
        np.testing.assert_array_equal(out[0], expected)
    s = op_symbol("pick", ["data", "index"])
    assert s.infer_shape(data=(3, 4))[0] == [(3, 4), (3,)]  # index shape inferred


def test_pick_bad_input():
    s = op_symbol("pick", ["data", "index"], axis=1)
    with pytest.raises(ShapeError, match=r"pick 'op'.*index of shape \(2,\) does not fit data "
                                         r"of shape \(3, 4\) with axis=1: expected \(3,\)"):
        s.infer_shape(data=(3, 4), index=(2,))
    with pytest.raises(ShapeError, match=r"axis=2 is out of range for data of shape \(3, 4\)"):
        op_symbol("pick", ["data", "index"], axis=2).infer_shape(data=(3, 4))
    with pytest.raises(AttributeValueError, match="pick: axis=None is not supported"):
        op_symbol("pick", ["data", "index"], axis=None)
    with pytest.raises(AttributeValueError, match="pick: attribute 'mode'"):
        op_symbol("pick", ["data", "index"], mode="raise")

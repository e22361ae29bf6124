import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("axes, like_shape, window", [
    ((), (1, 2, 3), (slice(0, 1), slice(0, 2), slice(0, 3))),
    ((-1, 1), (5, 2, 3), (slice(None), slice(0, 2), slice(0, 3))),
    ((0,), (1,), (slice(0, 1),)),
])
def test_slice_like(ctx, rng, axes, like_shape, window):
    s = op_symbol("slice_like", ["data", "shape_like"], axes=axes)
    inputs = {"data": rng.standard_normal((2, 3, 4)), "shape_like": rng.standard_normal(like_shape)}
    check_forward(s, inputs, lambda data, shape_like: data[window], ctx)
    grads = check_gradient(s, inputs, ctx)
    np.testing.assert_array_equal(grads["shape_like"], 0)  # MXNet: zero gradient
    inputs32 = {k: v.astype(np.float32) for k, v in inputs.items()}
    assert check_forward(s, inputs32, inputs32["data"][window], ctx)[0].dtype == np.float32


def test_slice_like_bad_shapes():
    s = op_symbol("slice_like", ["data", "shape_like"])
    with pytest.raises(ShapeError, match=r"slice_like 'op'.*data of shape \(2, 3\) and "
                                         r"shape_like of shape \(2,\) must have the same rank"):
        s.infer_shape(data=(2, 3), shape_like=(2,))
    with pytest.raises(ShapeError, match=r"larger than data of shape \(2, 3\) along axis 1"):
        s.infer_shape(data=(2, 3), shape_like=(2, 4))
    s = op_symbol("slice_like", ["data", "shape_like"], axes=(2,))
    with pytest.raises(ShapeError,
                       match=r"axes=\(2,\): axis=2 is out of range for data of shape \(2, 3\)"):
        s.infer_shape(data=(2, 3), shape_like=(2, 3))

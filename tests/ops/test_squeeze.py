import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("shape, axis, out_shape", [
    ((1, 3, 1, 2), None, (3, 2)), ((1, 3, 1, 2), (0, -2), (3, 2)), ((1, 3, 1, 2), (2,), (1, 3, 2)),
    ((1, 1), None, (1,)),  # squeezing everything leaves (1,), as MXNet
])
def test_squeeze(ctx, rng, shape, axis, out_shape):
    x = rng.standard_normal(shape)
    s = op_symbol("squeeze", ["data"], axis=axis)
    check_forward(s, {"data": x}, x.reshape(out_shape), ctx)
    check_gradient(s, {"data": x}, ctx)
    out = check_forward(s, {"data": x.astype(np.float32)}, x.reshape(out_shape).astype(np.float32),
                        ctx)
    assert out[0].dtype == np.float32


def test_squeeze_bad_axes():
    with pytest.raises(ShapeError, match=r"squeeze 'op'.*axis 0 of data of shape \(3, 1\) has "
                                         r"size 3, not 1"):
        op_symbol("squeeze", ["data"], axis=0).infer_shape(data=(3, 1))
    with pytest.raises(ShapeError, match=r"axis=\(0, -2\) names an axis twice"):
        op_symbol("squeeze", ["data"], axis=(0, -2)).infer_shape(data=(1, 1))
    with pytest.raises(ShapeError, match=r"axis=\(2,\): axis=2 is out of range for data of "
                                         r"shape \(3, 1\)"):
        op_symbol("squeeze", ["data"], axis=2).infer_shape(data=(3, 1))

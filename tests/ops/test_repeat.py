import numpy as np
import pytest

from raymod.base import AttributeValueError, ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


def repeated(x, repeats, axis):
    """Reference: each element followed by its copies, written with an outer product."""
    if axis is None:
        return (x.reshape(-1, 1) * np.ones(repeats)).reshape(-1)
    axis %= x.ndim
    moved = np.moveaxis(x, axis, -1)[..., None] * np.ones(repeats)
    return np.moveaxis(moved.reshape(moved.shape[:-2] + (-1,)), -1, axis)


@pytest.mark.parametrize("repeats, axis", [(2, None), (3, -1), (2, 0), (1, 1)])
def test_repeat(ctx, rng, repeats, axis):
    x = rng.standard_normal((3, 1, 2))
    s = op_symbol("repeat", ["data"], repeats=repeats, axis=axis)
    check_forward(s, {"data": x}, repeated(x, repeats, axis), ctx)
    check_gradient(s, {"data": x}, ctx)
    out = check_forward(s, {"data": x.astype(np.float32)},
                        repeated(x, repeats, axis).astype(np.float32), ctx)
    assert out[0].dtype == np.float32


def test_repeat_bad_input():
    with pytest.raises(AttributeValueError, match="repeat: repeats must be >= 1, got 0"):
        op_symbol("repeat", ["data"], repeats=0)
    with pytest.raises(ShapeError, match=r"repeat 'op'.*axis=3 is out of range for data of "
                                         r"shape \(3, 1, 2\)"):
        op_symbol("repeat", ["data"], repeats=2, axis=3).infer_shape(data=(3, 1, 2))

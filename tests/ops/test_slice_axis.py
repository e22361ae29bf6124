import pytest

from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("axis, begin, end", [(1, 1, 4), (1, -3, None), (-1, 0, -1), (0, 1, None)])
def test_slice_axis(ctx, rng, axis, begin, end):
    s = op_symbol("slice_axis", ["data"], axis=axis, begin=begin, end=end)
    x = rng.standard_normal((3, 5))
    index = (slice(None),) * (axis % 2) + (slice(begin, end),)
    check_forward(s, {"data": x}, lambda data: data[index], ctx)
    check_gradient(s, {"data": x}, ctx)


def test_slice_axis_bad_range():
    with pytest.raises(ShapeError, match="begin=3, end=2"):
        op_symbol("slice_axis", ["data"], axis=1, begin=3, end=2).infer_shape(data=(2, 5))
    with pytest.raises(ShapeError, match="end=7"):
        op_symbol("slice_axis", ["data"], axis=1, begin=0, end=7).infer_shape(data=(2, 5))

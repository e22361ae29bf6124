import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("axis", [0, 2, -1, -3])
def test_expand_dims(ctx, rng, axis):
    s = op_symbol("expand_dims", ["data"], axis=axis)
    x = rng.standard_normal((2, 3))
    check_forward(s, {"data": x}, lambda data: np.expand_dims(data, axis), ctx)
    check_gradient(s, {"data": x}, ctx)


def test_expand_dims_axis_out_of_range():
    with pytest.raises(ShapeError, match="axis=3"):
        op_symbol("expand_dims", ["data"], axis=3).infer_shape(data=(2, 3))

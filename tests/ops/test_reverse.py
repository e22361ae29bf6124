import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("name", ["reverse", "flip"])
@pytest.mark.parametrize("axis", [0, -1, (0, 2), (1,), (1, 1, 2)])
def test_reverse(ctx, rng, name, axis):
    s = op_symbol(name, ["data"], axis=axis)
    x = rng.standard_normal((2, 3, 4))
    flipped = 2 if axis == (1, 1, 2) else axis  # an axis named twice flips back (MXNet)
    check_forward(s, {"data": x}, lambda data: np.flip(data, flipped), ctx)
    check_gradient(s, {"data": x}, ctx)


def test_reverse_bad_axis():
    with pytest.raises(ShapeError, match=r"reverse 'op'.*axis=3"):
        op_symbol("reverse", ["data"], axis=3).infer_shape(data=(2, 3))
    assert op_symbol("flip", ["data"], axis=1).infer_shape_partial(data=(0, 3))[1] == [(0, 3)]

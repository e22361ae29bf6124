import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("axes", [(), (1, 0, 2), (2, 0, 1), (-1, 0, 1)])
def test_transpose(ctx, rng, axes):
    s = op_symbol("transpose", ["data"], axes=axes)
    x = rng.standard_normal((2, 3, 4))
    check_forward(s, {"data": x}, lambda data: np.transpose(data, axes or None), ctx)
    check_gradient(s, {"data": x}, ctx)


def test_transpose_shapes():
    s = op_symbol("transpose", ["data"], axes=(2, 0, 1))
    assert s.infer_shape_partial(data=(0, 3, 4))[1] == [(4, 0, 3)]
    with pytest.raises(ShapeError, match="permutation"):
        op_symbol("transpose", ["data"], axes=(0, 0, 1)).infer_shape(data=(2, 3, 4))

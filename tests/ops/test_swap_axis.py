import numpy as np
import pytest

from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("dim1, dim2", [(0, 2), (1, 1), (-1, 0)])
def test_swap_axis(ctx, rng, dim1, dim2):
    s = op_symbol("SwapAxis", ["data"], dim1=dim1, dim2=dim2)
    x = rng.standard_normal((2, 3, 4))
    check_forward(s, {"data": x}, lambda data: np.swapaxes(data, dim1, dim2), ctx)
    check_gradient(s, {"data": x}, ctx)


def test_swapaxes_alias_shapes():
    s = op_symbol("swapaxes", ["data"], dim1=0, dim2=2)
    assert s.infer_shape(data=(2, 3, 4))[1] == [(4, 3, 2)]

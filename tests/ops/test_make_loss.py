import numpy as np
import pytest

from raymod.test_utils import assert_almost_equal, bind, op_symbol


@pytest.mark.parametrize("shape,attrs,value", [
    ((4, 3), {}, 1.0),
    ((4, 3), {"grad_scale": 2.0}, 2.0),
    ((4, 3), {"normalization": "batch"}, 1 / 4),
    ((4, 3, 2), {"normalization": "batch"}, 1 / 12),  # MXNet: rows of the 2-d flattening
    ((5,), {"normalization": "batch"}, 1.0),
    ((4, 3), {"normalization": "valid", "valid_thresh": 0.5, "grad_scale": 3.0}, 3 / 5),
])
def test_make_loss(ctx, shape, attrs, value):
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape) / 10 - 0.1  # 5 above 0.5
    ex = bind(op_symbol("MakeLoss", ["data"], **attrs), {"data": x}, ctx)
    assert_almost_equal(ex.forward(is_train=True)[0], x)
    ex.backward([np.full(shape, 7.0)])  # the head gradient is ignored
    assert_almost_equal(ex.grad_dict["data"], np.full(shape, value))


@pytest.mark.parametrize("name,attrs", [("MakeLoss", {"normalization": "valid"}),
                                        ("make_loss", {})])
def test_make_loss_nothing_valid_and_alias(name, attrs):
    ex = bind(op_symbol(name, ["data"], **attrs), {"data": -np.ones((2, 3))})
    ex.forward(is_train=True)
    ex.backward()
    assert_almost_equal(ex.grad_dict["data"], np.ones((2, 3)))

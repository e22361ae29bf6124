import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import AttributeValueError, ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol

# (begin, end, step, the same window written as Python slices)
WINDOWS = [
    ((None, 1), (None, None), (None, -1), (slice(None), slice(1, None, -1))),
    ((1, 2), (0, 0), (-1, -1), (slice(1, 0, -1), slice(2, 0, -1))),
    ((0, -10), (2, 10), (), (slice(0, 2), slice(-10, 10))),
    ((None,) * 3, (None,) * 3, (-1, -2, 2), (slice(None, None, -1), slice(None, None, -2),
                                             slice(None, None, 2))),
    ((0, 10), (1, -10), (1, -1), (slice(0, 1), slice(10, -10, -1))),
    ((-1,), (None,), (), (slice(-1, None),)),
]


@pytest.mark.parametrize("name", ["slice", "crop"])
@pytest.mark.parametrize("begin, end, step, window", WINDOWS)
def test_slice(ctx, rng, name, begin, end, step, window):
    s = op_symbol(name, ["data"], begin=begin, end=end, step=step)
    x = rng.standard_normal((2, 3, 4))
    check_forward(s, {"data": x}, lambda data: data[window], ctx)
    check_gradient(s, {"data": x}, ctx)
    out = check_forward(s, {"data": x.astype(np.float32)}, x[window].astype(np.float32), ctx)
    assert out[0].dtype == np.float32


def test_slice_matches_mxnet_literals():
    # recorded from MXNet 1.9.1: mx.nd.slice(arange(24).reshape(2,3,4), ...)
    x = np.arange(24.0).reshape(2, 3, 4)
    s = op_symbol("slice", ["data"], begin=(1, 2), end=(0, 0), step=(-1, -1))
    np.testing.assert_array_equal(s.eval(data=x)[0].ravel(), [20, 21, 22, 23, 16, 17, 18, 19])


def test_slice_shapes_and_json():
    s = sym.slice(sym.Variable("x"), begin=(None, 1), end=(None, None), step=(None, -1))
    assert s.infer_shape(x=(5, 3, 2))[1] == [(5, 2, 2)]
    # unknown dims: sliced ones stay unknown, whole ones come back from the output
    assert s.infer_shape_partial(x=(0, 3, 0))[1] == [(0, 2, 0)]
    assert '"begin": "(None, 1)"' in s.tojson() and '"step": "(None, -1)"' in s.tojson()


def test_slice_bad_input():
    with pytest.raises(AttributeValueError, match="slice: begin=.*end=.*same length"):
        op_symbol("slice", ["data"], begin=(0, 1), end=(1,))
    with pytest.raises(AttributeValueError, match="slice: step=.*begin"):
        op_symbol("slice", ["data"], begin=(0, 1), end=(1, 2), step=(1,))
    with pytest.raises(AttributeValueError, match=r"slice: step=\(0,\) has a 0"):
        op_symbol("slice", ["data"], begin=(0,), end=(1,), step=(0,))
    with pytest.raises(ShapeError, match=r"slice 'op'.*begin=\(0, 0, 0\) has more entries than "
                                         r"data of shape \(2, 3\)"):
        op_symbol("slice", ["data"], begin=(0, 0, 0), end=(1, 1, 1)).infer_shape(data=(2, 3))
    with pytest.raises(ShapeError, match=r"selects nothing from axis 0 of data of shape \(5, 3\)"):
        op_symbol("slice", ["data"], begin=(3,), end=(1,)).infer_shape(data=(5, 3))

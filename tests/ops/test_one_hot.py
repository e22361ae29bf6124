import numpy as np
import pytest

from raymod.base import AttributeValueError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, op_symbol


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "uint8"])
def test_one_hot(ctx, dtype):
    indices = np.array([[0.0, 2, -1], [5, 1.7, 3]])  # -1 and 5 are out of range: all off
    s = op_symbol("one_hot", ["indices"], depth=4, on_value=2, off_value=1, dtype=dtype)
    expected = np.ones((2, 3, 4), dtype)
    for i, j in np.ndindex(2, 3):
        k = int(np.trunc(indices[i, j]))
        if 0 <= k < 4:
            expected[i, j, k] = 2
    out = check_forward(s, {"indices": indices}, expected, ctx)
    assert out[0].dtype == np.dtype(dtype)


def test_one_hot_defaults_and_no_gradient(ctx):
    s = op_symbol("one_hot", ["indices"], depth=3)
    out = check_forward(s, {"indices": np.array([1.0, 0])}, np.array([[0, 1, 0], [1, 0, 0.0]]),
                        ctx)
    assert out[0].dtype == np.float32
    assert s.infer_shape(indices=(2, 5))[1] == [(2, 5, 3)]
    ex = bind(s, {"indices": np.array([1.0, 0])}, ctx)
    ex.forward(is_train=True)
    ex.backward([np.ones((2, 3))])
    assert not as_numpy(ex.grad_dict["indices"]).any()


def test_one_hot_bad_input():
    with pytest.raises(AttributeValueError, match="one_hot: depth must be >= 1, got 0"):
        op_symbol("one_hot", ["indices"], depth=0)
    with pytest.raises(AttributeValueError, match="one_hot: attribute 'dtype' must be one of"):
        op_symbol("one_hot", ["indices"], depth=2, dtype="bool")

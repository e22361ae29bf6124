import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import AttributeValueError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("name", ["Cast", "cast"])
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int32", "uint8", "bool"])
def test_cast_forward(ctx, name, dtype):
    x = np.array([[-1.7, 0.0, 2.9], [3.2, 0.5, 100.0]], dtype=np.float32)
    # integer targets truncate toward zero (MXNet and C casts); bool is "non-zero"
    expected = {"bool": x != 0, "int32": np.trunc(x), "uint8": np.trunc(np.abs(x))}.get(
        dtype, x).astype(dtype)
    if dtype == "uint8":
        x = np.abs(x)  # negative floats to unsigned are undefined in C and numpy
    out = check_forward(op_symbol(name, ["data"], dtype=dtype), {"data": x}, expected, ctx)
    assert out[0].dtype == np.dtype(dtype)


def test_cast_gradient_comes_back_in_the_input_dtype(ctx, rng):
    x = rng.standard_normal((3, 4))
    check_gradient(op_symbol("Cast", ["data"], dtype="float64"), {"data": x}, ctx)
    ex = bind(op_symbol("Cast", ["data"], dtype="float64"), {"data": x.astype(np.float32)}, ctx)
    assert ex.forward(is_train=True)[0].dtype == np.float64
    ex.backward([np.full((3, 4), 2.0)])
    grad = as_numpy(ex.grad_dict["data"])
    assert grad.dtype == np.float32
    np.testing.assert_array_equal(grad, 2.0)


def test_cast_types_and_json():
    s = sym.cast(sym.Variable("x"), dtype=np.float16)
    assert s.infer_type(x="float32")[1] == [np.dtype("float16")]
    assert s.name.startswith("cast")  # named after the alias used, as MXNet
    assert '"op": "Cast"' in s.tojson() and '"dtype": "float16"' in s.tojson()


def test_cast_bad_dtype():
    with pytest.raises(AttributeValueError, match="Cast.*'dtype'.*complex64"):
        op_symbol("Cast", ["data"], dtype="complex64")
    with pytest.raises(AttributeValueError, match="Cast: required attribute 'dtype'"):
        op_symbol("Cast", ["data"])

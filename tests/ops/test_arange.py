import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import AttributeValueError
from raymod.test_utils import check_forward


@pytest.mark.parametrize("name", ["_arange", "arange"])
@pytest.mark.parametrize("attrs, expected", [
    ({"start": 2, "stop": 7.5, "step": 1.5, "repeat": 2}, [2, 2, 3.5, 3.5, 5, 5, 6.5, 6.5]),
    ({"start": 5}, [0, 1, 2, 3, 4]),  # stop=None: the range is [0, start)
    ({"start": 5, "stop": 1, "step": -1.5}, [5, 3.5, 2]),
    # an integer dtype truncates the step to 0 first (MXNet 1.9.1 gives the same zeros)
    ({"start": 0, "stop": 2.5, "step": 0.5, "dtype": "int32"}, [0, 0, 0, 0, 0]),
])
def test_arange(ctx, name, attrs, expected):
    out = check_forward(getattr(sym, name)(**attrs), {}, np.array(expected, attrs.get(
        "dtype", "float32")), ctx)
    assert out[0].dtype == np.dtype(attrs.get("dtype", "float32"))


def test_arange_float32_values_and_float64(ctx):
    # computed as start + i * step in the output dtype (MXNet's float32 values, bit for bit)
    i = np.arange(29, dtype=np.float32)
    expected = np.float32(0.1) + i * np.float32(0.1)
    check_forward(sym.arange(start=0.1, stop=3, step=0.1), {}, expected, ctx, rtol=0, atol=0)
    out = check_forward(sym.arange(start=0.1, stop=3, step=0.1, dtype="float64"), {},
                        0.1 + np.arange(29) * 0.1, ctx)
    assert out[0].dtype == np.float64


def test_arange_infer_range(ctx):
    # the length comes from the graph; the values start at `start`
    s = sym.arange(start=2, step=3, infer_range=True) + sym.Variable("x")
    assert s.infer_shape(x=(5,))[1] == [(5,)]
    check_forward(s, {"x": np.zeros(5, np.float32)}, np.array([2, 5, 8, 11, 14.0]), ctx)


def test_arange_json_name():
    s = sym.arange(start=2, stop=7, name="ar")
    assert '"op": "_arange"' in s.tojson()
    loaded = sym.load_json(s.tojson())
    assert loaded.infer_shape()[1] == [(5,)]


def test_arange_bad_input():
    with pytest.raises(AttributeValueError, match=r"_arange: start=5.0, stop=1.0, step=1.0 is "
                                                  "an empty range"):
        sym.arange(start=5, stop=1)
    with pytest.raises(AttributeValueError, match="_arange: step must not be 0"):
        sym.arange(start=0, stop=3, step=0)
    with pytest.raises(AttributeValueError, match="_arange: repeat must be >= 1"):
        sym.arange(start=3, repeat=0)

import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, op_symbol

TIES = np.array([[3.0, 1, 3, 2, 1], [0, 5, 5, 5, 1]])


@pytest.mark.parametrize("name, find", [("argmax", np.argmax), ("argmin", np.argmin)])
@pytest.mark.parametrize("attrs, shape", [({}, (1,)), ({"axis": 1}, (2,)),
                                          ({"axis": -1, "keepdims": True}, (2, 1)),
                                          ({"keepdims": True}, (1, 1)), ({"axis": 0}, (5,))])
def test_argmax_argmin(ctx, name, find, attrs, shape):
    s = op_symbol(name, ["data"], **attrs)
    # the first of equal extremes wins (MXNet too)
    expected = np.asarray(find(TIES, axis=attrs.get("axis")), float).reshape(shape)
    check_forward(s, {"data": TIES}, expected, ctx)
    out = check_forward(s, {"data": TIES.astype(np.float32)}, expected.astype(np.float32), ctx)
    assert out[0].dtype == np.float32  # MXNet gives positions in data's dtype


def test_argmax_literals_and_no_gradient(ctx):
    # recorded from MXNet 1.9.1
    assert op_symbol("argmax", ["data"], axis=1).eval(data=TIES)[0].tolist() == [0, 1]
    assert op_symbol("argmin", ["data"]).eval(data=TIES)[0].tolist() == [5]
    nan = np.array([[1.0, np.nan, 3]])
    assert op_symbol("argmax", ["data"], axis=1).eval(data=nan)[0].tolist() == [1]
    ex = bind(op_symbol("argmax", ["data"], axis=1), {"data": TIES}, ctx)
    ex.forward(is_train=True)
    ex.backward([np.ones(2)])
    assert not as_numpy(ex.grad_dict["data"]).any()


def test_argmax_bad_axis():
    with pytest.raises(ShapeError, match=r"argmin 'op'.*axis=2 is out of range for data of "
                                         r"shape \(2, 5\)"):
        op_symbol("argmin", ["data"], axis=2).infer_shape(data=(2, 5))

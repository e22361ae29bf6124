import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import AttributeValueError, ShapeError
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol

# values with ties; the expected orders below were recorded from MXNet 1.9.1 (ties keep
# their original order, lowest index first, ascending and descending)
TIES = np.array([[3.0, 1, 3, 2, 1], [0, 5, 5, 5, 1]])


def top(x, k, axis, ascending):
    """Reference: positions of the k largest (smallest) entries, via a full sort."""
    order = np.argsort(x if ascending else -x, axis=axis)
    return np.take(order, np.arange(k), axis=axis)


@pytest.mark.parametrize("axis, k, ascending", [(-1, 2, False), (1, 3, True), (0, 1, False)])
def test_topk_all_return_types(ctx, rng, axis, k, ascending):
    x = rng.standard_normal((3, 4, 5))  # distinct values
    idx = top(x, k, axis, ascending)
    values = np.take_along_axis(x, idx, axis)
    mask = np.zeros_like(x)
    np.put_along_axis(mask, idx, 1.0, axis)
    attrs = dict(axis=axis, k=k, is_ascend=ascending)
    for ret_typ, expected in (("value", [values]), ("indices", [idx.astype(np.float32)]),
                              ("mask", [mask]), ("both", [values, idx.astype(np.float32)])):
        s = op_symbol("topk", ["data"], ret_typ=ret_typ, **attrs)
        check_forward(s, {"data": x}, expected, ctx)
        out = check_forward(s, {"data": x.astype(np.float32)},
                            [e.astype(np.float32) for e in expected], ctx)
        assert out[0].dtype == np.float32
    for ret_typ in ("value", "both"):  # only the values have a gradient
        check_gradient(op_symbol("topk", ["data"], ret_typ=ret_typ, **attrs), {"data": x}, ctx)


def test_topk_ties_and_flattening_match_mxnet():
    def run(**attrs):
        return [o.tolist() for o in op_symbol("topk", ["data"], **attrs).eval(data=TIES)]
    assert run(k=2) == [[[0, 2], [1, 2]]]
    assert run(k=3, is_ascend=True) == [[[1, 4, 3], [0, 4, 1]]]
    assert run(k=2, ret_typ="mask") == [[[1, 0, 1, 0, 0], [0, 1, 1, 0, 0]]]
    assert run(k=3, axis=None, ret_typ="both") == [[5, 5, 5], [6, 7, 8]]
    assert run(k=0, ret_typ="value") == [[[3, 3, 2, 1, 1], [5, 5, 5, 1, 0]]]  # k < 1: all
    out = op_symbol("topk", ["data"], k=1, dtype="int32").eval(data=TIES)[0]
    assert out.dtype == np.int32 and out.tolist() == [[0], [1]]


def test_topk_value_gradient_goes_to_the_chosen_positions(ctx):
    ex = bind(op_symbol("topk", ["data"], k=2, ret_typ="value"), {"data": TIES}, ctx)
    ex.forward(is_train=True)
    ex.backward([np.array([[1.0, 2], [3, 4]])])
    # recorded from MXNet 1.9.1
    assert ex.grad_dict["data"].tolist() == [[1, 0, 2, 0, 0], [0, 3, 4, 0, 0]]


def test_topk_outputs_and_types():
    data = sym.Variable("data")
    assert sym.topk(data, ret_typ="both", name="t").list_outputs() == ["t_output0", "t_output1"]
    assert sym.topk(data, ret_typ="value", name="t").list_outputs() == ["t_output0"]
    assert sym.topk(data, ret_typ="mask", name="t").list_outputs() == ["t_output"]
    s = sym.topk(data, ret_typ="both", k=2)
    assert s.infer_type(data="float64")[1] == [np.dtype("float64"), np.dtype("float32")]
    assert s.infer_shape(data=(3, 7))[1] == [(3, 2), (3, 2)]


def test_topk_bad_input():
    with pytest.raises(ShapeError, match=r"topk 'op'.*k=6 is larger than the 5 entries along "
                                         r"axis=-1 of data of shape \(2, 5\)"):
        op_symbol("topk", ["data"], k=6).infer_shape(data=(2, 5))
    with pytest.raises(ShapeError, match=r"axis=5 is out of range for data of shape \(2, 5\)"):
        op_symbol("topk", ["data"], axis=5).infer_shape(data=(2, 5))
    with pytest.raises(AttributeValueError, match="topk: attribute 'ret_typ' must be one of"):
        op_symbol("topk", ["data"], ret_typ="values")
    with pytest.raises(AttributeValueError, match="topk: attribute 'dtype' must be one of"):
        op_symbol("topk", ["data"], dtype="int8")


@pytest.mark.parametrize("axis", [-1, 0, None])
@pytest.mark.parametrize("ascending", [True, False])
def test_sort_and_argsort(ctx, rng, axis, ascending):
    x = rng.standard_normal((3, 4))
    flat = x.reshape(-1) if axis is None else x
    ax = 0 if axis is None else axis
    order = np.argsort(flat if ascending else -flat, axis=ax)
    s = op_symbol("sort", ["data"], axis=axis, is_ascend=ascending)
    check_forward(s, {"data": x}, np.take_along_axis(flat, order, ax), ctx)
    check_gradient(s, {"data": x}, ctx)
    out = check_forward(s, {"data": x.astype(np.float32)},
                        np.take_along_axis(flat, order, ax).astype(np.float32), ctx)
    assert out[0].dtype == np.float32
    a = op_symbol("argsort", ["data"], axis=axis, is_ascend=ascending)
    assert check_forward(a, {"data": x}, order.astype(np.float32), ctx)[0].dtype == np.float32


def test_sort_and_argsort_ties_match_mxnet(ctx):
    s = op_symbol("argsort", ["data"], is_ascend=False)
    assert s.eval(data=TIES)[0].tolist() == [[0, 2, 3, 1, 4], [1, 2, 3, 4, 0]]
    s = op_symbol("argsort", ["data"], axis=None, dtype="int64")
    out = s.eval(data=TIES)[0]
    assert out.dtype == np.int64 and out.tolist() == [5, 1, 4, 9, 3, 0, 2, 6, 7, 8]
    ex = bind(op_symbol("sort", ["data"], axis=-1), {"data": TIES}, ctx)
    ex.forward(is_train=True)
    ex.backward([np.arange(10.0).reshape(2, 5)])
    # recorded from MXNet 1.9.1 (its backward works only with an explicit axis)
    assert ex.grad_dict["data"].tolist() == [[3, 0, 4, 2, 1], [5, 7, 8, 9, 6]]


def test_sort_bad_input():
    with pytest.raises(ShapeError, match=r"sort 'op'.*axis=2 is out of range for data of shape"):
        op_symbol("sort", ["data"], axis=2).infer_shape(data=(2, 5))
    with pytest.raises(ShapeError, match=r"argsort 'op'.*axis=-3 is out of range"):
        op_symbol("argsort", ["data"], axis=-3).infer_shape(data=(2, 5))

import pytest

import raymod.symbol as sym
from raymod.base import AttributeValueError, ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol

# (input shape, attributes, output shape), checked against MXNet 1.9.1
CASES = [
    ((2, 3, 4), dict(shape=(4, 0, 2)), (4, 3, 2)),
    ((2, 3, 4), dict(shape=(6, 1, -1)), (6, 1, 4)),
    ((2, 3, 4), dict(shape=(-1,)), (24,)),
    ((2, 3, 4), dict(shape=(2, -2)), (2, 3, 4)),
    ((2, 3, 4), dict(shape=(-2, 1, 1)), (2, 3, 4, 1, 1)),
    ((2, 3, 4, 5), dict(shape=(-3, -3)), (6, 20)),
    ((2, 3, 4), dict(shape=(0, -3)), (2, 12)),
    ((2, 3, 4), dict(shape=(-4, 1, 2, -2)), (1, 2, 3, 4)),
    ((2, 3, 4), dict(shape=(2, -4, -1, 3, -2)), (2, 1, 3, 4)),
    ((10, 5, 4), dict(shape=(-1, 0)), (40, 5)),
    ((10, 5, 4), dict(shape=(-1, 0), reverse=True), (50, 4)),
    ((2, 3, 4), dict(shape=(0, -1), reverse=True), (3, 8)),
    ((2, 3, 4), dict(shape=(-2, -3), reverse=True), (2, 12)),
    ((2, 3, 4), dict(target_shape=(0, 4)), (6, 4)),
    ((2, 3, 4), dict(target_shape=(5, 0), keep_highest=True), (2, 12)),
]


@pytest.mark.parametrize("dshape, attrs, oshape", CASES)
def test_reshape_codes(dshape, attrs, oshape):
    assert op_symbol("Reshape", ["data"], **attrs).infer_shape(data=dshape)[1] == [oshape]


def test_reshape_forward_backward(ctx, rng):
    s = op_symbol("Reshape", ["data"], shape=(0, -3))
    x = rng.standard_normal((2, 3, 4))
    check_forward(s, {"data": x}, lambda data: data.reshape(2, 12), ctx)
    check_gradient(s, {"data": x}, ctx)


def test_reshape_partial_and_backward_inference():
    s = op_symbol("reshape", ["data"], shape=(-1, 12))
    assert s.infer_shape_partial(data=(0, 3, 4))[1] == [(0, 12)]
    # the unknown batch size of data comes back from the other operand of a sum
    total = sym.Reshape(sym.Variable("x"), shape=(0, -1)) + sym.Variable("y")
    assert total.infer_shape(x=(0, 3, 4), y=(5, 12))[0] == [(5, 3, 4), (5, 12)]


def test_reshape_errors():
    with pytest.raises(ShapeError, match=r"Reshape 'op'.*\(2, 3, 4\).*\(5, 5\)"):
        op_symbol("Reshape", ["data"], shape=(5, 5)).infer_shape(data=(2, 3, 4))
    with pytest.raises(ShapeError, match="more than one -1"):
        op_symbol("Reshape", ["data"], shape=(-1, -1)).infer_shape(data=(2, 3, 4))
    with pytest.raises(ShapeError, match="do not multiply"):
        op_symbol("Reshape", ["data"], shape=(-4, 2, 2, -2)).infer_shape(data=(2, 3, 4))
    with pytest.raises(AttributeValueError, match="Reshape"):
        op_symbol("Reshape", ["data"])

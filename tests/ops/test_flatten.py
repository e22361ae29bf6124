import pytest

from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("shape", [(3, 2, 4), (2, 5), (4,)])
def test_flatten(ctx, rng, shape):
    sym = op_symbol("Flatten", ["data"])
    x = rng.standard_normal(shape)
    check_forward(sym, {"data": x}, lambda data: data.reshape(shape[0], -1), ctx)
    check_gradient(sym, {"data": x}, ctx)


def test_flatten_shapes_both_ways():
    sym = op_symbol("flatten", ["data"])
    assert sym.infer_shape(data=(5,))[1] == [(5, 1)]
    assert sym.infer_shape_partial(data=(0, 3, 4))[1] == [(0, 12)]

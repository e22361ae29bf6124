import numpy as np
import pytest

import raymod.symbol as sym
from raymod.context import as_numpy
from raymod.ops import get_op
from raymod.test_utils import bind, check_forward, op_symbol


@pytest.mark.parametrize("name, fill", [("zeros_like", 0.0), ("ones_like", 1.0)])
def test_fill_like(ctx, rng, name, fill):
    x = rng.standard_normal((2, 3))
    check_forward(op_symbol(name, ["data"]), {"data": x}, np.full((2, 3), fill), ctx)
    data = sym.Variable("data")
    ex = bind(getattr(sym, name)(data) + data, {"data": x}, ctx)
    ex.forward(is_train=True)
    ex.backward([np.ones((2, 3))])  # only the direct path carries a gradient
    np.testing.assert_allclose(as_numpy(ex.grad_dict["data"]), np.ones((2, 3)))


def test_zeros_ones_infer_their_batch_dim():
    z = sym._zeros(shape=(0, 4)) + sym.Variable("x")
    assert z.infer_shape(x=(3, 4)) == ([(3, 4)], [(3, 4)], [])
    o = sym.ones(shape=(2, 0), dtype="float16")
    assert o.list_arguments() == [] and o.infer_type()[1] == [np.dtype("float16")]
    # forward reads the executor's inferred shape (needs_out_shapes)
    op = get_op("_ones")(shape=(0, 4), dtype="float64")
    assert op.needs_out_shapes
    out = op.forward(np, [], [], False, out_shapes=[(3, 4)], out_dtypes=[np.dtype("float64")])[0]
    np.testing.assert_array_equal(out[0], np.ones((3, 4)))


def test_zeros_known_shape_in_graph(ctx):
    out = check_forward(sym.zeros(shape=(2, 3), dtype="float64") * 2.0, {}, np.zeros((2, 3)), ctx)
    assert out[0].dtype == np.float64


def test_zeros_inferred_batch_in_executor(ctx, rng):
    x = rng.standard_normal((3, 4))
    s = sym.zeros(shape=(0, 4), dtype="float64") + sym.ones(shape=(3, 0), dtype="float64")
    check_forward(s + sym.Variable("x"), {"x": x}, x + 1, ctx)

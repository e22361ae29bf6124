import numpy as np
import pytest

from raymod.test_utils import bind, check_forward, check_gradient, op_symbol

NUMPY = {"sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max, "min": np.min}
# (attributes, numpy axis, output shape without keepdims)
AXES = [({}, None, (1,)), ({"axis": 1}, 1, (2, 4)), ({"axis": (0, -1)}, (0, 2), (3,)),
        ({"axis": 1, "exclude": True}, (0, 2), (3,)), ({"axis": ()}, None, (1,))]


@pytest.mark.parametrize("name", sorted(NUMPY))
@pytest.mark.parametrize("attrs, axis, oshape", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce(ctx, rng, name, attrs, axis, oshape, keepdims):
    s = op_symbol(name, ["data"], keepdims=keepdims, **attrs)
    x = rng.standard_normal((2, 3, 4))  # distinct values: max/min have no ties
    expected = NUMPY[name](x, axis=axis, keepdims=keepdims)
    check_forward(s, {"data": x}, expected if keepdims else expected.reshape(oshape), ctx)
    check_gradient(s, {"data": x}, ctx)


def test_reduce_aliases_and_partial_shapes():
    assert op_symbol("sum_axis", ["data"], axis=1).infer_shape(data=(2, 3))[1] == [(2,)]
    s = op_symbol("max_axis", ["data"], axis=1, keepdims=True)
    assert s.infer_shape_partial(data=(0, 3, 4))[1] == [(0, 1, 4)]


def test_max_ties_all_get_the_gradient():
    ex = bind(op_symbol("max", ["data"], axis=1), {"data": np.array([[1., 3, 3], [2, 2, 0]])})
    ex.forward(is_train=True)
    ex.backward([np.array([1., 2])])
    np.testing.assert_array_equal(ex.grad_dict["data"], [[0, 1, 1], [2, 2, 0]])


def test_prod_gradient_with_zeros(ctx):
    # rows with no zero, one zero and two zeros: the gradient is the product of the others
    x = np.array([[2., 3, 4], [0, 3, 4], [0, 0, 4]])
    s = op_symbol("prod", ["data"], axis=1)
    check_forward(s, {"data": x}, np.array([24., 0, 0]), ctx)
    grads = check_gradient(s, {"data": x}, ctx, out_grads=[np.ones(3)])
    np.testing.assert_array_equal(grads["data"], [[12, 8, 6], [12, 0, 0], [0, 0, 0]])

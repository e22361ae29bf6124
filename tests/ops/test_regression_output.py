import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.context import as_numpy
from raymod.test_utils import assert_almost_equal, bind, op_symbol

HEADS = {  # forward, gradient per unit grad_scale (before dividing by num_output)
    "LinearRegressionOutput": (lambda x: x, lambda y, l: y - l),
    "LogisticRegressionOutput": (lambda x: 1 / (1 + np.exp(-x)), lambda y, l: y - l),
    "MAERegressionOutput": (lambda x: x, lambda y, l: np.sign(y - l)),
}


@pytest.mark.parametrize("shapes", [((4, 1), (4,)), ((4, 1), (4, 1)), ((4, 2, 3), (4, 2, 3))])
@pytest.mark.parametrize("op", sorted(HEADS))
def test_regression_output(ctx, rng, op, shapes):
    (dshape, lshape), (f, d) = shapes, HEADS[op]
    x, label = rng.standard_normal(dshape), rng.uniform(0, 1, lshape)
    ex = bind(op_symbol(op, ["data", "label"], grad_scale=3.0), {"data": x, "label": label},
              ctx, no_grad=["label"])
    out = ex.forward(is_train=True)[0]
    ex.backward()  # loss heads ignore (and need no) head gradients
    num_output = label.size // label.shape[0]
    assert_almost_equal(out, f(x))
    assert_almost_equal(ex.grad_dict["data"], d(f(x), label.reshape(dshape)) * 3.0 / num_output)


def test_linear_regression_gradient_is_derivative_of_squared_loss(rng):
    x, label = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    ex = bind(op_symbol("LinearRegressionOutput", ["data", "label"], grad_scale=2.0),
              {"data": x, "label": label}, no_grad=["label"])
    ex.forward(is_train=True)
    ex.backward()

    def loss(z):  # 0.5 * sum((z - label)^2) * grad_scale / num_output
        return 0.5 * ((z - label) ** 2).sum() * 2.0 / 2
    eye = np.eye(x.size).reshape((x.size,) + x.shape) * 1e-6
    numeric = np.array([(loss(x + e) - loss(x - e)) / 2e-6 for e in eye]).reshape(x.shape)
    np.testing.assert_allclose(as_numpy(ex.grad_dict["data"]), numeric, rtol=1e-6)


def test_regression_output_shapes():
    sym = op_symbol("LinearRegressionOutput", ["data", "label"])
    assert sym.infer_shape(data=(5, 1))[0] == [(5, 1), (5,)]
    assert sym.infer_shape(data=(5, 1), label=(5, 1))[0] == [(5, 1), (5, 1)]
    assert sym.infer_shape(data=(5, 3))[0] == [(5, 3), (5, 3)]
    with pytest.raises(ShapeError, match=r"LinearRegressionOutput 'op'.*label.*\(5,\)"):
        sym.infer_shape(data=(5, 3), label=(5,))

import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol

A = np.array([-3.5, -1.0, 0.5, 2.2, 7.25])
B = np.array([-3.0, 2.0, 0.3, 1.5, -6.5])  # no ratio a / b is whole: mod is smooth here


def python_mod(a, b):
    """Python's ``%`` (the sign of the divisor) elementwise, 0 where the divisor is 0."""
    return np.vectorize(lambda u, v: u % v if v else 0.0)(a, b)


@pytest.mark.parametrize("name, reference", [
    ("_mod", python_mod), ("_Mod", python_mod),
    ("_hypot", lambda a, b: np.sqrt(a * a + b * b)), ("_Hypot", np.hypot)])
def test_mod_hypot(ctx, name, reference):
    s = op_symbol(name, ["lhs", "rhs"])
    check_forward(s, {"lhs": A, "rhs": B}, reference(A, B), ctx)
    check_gradient(s, {"lhs": A, "rhs": B}, ctx)
    out = check_forward(s, {"lhs": A.astype(np.float32), "rhs": B.astype(np.float32)},
                        reference(A, B), ctx, rtol=1e-5, atol=1e-6)
    assert out[0].dtype == np.float32
    lhs, rhs = A.reshape(5, 1), B.reshape(1, 5)
    s = op_symbol(name.lower().replace("_", "broadcast_", 1), ["lhs", "rhs"])
    check_forward(s, {"lhs": lhs, "rhs": rhs}, reference(lhs, rhs), ctx)
    check_gradient(s, {"lhs": lhs, "rhs": rhs}, ctx)


def test_mod_by_zero_is_zero_with_zero_gradient(ctx):
    # MXNet 1.9.1: 0 where the divisor is 0; its gradients there are 1 and -inf
    ex = bind(op_symbol("_mod", ["lhs", "rhs"]), {"lhs": A, "rhs": np.array([0, 2, 0.3, 0, 1])},
              ctx)
    out = as_numpy(ex.forward(is_train=True)[0])
    np.testing.assert_allclose(out, [0, 1, 0.2, 0, 0.25], atol=1e-12)
    ex.backward([np.ones(5)])
    np.testing.assert_array_equal(as_numpy(ex.grad_dict["lhs"]), [0, 1, 1, 0, 1])
    np.testing.assert_array_equal(as_numpy(ex.grad_dict["rhs"]), [0, 1, -1, 0, -7])


def test_mod_hypot_bad_shapes():
    with pytest.raises(ShapeError, match=r"broadcast_mod 'op'.*lhs of shape \(2, 3\) and rhs "
                                         r"of shape \(2,\) cannot be broadcast"):
        op_symbol("broadcast_mod", ["lhs", "rhs"]).infer_shape(lhs=(2, 3), rhs=(2,))
    with pytest.raises(ShapeError, match="_hypot 'op'"):
        op_symbol("_hypot", ["lhs", "rhs"]).infer_shape(lhs=(2, 3), rhs=(3, 2))

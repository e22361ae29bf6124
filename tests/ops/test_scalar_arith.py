import numpy as np
import pytest

import raymod.symbol as sym
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol

REFERENCES = {
    "_plus_scalar": lambda x, s: x + s, "_minus_scalar": lambda x, s: x - s,
    "_rminus_scalar": lambda x, s: s - x, "_mul_scalar": lambda x, s: x * s,
    "_div_scalar": lambda x, s: x / s, "_rdiv_scalar": lambda x, s: s / x,
    "_power_scalar": lambda x, s: x ** s, "_RPowerScalar": lambda x, s: s ** x,
    "_maximum_scalar": np.maximum, "_MinimumScalar": np.minimum,
}


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_scalar_arith(ctx, rng, name):
    s = op_symbol(name, ["data"], scalar=2.5)
    x = rng.uniform(0.5, 4, (3, 4))  # around the scalar for maximum/minimum
    check_forward(s, {"data": x}, lambda data: REFERENCES[name](data, 2.5), ctx)
    check_gradient(s, {"data": x}, ctx)


def test_symbol_scalar_arithmetic_keeps_float32(rng):
    x = rng.uniform(0.5, 2, (2, 3)).astype(np.float32)
    a = sym.Variable("a")
    out = (3 - 2 / a * 1.5 + 1 - a / 4).eval(a=x)[0]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, 3 - 2 / x * 1.5 + 1 - x / 4, rtol=1e-6)


@pytest.mark.parametrize("name, grad", [("_maximum_scalar", [0, 1, 1]),
                                        ("_minimum_scalar", [1, 1, 0])])
def test_maximum_minimum_scalar_tie_passes_gradient(name, grad):
    ex = bind(op_symbol(name, ["data"], scalar=2), {"data": np.array([1., 2, 3])})
    ex.forward(is_train=True)
    ex.backward([np.ones(3)])
    np.testing.assert_array_equal(ex.grad_dict["data"], grad)


def python_mod(a, b):
    """Python's ``%`` (the sign of the divisor) elementwise, 0 where the divisor is 0."""
    return np.vectorize(lambda u, v: u % v if v else 0.0)(a, b)


@pytest.mark.parametrize("scalar", [3.0, -3.0, 2.5, 0.0])
def test_mod_rmod_hypot_scalar(ctx, scalar):
    x = np.array([-3.5, -1.2, 0.7, 2.2, 7.25])  # no ratio with a scalar is whole: smooth
    cases = {"_mod_scalar": python_mod(x, scalar), "_ModScalar": python_mod(x, scalar),
             "_rmod_scalar": python_mod(scalar, x), "_hypot_scalar": np.sqrt(x ** 2 + scalar ** 2)}
    for name, expected in cases.items():
        s = op_symbol(name, ["data"], scalar=scalar)
        check_forward(s, {"data": x}, expected, ctx)
        if not (name.startswith("_rmod") and scalar == 0):  # 0 mod x is flat: no test points
            check_gradient(s, {"data": x}, ctx)
        out = check_forward(s, {"data": x.astype(np.float32)}, expected, ctx, rtol=1e-5,
                            atol=1e-6)
        assert out[0].dtype == np.float32


def test_mod_scalar_mxnet_literals():
    x = np.array([-3.5, -1, 0.5, 2, 7.25])
    # recorded from MXNet 1.9.1: x % 3, 3 % x, and 3 % [0, 1] (0 where the divisor is 0)
    assert op_symbol("_mod_scalar", ["data"], scalar=3).eval(data=x)[0].tolist() == \
        [2.5, 2, 0.5, 2, 1.25]
    assert op_symbol("_rmod_scalar", ["data"], scalar=3).eval(data=x)[0].tolist() == \
        [-0.5, 0, 0, 1, 3]
    assert op_symbol("_rmod_scalar", ["data"], scalar=3).eval(
        data=np.array([0.0, 1]))[0].tolist() == [0, 0]
    ints = op_symbol("_mod_scalar", ["data"], scalar=2.5).eval(data=np.array([-7, 2, 3],
                                                                              np.int32))[0]
    assert ints.dtype == np.int32 and ints.tolist() == [1, 0, 1]  # the scalar becomes 2
    ex = bind(op_symbol("_rmod_scalar", ["data"], scalar=10), {"data": x})
    ex.forward(is_train=True)
    ex.backward([np.ones(5)])
    assert ex.grad_dict["data"].tolist() == [3, 10, -20, -5, -1]  # -floor(10 / x)
    ex = bind(op_symbol("_rmod_scalar", ["data"], scalar=3), {"data": np.array([0.0, 2])})
    ex.forward(is_train=True)
    ex.backward([np.ones(2)])
    assert ex.grad_dict["data"].tolist() == [0, -1]  # 0 at x = 0 (MXNet: -inf)

"""Unary math ops: the dense forward and gradient of the ops added for MXNet's sparse tests
(cbrt, tan, arcsin, ..., gamma), and every unary op on csr and row_sparse inputs: the
storage of the result and of the gradient, and their values against the dense computation."""
import math

import numpy as np
import pytest
import scipy.special

from raymod.context import as_numpy
from raymod.ops import get_op
from raymod.sparse import CSRArray, RowSparseArray, cast_storage
from raymod.test_utils import check_forward, check_gradient, numeric_gradients, op_symbol

# the dense gradients of sqrt and cbrt at a sparse input's zeros are infinite (as MXNet's),
# and finite differences of sqrt there step below 0
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _psi(x):
    out = scipy.special.digamma(x)
    return np.where((x <= 0) & (x == np.floor(x)), np.inf, out)


# name -> (reference f, reference f', input range)
NEW_OPS = {
    "cbrt": (np.cbrt, lambda x: 1 / (3 * np.cbrt(x) ** 2), (0.3, 2)),
    "rcbrt": (lambda x: 1 / np.cbrt(x), lambda x: -1 / (3 * np.cbrt(x) * x), (0.3, 2)),
    "tan": (np.tan, lambda x: 1 + np.tan(x) ** 2, (-1, 1)),
    "arcsin": (np.arcsin, lambda x: 1 / np.sqrt(1 - x * x), (-0.9, 0.9)),
    "arccos": (np.arccos, lambda x: -1 / np.sqrt(1 - x * x), (-0.9, 0.9)),
    "arctan": (np.arctan, lambda x: 1 / (1 + x * x), (-2, 2)),
    "sinh": (np.sinh, np.cosh, (-2, 2)),
    "cosh": (np.cosh, np.sinh, (-2, 2)),
    "arcsinh": (np.arcsinh, lambda x: 1 / np.sqrt(x * x + 1), (-2, 2)),
    "arccosh": (np.arccosh, lambda x: 1 / np.sqrt(x * x - 1), (1.2, 3)),
    "arctanh": (np.arctanh, lambda x: 1 / (1 - x * x), (-0.9, 0.9)),
    "degrees": (np.degrees, lambda x: np.full_like(x, 180 / math.pi), (-3, 3)),
    "radians": (np.radians, lambda x: np.full_like(x, math.pi / 180), (-90, 90)),
    "log10": (np.log10, lambda x: 1 / (x * math.log(10)), (0.3, 3)),
    "log2": (np.log2, lambda x: 1 / (x * math.log(2)), (0.3, 3)),
    "gamma": (scipy.special.gamma, lambda x: scipy.special.gamma(x) * _psi(x), (0.3, 3)),
    "gammaln": (scipy.special.gammaln, _psi, (0.3, 3)),
}
SCIPY_ONLY = {"gamma", "gammaln"}  # cupyx.scipy.special on a GPU


@pytest.mark.parametrize("name", sorted(NEW_OPS))
def test_new_unary_ops_dense(ctx, rng, name):
    if name in SCIPY_ONLY and ctx.device_type == "gpu":
        pytest.importorskip("cupyx.scipy.special")
    f, df, (low, high) = NEW_OPS[name]
    s = op_symbol(name, ["data"])
    x = rng.uniform(low, high, (3, 4))
    check_forward(s, {"data": x}, lambda data: f(data), ctx)
    grads = check_gradient(s, {"data": x}, ctx, out_grads=[np.ones((3, 4))])
    np.testing.assert_allclose(grads["data"], df(x), rtol=1e-6)


def test_digamma_at_the_poles_is_positive_infinity():
    """As MXNet's cephes psi: +inf at 0 and the negative integers (scipy: -inf, nan), so the
    gradient of gammaln is +inf there, and gamma's +inf at 0 (gamma(0) = inf; NaN at the
    negative integers, where gamma itself is NaN)."""
    x = np.array([0.0, -1.0, -2.0, 1.5])
    grads = {}
    for name in ("gamma", "gammaln"):
        op = get_op(name)()
        (y,), saved = op.forward(np, [x], [], True)
        (grads[name],) = op.backward(np, [np.ones(4)], [x], [y], saved, [True])
    assert np.isposinf(grads["gammaln"][:3]).all()
    assert np.isposinf(grads["gamma"][0]) and np.isnan(grads["gamma"][1:3]).all()
    assert np.isfinite(grads["gamma"][3]) and np.isfinite(grads["gammaln"][3])


def _sparse(x, stype):
    return cast_storage(x, stype)


def _rows_data(rng, shape, rows):
    x = np.zeros(shape)
    x[rows] = rng.uniform(0.2, 0.8, (len(rows),) + shape[1:])
    return x


def _csr_data(rng, shape, density=0.4):
    x = rng.uniform(0.2, 0.8, shape) * (rng.random(shape) < density)
    x[0, 0] = 0.5
    return x


# every keeps-zero op: f, and whether the gradient of a sparse input keeps its pattern
KEEPS_ZERO = {
    "square": (np.square, True), "abs": (np.abs, True), "relu": (lambda x: np.maximum(x, 0), True),
    "sign": (np.sign, True), "floor": (np.floor, True), "ceil": (np.ceil, True),
    "round": (lambda x: np.trunc(x) + np.sign(x) * (np.abs(x - np.trunc(x)) >= 0.5), True),
    "rint": (np.rint, True), "trunc": (np.trunc, True), "fix": (np.fix, True),
    "negative": (np.negative, None), "degrees": (np.degrees, None), "radians": (np.radians, None),
    "sqrt": (np.sqrt, False), "cbrt": (np.cbrt, False), "tanh": (np.tanh, False),
    "sin": (np.sin, False), "tan": (np.tan, False), "arcsin": (np.arcsin, False),
    "arctan": (np.arctan, False), "sinh": (np.sinh, False), "arcsinh": (np.arcsinh, False),
    "arctanh": (np.arctanh, False), "log1p": (np.log1p, False), "expm1": (np.expm1, False),
}


def _run_op(xp, name, x, head):
    op = get_op(name)()
    (y,), saved = op.forward(xp, [x], [], True)
    keep_x = x if op.retain_inputs else None
    keep_y = y if op.retain_outputs else None
    (g,) = op.backward(xp, [head], [keep_x], [keep_y], saved, [True])
    return op, y, g


def _dense(a):
    return as_numpy(a.todense() if hasattr(a, "todense") else a)


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
@pytest.mark.parametrize("name", sorted(KEEPS_ZERO))
def test_keeps_zero_ops_keep_sparse_storage(ctx, rng, name, stype):
    f, pattern_grad = KEEPS_ZERO[name]
    xp = ctx.xp
    shape = (6, 4)
    x = _rows_data(rng, shape, [1, 4]) if stype == "row_sparse" else _csr_data(rng, shape)
    sx = _sparse(xp.asarray(x), stype)
    head = rng.standard_normal(shape)
    op, y, g = _run_op(xp, name, sx, xp.asarray(head))
    assert op.takes_sparse([stype]) and op.infer_storage([stype])[0] == [stype]
    assert y.stype == stype
    np.testing.assert_allclose(_dense(y), f(x), rtol=1e-12)
    # the dense computation of the same op is the reference gradient everywhere
    _, _, want = _run_op(np, name, x, head)
    zero = name in ("sign", "floor", "ceil", "round", "rint", "trunc", "fix")
    if pattern_grad:
        assert g.stype == stype
        if stype == "row_sparse":  # the held rows (none for a gradient that is 0 everywhere)
            np.testing.assert_array_equal(as_numpy(g.indices), [] if zero else [1, 4])
    elif pattern_grad is None:  # a constant derivative: the head's storage (dense here)
        assert not hasattr(g, "stype")
    else:
        assert not hasattr(g, "stype")  # dense: head * f'(0) where x stores nothing
    np.testing.assert_allclose(_dense(g), want, rtol=1e-12)


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_sparse_head_gradient_is_read_at_the_input_places(rng, stype):
    shape = (5, 3)
    x = _rows_data(rng, shape, [0, 2, 3]) if stype == "row_sparse" else _csr_data(rng, shape)
    head = _rows_data(rng, shape, [2, 4]) if stype == "row_sparse" else _csr_data(rng, shape)
    for name in ("square", "relu", "abs", "sin", "negative"):
        _, _, g = _run_op(np, name, cast_storage(x, stype), cast_storage(head, stype))
        _, _, want = _run_op(np, name, x, head)
        np.testing.assert_allclose(_dense(g), want, rtol=1e-12)
        if name != "sin":  # the input's places (for negative, the head's)
            assert g.stype == stype


def test_ops_with_nonzero_at_zero_compute_sparse_inputs_densely():
    for name in ("cos", "exp", "arccos", "cosh", "log10", "gamma", "rcbrt", "sigmoid"):
        op = get_op(name)()
        assert not op.takes_sparse(["csr"]) and not op.takes_sparse(["row_sparse"])


def test_unshuffled_and_shuffled_csr_columns_give_the_same_gradient(rng):
    """MXNet's test helpers make csr arrays whose columns are unsorted within rows."""
    x = _csr_data(rng, (4, 5), 0.6)
    head = _csr_data(rng, (4, 5), 0.6)
    sx, sh = cast_storage(x, "csr"), cast_storage(head, "csr")
    order = np.concatenate([np.arange(a, b)[::-1] for a, b in zip(sh.indptr[:-1], sh.indptr[1:])])
    shuffled = CSRArray(sh.data[order], sh.indices[order], sh.indptr, sh.shape, check=False)
    _, _, g1 = _run_op(np, "square", sx, sh)
    _, _, g2 = _run_op(np, "square", sx, shuffled)
    np.testing.assert_allclose(_dense(g1), _dense(g2))
    np.testing.assert_allclose(_dense(g1), 2 * x * head)


@pytest.mark.parametrize("name", ["square", "sqrt", "tan", "arcsin", "degrees", "relu"])
def test_row_sparse_gradient_through_the_executor_matches_finite_differences(rng, name):
    import raymod as rm

    shape = (6, 3)
    x = _rows_data(rng, shape, [1, 3, 4])
    s = op_symbol(name, ["data"])
    ex = s.simple_bind(rm.cpu(), type_dict={"data": np.float64},
                       stype_dict={"data": "row_sparse"}, data=shape)
    ex.arg_dict["data"][:] = RowSparseArray.from_dense(x)
    out = ex.forward(is_train=True)[0]
    assert out.stype == "row_sparse"
    head = rng.standard_normal(shape)
    ex.backward([head])
    got = _dense(ex.grad_dict["data"])
    # finite differences at the held rows (the derivative at 0 of sqrt is not finite)
    picks, values = numeric_gradients(s, {"data": x}, [head], names=["data"],
                                      max_elements=100)["data"]
    held = np.isin(picks // shape[1], [1, 3, 4])
    np.testing.assert_allclose(got.reshape(-1)[picks[held]], values[held], rtol=1e-5, atol=1e-7)

"""Binary ops on sparse inputs: elemwise_add/sub/mul, _maximum/_minimum/_hypot, add_n,
broadcast_mul/div of a csr by a dense row, column or scalar, the scalar ops. Storage of
results and gradients as MXNet's rules; values against the dense computation."""
import numpy as np
import pytest

import raymod as rm
from raymod.context import as_numpy
from raymod.ops import get_op
from raymod.sparse import CSRArray, RowSparseArray, cast_storage
from raymod.test_utils import numeric_gradients, op_symbol

# _hypot's gradient where both inputs are 0 is 0 / 0, as MXNet's
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _dense(a):
    return as_numpy(a.todense() if hasattr(a, "todense") else a)


def _rows(rng, shape, rows):
    x = np.zeros(shape)
    x[rows] = rng.standard_normal((len(rows),) + tuple(shape[1:]))
    return x


def _csr(rng, shape, density=0.4):
    return rng.standard_normal(shape) * (rng.random(shape) < density)


def _operands(rng, stype, shape=(6, 4)):
    if stype == "row_sparse":
        return _rows(rng, shape, [0, 2, 3]), _rows(rng, shape, [2, 5])
    if stype == "csr":
        return _csr(rng, shape), _csr(rng, shape)
    return rng.standard_normal(shape), rng.standard_normal(shape)


def _run(xp, name, inputs, head, **attrs):
    op = get_op(name)(**attrs)
    outs, saved = op.forward(xp, inputs, [], True)
    grads = op.backward(xp, [head], list(inputs), outs, saved, [True] * len(inputs))
    return op, outs[0], grads


def _stored(x, stype):
    return x if stype == "default" else cast_storage(x, stype)


# op -> (numpy forward, the result's storage for (rsp, rsp) and (csr, csr))
SAME_STYPE = {
    "elemwise_add": (np.add, True), "elemwise_sub": (np.subtract, True),
    "elemwise_mul": (np.multiply, True), "_maximum": (np.maximum, True),
    "_minimum": (np.minimum, True), "_hypot": (np.hypot, True),
    "elemwise_div": (None, False),
}


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
@pytest.mark.parametrize("name", sorted(SAME_STYPE))
def test_two_sparse_inputs_of_one_storage(ctx, rng, name, stype):
    f, sparse = SAME_STYPE[name]
    op = get_op(name)()
    if not sparse:
        assert not op.takes_sparse([stype, stype])
        return
    xp = ctx.xp
    a, b = _operands(rng, stype)
    head = rng.standard_normal(a.shape)
    _, out, grads = _run(xp, name, [_stored(xp.asarray(a), stype), _stored(xp.asarray(b), stype)],
                         xp.asarray(head))
    assert op.infer_storage([stype, stype])[0] == [stype]
    assert out.stype == stype
    np.testing.assert_allclose(_dense(out), f(a, b), rtol=1e-12)
    _, _, want = _run(np, name, [a, b], head)
    for g, w in zip(grads, want):
        np.testing.assert_allclose(_dense(g), w, rtol=1e-12, atol=1e-15)


def test_row_sparse_sum_holds_the_union_of_rows(rng):
    a, b = _operands(rng, "row_sparse")
    _, out, _ = _run(np, "elemwise_add", [RowSparseArray.from_dense(a),
                                          RowSparseArray.from_dense(b)], np.ones(a.shape))
    np.testing.assert_array_equal(out.indices, [0, 2, 3, 5])
    _, out, _ = _run(np, "elemwise_sub", [RowSparseArray.from_dense(a),
                                          RowSparseArray.from_dense(b)], np.ones(a.shape))
    np.testing.assert_allclose(out.todense(), a - b)


def test_add_and_sub_pass_a_sparse_head_gradient_on_in_its_storage(rng):
    a, b = _operands(rng, "row_sparse")
    head = RowSparseArray.from_dense(_rows(rng, a.shape, [1, 2]))
    for name, signs in (("elemwise_add", (1, 1)), ("elemwise_sub", (1, -1))):
        _, _, grads = _run(np, name, [RowSparseArray.from_dense(a),
                                      RowSparseArray.from_dense(b)], head)
        for g, sign in zip(grads, signs):
            assert isinstance(g, RowSparseArray)
            np.testing.assert_array_equal(g.indices, [1, 2])
            np.testing.assert_allclose(g.todense(), sign * head.todense())


@pytest.mark.parametrize("lhs, rhs", [("row_sparse", "default"), ("default", "row_sparse"),
                                      ("csr", "default"), ("default", "csr")])
def test_elemwise_mul_of_sparse_and_dense_is_sparse(ctx, rng, lhs, rhs):
    xp = ctx.xp
    a, _ = _operands(rng, lhs if lhs != "default" else rhs)
    b = rng.standard_normal(a.shape)
    if lhs == "default":
        a, b = b, a
    sparse = lhs if lhs != "default" else rhs
    head = rng.standard_normal(a.shape)
    op, out, grads = _run(xp, "elemwise_mul", [_stored(xp.asarray(a), lhs),
                                               _stored(xp.asarray(b), rhs)], xp.asarray(head))
    assert op.infer_storage([lhs, rhs])[0] == [sparse]
    assert out.stype == sparse
    np.testing.assert_allclose(_dense(out), a * b, rtol=1e-12)
    # head * rhs, head * lhs: sparse on the sparse factor's places
    np.testing.assert_allclose(_dense(grads[0]), head * b, rtol=1e-12)
    np.testing.assert_allclose(_dense(grads[1]), head * a, rtol=1e-12)
    sparse_grad = 0 if rhs != "default" else 1
    assert grads[sparse_grad].stype == sparse


def test_mixed_sparse_and_dense_add_falls_back():
    op = get_op("elemwise_add")()
    assert not op.takes_sparse(["row_sparse", "default"])
    assert not op.takes_sparse(["csr", "row_sparse"])


def test_elemwise_gradients_through_the_executor(rng):
    """(row_sparse, row_sparse) elemwise_mul and elemwise_add bound with row_sparse arguments:
    the backward against finite differences of the dense graph."""
    a, b = _operands(rng, "row_sparse")
    for name in ("elemwise_mul", "elemwise_add", "elemwise_sub"):
        s = op_symbol(name, ["lhs", "rhs"])
        ex = s.simple_bind(rm.cpu(), type_dict={"lhs": np.float64, "rhs": np.float64},
                           stype_dict={"lhs": "row_sparse", "rhs": "row_sparse"},
                           lhs=a.shape, rhs=b.shape)
        ex.arg_dict["lhs"][:] = RowSparseArray.from_dense(a)
        ex.arg_dict["rhs"][:] = RowSparseArray.from_dense(b)
        assert ex.forward(is_train=True)[0].stype == "row_sparse"
        head = rng.standard_normal(a.shape)
        ex.backward([head])
        numeric = numeric_gradients(s, {"lhs": a, "rhs": b}, [head])
        for k, (picks, values) in numeric.items():
            np.testing.assert_allclose(_dense(ex.grad_dict[k]).reshape(-1)[picks], values,
                                       rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("stypes", [["row_sparse"] * 3, ["default", "csr", "default"],
                                    ["csr", "csr"], ["row_sparse", "default", "csr"]])
def test_add_n(ctx, rng, stypes):
    xp = ctx.xp
    shape = (5, 4)
    values = [(_rows(rng, shape, [i, 3]) if t == "row_sparse" else
               _csr(rng, shape) if t == "csr" else rng.standard_normal(shape))
              for i, t in enumerate(stypes)]
    head = xp.asarray(rng.standard_normal(shape))
    op, out, grads = _run(xp, "add_n", [_stored(xp.asarray(v), t) for v, t in
                                        zip(values, stypes)], head, num_args=len(stypes))
    want = "row_sparse" if all(t == "row_sparse" for t in stypes) else "default"
    assert op.infer_storage(stypes)[0] == [want]
    assert getattr(out, "stype", "default") == want
    np.testing.assert_allclose(_dense(out), sum(values), rtol=1e-12)
    for g in grads:
        np.testing.assert_allclose(_dense(g), as_numpy(head))


@pytest.mark.parametrize("rshape", [(1, 5), (5,), (4, 1), (1, 1), (1,)])
@pytest.mark.parametrize("name", ["broadcast_mul", "broadcast_div"])
def test_broadcast_mul_div_of_csr_by_a_vector_is_csr(ctx, rng, name, rshape):
    xp = ctx.xp
    a = _csr(rng, (4, 5))
    b = rng.uniform(0.5, 2, rshape)
    ref = np.multiply if name == "broadcast_mul" else np.divide
    head = rng.standard_normal((4, 5))
    op, out, grads = _run(xp, name, [cast_storage(xp.asarray(a), "csr"), xp.asarray(b)],
                          xp.asarray(head))
    assert out.stype == "csr"
    np.testing.assert_allclose(_dense(out), ref(a, b), rtol=1e-12)
    _, _, want = _run(np, name, [a, b], head)
    for g, w in zip(grads, want):
        np.testing.assert_allclose(_dense(g), w, rtol=1e-12)


def test_broadcast_of_csr_to_a_larger_shape_is_refused(rng):
    from raymod.base import MXNetError

    op = get_op("broadcast_mul")()
    with pytest.raises(MXNetError, match="broadcasts to its shape"):
        op.forward(np, [cast_storage(_csr(rng, (4, 5)), "csr"), np.ones((2, 4, 5))], [], False)


@pytest.mark.parametrize("stype", ["row_sparse", "csr"])
def test_scalar_ops_on_sparse_inputs(ctx, rng, stype):
    xp = ctx.xp
    a, _ = _operands(rng, stype)
    sa = _stored(xp.asarray(a), stype)
    head = _stored(xp.asarray(_operands(rng, stype)[1]), stype)
    for name, scalar, ref, keeps in (("_mul_scalar", 3.0, a * 3, True),
                                     ("_div_scalar", 4.0, a / 4, True),
                                     ("_plus_scalar", 2.0, a + 2, False),
                                     ("_minus_scalar", 2.0, a - 2, False),
                                     ("_plus_scalar", 0.0, a, True)):
        op, out, (g,) = _run(xp, name, [sa], head, scalar=scalar)
        assert op.takes_sparse([stype])
        assert getattr(out, "stype", "default") == (stype if keeps else "default")
        np.testing.assert_allclose(_dense(out), ref, rtol=1e-12)
        assert g.stype == stype  # the head's storage
        factor = {"_mul_scalar": 3.0, "_div_scalar": 0.25}.get(name, 1.0)
        np.testing.assert_allclose(_dense(g), factor * _dense(head), rtol=1e-12)

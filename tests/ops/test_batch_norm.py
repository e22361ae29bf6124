import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.ops.nn import batch_norm
from raymod.context import as_numpy
from raymod.test_utils import assert_almost_equal, bind, check_gradient, op_symbol

NAMES = ["data", "gamma", "beta"]


def _inputs(rng, shape, axis):
    c = shape[axis]
    inputs = {"data": rng.standard_normal(shape) * 2 + 1, "gamma": rng.uniform(0.5, 2, c),
              "beta": rng.standard_normal(c)}
    aux = {"op_moving_mean": rng.standard_normal(c), "op_moving_var": rng.uniform(0.5, 2, c)}
    return inputs, aux


@pytest.fixture(params=["broadcast", "repeated"])
def operands(request, monkeypatch):
    """Per-channel operands broadcast as (C, 1, ...), or repeated over each sample's
    positions (numpy's large data: every size here)."""
    if request.param == "repeated":
        monkeypatch.setattr(batch_norm, "REPEAT_MIN_SIZE", 0)
    return request.param


@pytest.mark.parametrize("axis,fix_gamma", [(1, False), (1, True), (-1, False)])
def test_batch_norm_forward_and_moving_stats(ctx, rng, operands, axis, fix_gamma):
    sym = op_symbol("BatchNorm", NAMES, axis=axis, fix_gamma=fix_gamma, output_mean_var=True,
                    eps=1e-3, momentum=0.8)
    inputs, aux = _inputs(rng, (4, 3, 5), axis)
    x = inputs["data"]
    red = tuple(i for i in range(3) if i != axis % 3)
    shape = [1, 1, 1]
    shape[axis] = -1
    gamma = np.ones(3 if axis == 1 else 5) if fix_gamma else inputs["gamma"]

    def reference(mean, var):
        inv = 1 / np.sqrt(var + 1e-3)
        y = (x - mean.reshape(shape)) * (gamma * inv).reshape(shape) + inputs["beta"].reshape(shape)
        return [y, mean, inv]
    ex = bind(sym, inputs, ctx, aux=aux)
    for o, e in zip(ex.forward(is_train=True), reference(x.mean(red), x.var(red))):
        assert_almost_equal(o, e, rtol=1e-10)
    new_mean = aux["op_moving_mean"] * 0.8 + x.mean(red) * 0.2
    new_var = aux["op_moving_var"] * 0.8 + x.var(red) * 0.2  # biased batch variance
    assert_almost_equal(ex.aux_dict["op_moving_mean"], new_mean, rtol=1e-10)
    assert_almost_equal(ex.aux_dict["op_moving_var"], new_var, rtol=1e-10)
    for o, e in zip(ex.forward(is_train=False), reference(new_mean, new_var)):
        assert_almost_equal(o, e, rtol=1e-10)
    assert_almost_equal(ex.aux_dict["op_moving_var"], new_var, rtol=1e-10)  # inference: untouched


@pytest.mark.parametrize("use_global_stats", [False, True])
@pytest.mark.parametrize("fix_gamma", [False, True])
def test_batch_norm_gradient(ctx, rng, operands, use_global_stats, fix_gamma):
    sym = op_symbol("BatchNorm", NAMES, fix_gamma=fix_gamma, use_global_stats=use_global_stats)
    inputs, aux = _inputs(rng, (3, 2, 2, 3), 1)
    grads = check_gradient(sym, inputs, ctx, aux=aux)
    if fix_gamma:
        assert not grads["gamma"].any()


def test_batch_norm_shapes_types_outputs():
    sym = op_symbol("BatchNorm", NAMES)
    assert sym.list_outputs() == ["op_output"]
    assert sym.list_auxiliary_states() == ["op_moving_mean", "op_moving_var"]
    assert sym.infer_shape(data=(2, 3, 4)) == ([(2, 3, 4), (3,), (3,)], [(2, 3, 4)], [(3,), (3,)])
    assert sym.infer_shape_partial(gamma=(3,))[0][1:] == [(3,), (3,)]
    types = sym.infer_type(data=np.float16)
    assert types[0][1] == np.float32 and types[1][0] == np.float16 and types[2][0] == np.float32
    with pytest.raises(ShapeError, match=r"BatchNorm 'op'.*gamma"):
        sym.infer_shape(data=(2, 3, 4), gamma=(4,))
    with pytest.raises(ShapeError, match="axis"):
        op_symbol("BatchNorm", NAMES, axis=3).infer_shape(data=(2, 3, 4))


def test_batch_norm_float16_data(rng):
    sym = op_symbol("BatchNorm", NAMES)
    inputs, aux = _inputs(rng, (8, 3), 1)
    inputs = {k: v.astype(np.float16 if k == "data" else np.float32) for k, v in inputs.items()}
    aux = {k: v.astype(np.float32) for k, v in aux.items()}
    out = bind(sym, inputs, aux=aux).forward(is_train=True)[0]
    x = inputs["data"].astype(np.float64)
    ref = (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-3) + inputs["beta"]
    assert out.dtype == np.float16
    np.testing.assert_allclose(as_numpy(out), ref, rtol=1e-2, atol=1e-2)

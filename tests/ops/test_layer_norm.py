import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol

NAMES = ["data", "gamma", "beta"]


def reference_layer_norm(data, gamma, beta, axis, eps):
    """Statistics along ``axis`` for each position of the others, one position at a time."""
    moved = np.moveaxis(data, axis, -1)
    out, means, stds = np.empty_like(moved), np.empty(moved.shape[:-1]), np.empty(moved.shape[:-1])
    for pos in np.ndindex(*moved.shape[:-1]):
        v = moved[pos]
        means[pos] = v.sum() / v.size
        stds[pos] = np.sqrt(((v - means[pos]) ** 2).sum() / v.size + eps)
        out[pos] = (v - means[pos]) / stds[pos] * gamma + beta
    keep = lambda a: np.expand_dims(a, axis % data.ndim)  # noqa: E731
    return [np.moveaxis(out, -1, axis), keep(means), keep(stds)]


@pytest.mark.parametrize("shape,axis,eps", [((3, 5), -1, 1e-5), ((2, 3, 4), 1, 1e-5),
                                            ((2, 3, 4), 0, 0.1), ((4,), 0, 1e-5),
                                            ((2, 2, 3, 2), -3, 1e-5)])
def test_layer_norm(ctx, rng, shape, axis, eps):
    c = shape[axis]
    inputs = {"data": rng.standard_normal(shape) * 2 + 1, "gamma": rng.uniform(0.5, 2, c),
              "beta": rng.standard_normal(c)}
    expected = reference_layer_norm(axis=axis, eps=eps, **inputs)
    s = op_symbol("LayerNorm", NAMES, axis=axis, eps=eps, output_mean_var=True)
    check_forward(s, inputs, expected, ctx)
    one = op_symbol("LayerNorm", NAMES, axis=axis, eps=eps)
    check_forward(one, inputs, expected[:1], ctx)
    check_gradient(one, inputs, ctx)


def test_layer_norm_mean_std_outputs_pass_no_gradient(ctx, rng):
    # MXNet sends no gradient back through mean and std: only the first output's counts
    s = op_symbol("LayerNorm", NAMES, output_mean_var=True)
    inputs = {"data": rng.standard_normal((3, 4)), "gamma": rng.uniform(0.5, 2, 4),
              "beta": rng.standard_normal(4)}
    heads = [rng.standard_normal((3, 4)), rng.standard_normal((3, 1)), rng.standard_normal((3, 1))]
    ex = bind(s, inputs, ctx)
    ex.forward(is_train=True)
    ex.backward([ex._xp.asarray(h) for h in heads])
    with_stats = {k: as_numpy(v).copy() for k, v in ex.grad_dict.items()}
    ex.backward([ex._xp.asarray(h) for h in heads[:1] + [0 * h for h in heads[1:]]])
    for k, v in ex.grad_dict.items():
        np.testing.assert_array_equal(as_numpy(v), with_stats[k])


def test_layer_norm_names_float32_and_alias(ctx, rng):
    s = sym.LayerNorm(sym.Variable("data"), name="ln")
    assert s.list_arguments() == ["data", "ln_gamma", "ln_beta"]
    assert s.list_outputs() == ["ln_output"]
    full = sym.LayerNorm(sym.Variable("data"), output_mean_var=True, name="ln")
    assert full.list_outputs() == ["ln_output", "ln_mean", "ln_std"]
    assert full.infer_shape(data=(2, 3, 4))[1] == [(2, 3, 4), (2, 3, 1), (2, 3, 1)]
    alias = op_symbol("_npx_layer_norm", NAMES)
    x = rng.standard_normal((2, 5)).astype(np.float32)
    out = bind(alias, {"data": x, "gamma": np.ones(5, np.float32),
                       "beta": np.zeros(5, np.float32)}, ctx).forward()[0]
    assert out.dtype == np.float32
    ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(as_numpy(out), ref, rtol=1e-5, atol=1e-6)


def test_layer_norm_bad_input():
    with pytest.raises(ShapeError, match=r"LayerNorm 'op': axis=4 is out of range.*4 dims"):
        op_symbol("LayerNorm", NAMES, axis=4).infer_shape(data=(2, 3, 4, 4))
    with pytest.raises(ShapeError, match=r"gamma must have shape \(4,\).*got \(3,\)"):
        op_symbol("LayerNorm", NAMES).infer_shape(data=(2, 3, 4), gamma=(3,))

"""MXNet's update ops (sgd_update, sgd_mom_update, adam_update, ftrl_update,
_sparse_adagrad_update) against their formulas, with dense and row_sparse gradients."""
import numpy as np
import pytest

from raymod.context import as_numpy
from raymod.ops import get_op
from raymod.sparse import RowSparseArray


def _update(xp, name, weight, grad, states, **attrs):
    op = get_op(name)(**attrs)
    states = [xp.asarray(s.copy()) for s in states]
    (out,), _ = op.forward(xp, [weight, grad], states, False)
    return as_numpy(out), [as_numpy(s) for s in states]


def _grads(xp, rng, shape, rows):
    g = np.zeros(shape)
    g[rows] = rng.standard_normal((len(rows),) + shape[1:])
    return g, RowSparseArray.from_dense(xp.asarray(g))


def test_sgd_update(ctx, rng):
    xp = ctx.xp
    w, g = rng.standard_normal((5, 3)), rng.standard_normal((5, 3)) * 3
    weight = xp.asarray(w)
    out, _ = _update(xp, "sgd_update", weight, xp.asarray(g), [], lr=0.1, wd=0.01,
                     rescale_grad=0.5, clip_gradient=1.0)
    np.testing.assert_allclose(out, (1 - 0.1 * 0.01) * w - 0.1 * np.clip(0.5 * g, -1, 1))
    np.testing.assert_array_equal(as_numpy(weight), w)  # the input weight is left alone


@pytest.mark.parametrize("lazy", [True, False])
def test_sgd_mom_update_with_row_sparse_grad(ctx, rng, lazy):
    xp = ctx.xp
    w, mom = rng.standard_normal((6, 2)), rng.standard_normal((6, 2))
    g, rsp = _grads(xp, rng, (6, 2), [1, 4])
    out, (mom_out,) = _update(xp, "sgd_mom_update", xp.asarray(w), rsp, [mom], lr=0.1,
                              momentum=0.9, wd=0.01, lazy_update=lazy)
    want_mom = 0.9 * mom - 0.1 * 0.01 * w - 0.1 * g
    want_w = w + want_mom
    if lazy:  # only the gradient's rows move
        keep = np.ones(6, bool)
        keep[[1, 4]] = False
        want_mom[keep], want_w[keep] = mom[keep], w[keep]
    np.testing.assert_allclose(mom_out, want_mom, rtol=1e-12)
    np.testing.assert_allclose(out, want_w, rtol=1e-12)


@pytest.mark.parametrize("sparse", [False, True])
def test_adam_update_has_no_bias_correction(ctx, rng, sparse):
    xp = ctx.xp
    w = rng.standard_normal((5, 3))
    mean, var = rng.standard_normal((5, 3)), rng.uniform(0.1, 1, (5, 3))
    g, rsp = _grads(xp, rng, (5, 3), [0, 2, 3])
    out, (m, v) = _update(xp, "adam_update", xp.asarray(w), rsp if sparse else xp.asarray(g),
                          [mean, var], lr=0.01, beta1=0.8, beta2=0.99, epsilon=1e-6, wd=0.1)
    gg = g + 0.1 * w
    want_m = 0.8 * mean + 0.2 * gg
    want_v = 0.99 * var + 0.01 * gg * gg
    want_w = w - 0.01 * want_m / (np.sqrt(want_v) + 1e-6)
    if sparse:
        keep = [1, 4]
        want_m[keep], want_v[keep], want_w[keep] = mean[keep], var[keep], w[keep]
    np.testing.assert_allclose(m, want_m, rtol=1e-12)
    np.testing.assert_allclose(v, want_v, rtol=1e-12)
    np.testing.assert_allclose(out, want_w, rtol=1e-12)


def test_ftrl_update_is_dense_for_dense_weights(rng):
    w = rng.standard_normal((4, 3))
    z, n = rng.standard_normal((4, 3)), rng.uniform(0.1, 1, (4, 3))
    g, rsp = _grads(np, rng, (4, 3), [2])
    out, (z_out, n_out) = _update(np, "ftrl_update", w, rsp, [z, n], lr=0.1, lamda1=0.05,
                                  beta=1.0, wd=0.01)
    want_z = z + g - (np.sqrt(n + g * g) - np.sqrt(n)) * w / 0.1
    want_n = n + g * g
    want_w = (np.sign(want_z) * 0.05 - want_z) / ((1.0 + np.sqrt(want_n)) / 0.1 + 0.01) \
        * (np.abs(want_z) > 0.05)
    np.testing.assert_allclose(z_out, want_z, rtol=1e-12)
    np.testing.assert_allclose(n_out, want_n, rtol=1e-12)
    np.testing.assert_allclose(out, want_w, rtol=1e-12)


def test_sparse_adagrad_update_touches_the_gradient_rows_only(ctx, rng):
    xp = ctx.xp
    w, h = rng.standard_normal((5, 2)), rng.uniform(0.1, 1, (5, 2))
    g, rsp = _grads(xp, rng, (5, 2), [0, 3])
    out, (h_out,) = _update(xp, "_sparse_adagrad_update", xp.asarray(w), rsp, [h], lr=0.1,
                            epsilon=1e-7)
    want_h = h + g * g
    want_w = w - 0.1 * g / np.sqrt(want_h + 1e-7)
    np.testing.assert_allclose(h_out, want_h, rtol=1e-12)
    np.testing.assert_allclose(out, want_w, rtol=1e-12)
    with pytest.raises(ValueError, match="weight decay"):
        _update(xp, "_sparse_adagrad_update", xp.asarray(w), rsp, [h], lr=0.1, wd=0.1)


def test_update_ops_through_the_mxnet_layer(rng):
    """mx.nd.sgd_mom_update(weight, grad, mom, ..., out=weight) changes weight and mom."""
    import raymod.compat.mxnet as mx  # the layer's module, without installing it

    w = rng.standard_normal((3, 2)).astype(np.float32)
    weight, mom = mx.nd.array(w), mx.nd.zeros((3, 2))
    grad = mx.nd.sparse.row_sparse_array((np.ones((1, 2), np.float32), [1]), shape=(3, 2))
    mx.nd.sgd_mom_update(weight, grad, mom, lr=0.5, momentum=0.9, out=weight)
    want = w.copy()
    want[1] -= 0.5
    np.testing.assert_allclose(weight.asnumpy(), want, rtol=1e-6)
    np.testing.assert_allclose(mom.asnumpy()[1], [-0.5, -0.5])
    assert mom.asnumpy()[[0, 2]].sum() == 0

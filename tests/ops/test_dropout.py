import numpy as np
import pytest

import raymod as rm
from raymod.base import AttributeValueError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, op_symbol


def _train(ctx, x, seed, **attrs):
    rm.random.seed(seed)
    ex = bind(op_symbol("Dropout", ["data"], **attrs), {"data": x}, ctx)
    out = as_numpy(ex.forward(is_train=True)[0])
    g = np.random.default_rng(0).standard_normal(x.shape)
    ex.backward([ex._xp.asarray(g)])
    return out, g, as_numpy(ex.grad_dict["data"])


def test_dropout_inference_is_identity(ctx, rng):
    x = rng.standard_normal((3, 4))
    check_forward(op_symbol("Dropout", ["data"], p=0.7), {"data": x}, x, ctx)


@pytest.mark.parametrize("mode", ["training", "always"])
def test_dropout_mask_statistics_gradient_and_seed(ctx, rng, mode):
    x = rng.uniform(1, 2, (200, 100))
    out, g, gx = _train(ctx, x, 7, p=0.3, mode=mode)
    mask = out / x
    assert set(np.unique(np.round(mask, 12))) <= {0.0, round(1 / 0.7, 12)}
    assert abs((mask == 0).mean() - 0.3) < 0.02
    np.testing.assert_allclose(gx, mask * g, rtol=1e-12)
    np.testing.assert_array_equal(_train(ctx, x, 7, p=0.3, mode=mode)[0], out)
    assert not np.array_equal(_train(ctx, x, 8, p=0.3, mode=mode)[0], out)
    if mode == "always":  # applies at inference too
        ex = bind(op_symbol("Dropout", ["data"], p=0.3, mode=mode), {"data": x}, ctx)
        assert (as_numpy(ex.forward(is_train=False)[0]) == 0).any()


def test_dropout_shared_axes(ctx, rng):
    x = rng.uniform(1, 2, (4, 50, 6))
    mask = _train(ctx, x, 3, p=0.5, axes=(1,))[0] / x
    assert (mask == mask[:, :1, :]).all() and (mask == 0).any()


def test_dropout_edge_probabilities(rng):
    x = rng.standard_normal((5, 5))
    assert not _train(rm.cpu(), x, 0, p=1.0)[0].any()
    np.testing.assert_array_equal(_train(rm.cpu(), x, 0, p=0.0)[0], x)
    with pytest.raises(AttributeValueError, match="Dropout.*p"):
        op_symbol("Dropout", ["data"], p=1.5)

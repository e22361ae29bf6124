import numpy as np
import pytest

import raymod as rm
import raymod.symbol as sym
from raymod.base import AttributeValueError
from raymod.context import as_numpy
from raymod.test_utils import bind


def draw(ctx, s, seed, **inputs):
    rm.random.seed(seed)
    return as_numpy(bind(s, inputs, ctx).forward(is_train=True)[0])


@pytest.mark.parametrize("name", ["_random_normal", "random_normal", "normal"])
def test_random_normal(ctx, name):
    s = getattr(sym, name)(loc=1.5, scale=2.0, shape=(200, 100))
    out = draw(ctx, s, 3)
    assert out.shape == (200, 100) and out.dtype == np.float32
    assert abs(out.mean() - 1.5) < 0.05 and abs(out.std() - 2.0) < 0.05
    # the mean and spread of the standardised draws match N(0, 1)'s quantiles
    z = np.sort(((out - 1.5) / 2.0).ravel())
    assert abs(z[len(z) // 2]) < 0.03 and abs(z[int(0.8413 * len(z))] - 1) < 0.03
    np.testing.assert_array_equal(draw(ctx, s, 3), out)  # rm.random.seed repeats a run
    assert not np.array_equal(draw(ctx, s, 4), out)


@pytest.mark.parametrize("name", ["_random_uniform", "random_uniform", "uniform"])
@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_random_uniform(ctx, name, dtype):
    s = getattr(sym, name)(low=-1.0, high=3.0, shape=(100, 100), dtype=dtype)
    out = draw(ctx, s, 5)
    assert out.dtype == np.dtype(dtype)
    assert out.min() >= -1 and out.max() <= 3
    counts = np.histogram(out, bins=4, range=(-1, 3))[0]
    assert np.all(np.abs(counts - 2500) < 200)  # flat
    np.testing.assert_array_equal(draw(ctx, s, 5), out)


def test_random_shape_from_the_graph(ctx):
    # the batch dim of a VAE's noise comes from the encoder's output
    mu = sym.Variable("mu")
    s = mu + sym.random_normal(shape=(0, 3), dtype="float64")
    assert s.infer_shape(mu=(4, 3))[1] == [(4, 3)]
    out = draw(ctx, s, 0, mu=np.zeros((4, 3)))
    assert out.shape == (4, 3) and out.dtype == np.float64 and np.unique(out).size == 12
    assert '"op": "_random_normal"' in sym.random_normal(shape=(2,)).tojson()


def test_random_bad_attributes():
    with pytest.raises(AttributeValueError, match="_random_normal: scale must be > 0"):
        sym.random_normal(scale=-1, shape=(2,))
    with pytest.raises(AttributeValueError, match="_random_uniform: low=2.0 must not exceed"):
        sym.random_uniform(low=2, high=1, shape=(2,))
    with pytest.raises(AttributeValueError, match="_random_normal: attribute 'dtype' must be"):
        sym.random_normal(shape=(2,), dtype="int32")

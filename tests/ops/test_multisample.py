import numpy as np
import pytest

import raymod as rm
import raymod.symbol as sym
from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind


def run(ctx, s, seed, inputs):
    rm.random.seed(seed)
    ex = bind(s, inputs, ctx)
    out = ex.forward(is_train=True)[0]
    ex.backward([np.ones(out.shape, out.dtype)])
    return as_numpy(out), {k: as_numpy(v) for k, v in ex.grad_dict.items()}


@pytest.mark.parametrize("name", ["_sample_normal", "sample_normal"])
def test_sample_normal(ctx, name):
    mu, sigma = np.array([0.0, 10, -5]), np.array([1.0, 0.1, 3])
    s = getattr(sym, name)(sym.Variable("mu"), sym.Variable("sigma"), shape=(100, 40))
    out, grads = run(ctx, s, 7, {"mu": mu, "sigma": sigma})
    assert out.shape == (3, 100, 40)
    assert out.dtype == np.float32  # dtype=None gives float32 even for float64 inputs (MXNet)
    flat = out.reshape(3, -1)
    np.testing.assert_allclose(flat.mean(axis=1), mu, atol=0.15)
    np.testing.assert_allclose(flat.std(axis=1), sigma, rtol=0.05)
    assert not grads["mu"].any() and not grads["sigma"].any()  # MXNet: zero gradients
    np.testing.assert_array_equal(run(ctx, s, 7, {"mu": mu, "sigma": sigma})[0], out)


@pytest.mark.parametrize("name", ["_sample_uniform", "sample_uniform"])
def test_sample_uniform(ctx, name):
    low, high = np.array([[0.0, 10]]), np.array([[1.0, 12]])
    s = getattr(sym, name)(sym.Variable("low"), sym.Variable("high"), shape=(4000,),
                           dtype="float64")
    out, grads = run(ctx, s, 3, {"low": low, "high": high})
    assert out.shape == (1, 2, 4000) and out.dtype == np.float64
    assert (out >= low[..., None]).all() and (out < high[..., None]).all()
    np.testing.assert_allclose(out.mean(axis=-1), (low + high) / 2, atol=0.05)
    assert not grads["low"].any() and not grads["high"].any()
    out_no_shape = run(ctx, getattr(sym, name)(sym.Variable("low"), sym.Variable("high")), 3,
                       {"low": low, "high": high})[0]
    assert out_no_shape.shape == (1, 2)  # one sample per element without `shape`


def test_sample_shapes_and_errors():
    s = sym.sample_normal(sym.Variable("mu"), sym.Variable("sigma"), shape=(2,), name="z")
    assert s.list_arguments() == ["mu", "sigma"]
    assert s.infer_shape(mu=(3,))[0] == [(3,), (3,)]
    assert s.infer_type(mu="float64", sigma="float64")[1] == [np.dtype("float32")]
    assert '"op": "_sample_normal"' in s.tojson()
    with pytest.raises(ShapeError, match=r"_sample_normal 'z'.*mu of shape \(3, 4\) and sigma "
                                         r"of shape \(3,\) must have the same shape"):
        s.infer_shape(mu=(3, 4), sigma=(3,))
    with pytest.raises(AttributeValueError, match=r"_sample_uniform: shape=\(0,\) must be"):
        sym.sample_uniform(sym.Variable("a"), sym.Variable("b"), shape=(0,))

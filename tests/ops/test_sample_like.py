import numpy as np
import pytest

import raymod as rm
import raymod.symbol as sym
from raymod.base import AttributeValueError
from raymod.context import as_numpy
from raymod.test_utils import bind


@pytest.mark.parametrize("name, attrs, mean, std", [
    ("_random_normal_like", {"loc": 2.0, "scale": 0.5}, 2.0, 0.5),
    ("_random_uniform_like", {"low": 1.0, "high": 3.0}, 2.0, 2 / np.sqrt(12)),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_random_like(ctx, name, attrs, mean, std, dtype):
    x = sym.Variable("x")
    s = getattr(sym, name)(x, **attrs)
    data = np.ones((150, 100), dtype)

    def run(seed):
        rm.random.seed(seed)
        ex = bind(s, {"x": data}, ctx)
        out = ex.forward(is_train=True)[0]
        ex.backward([np.ones(data.shape, dtype)])
        return as_numpy(out), as_numpy(ex.grad_dict["x"])
    out, grad = run(1)
    assert out.shape == data.shape and out.dtype == dtype
    assert abs(out.mean() - mean) < 0.02 and abs(out.std() - std) < 0.02
    assert not grad.any()
    np.testing.assert_array_equal(run(1)[0], out)
    assert not np.array_equal(run(2)[0], out)


def test_random_like_bad_attributes():
    with pytest.raises(AttributeValueError, match="_random_normal_like: scale must be > 0"):
        sym._random_normal_like(sym.Variable("x"), scale=0)
    with pytest.raises(AttributeValueError, match="_random_uniform_like: low=1.0 must not"):
        sym._random_uniform_like(sym.Variable("x"), low=1, high=0)

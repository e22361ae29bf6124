import numpy as np
import pytest

import raymod.symbol as sym
from raymod.base import AttributeValueError, ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


def reference_lrn(x, alpha, beta, knorm, nsize):
    c = x.shape[1]
    norm = np.empty_like(x)
    for ch in range(c):
        lo, hi = max(0, ch - nsize // 2), min(c, ch + nsize // 2 + 1)
        norm[:, ch] = knorm + alpha / nsize * (x[:, lo:hi] ** 2).sum(axis=1)
    return x / norm ** beta


@pytest.mark.parametrize("attrs", [dict(nsize=3), dict(nsize=5, alpha=0.5, beta=0.75, knorm=1),
                                   dict(nsize=1, alpha=2.0, beta=0.5, knorm=0.5),
                                   dict(nsize=9, alpha=0.3, beta=1.2, knorm=1.5)])
def test_lrn(ctx, rng, attrs):
    s = op_symbol("LRN", ["data"], **attrs)
    x = rng.standard_normal((2, 6, 3, 4))
    full = dict(alpha=1e-4, beta=0.75, knorm=2.0)
    full.update(attrs)
    check_forward(s, {"data": x}, reference_lrn(x, **full), ctx)
    check_gradient(s, {"data": x}, ctx)


def test_lrn_outputs_float32_and_mxnet_values(ctx):
    s = sym.LRN(sym.Variable("data"), nsize=3, alpha=0.1, knorm=1, name="lrn")
    assert s.list_outputs() == ["lrn_output"]
    assert s.infer_shape(data=(2, 3, 4, 1))[1] == [(2, 3, 4, 1)]
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4, 1)
    out = bind(s, {"data": x}, ctx).forward()[0]
    assert out.dtype == np.float32
    # MXNet 1.9.1 gives these for sample 0, column 0
    np.testing.assert_allclose(as_numpy(out)[0, :, :, 0], [
        [0., 0.626181, 1.0593693, 1.338444], [1.509581, 1.6005547, 1.6336367, 1.63241],
        [3.019162, 2.8968716, 2.7717872, 2.6513138]], rtol=1e-6)


def test_lrn_bad_input():
    with pytest.raises(AttributeValueError, match="LRN: nsize must be an odd.*got 4"):
        op_symbol("LRN", ["data"], nsize=4)
    with pytest.raises(AttributeValueError, match="LRN: required attribute 'nsize'"):
        op_symbol("LRN", ["data"])
    with pytest.raises(ShapeError, match=r"LRN 'op': data must be 4-D.*\(2, 3, 4\)"):
        op_symbol("LRN", ["data"], nsize=3).infer_shape(data=(2, 3, 4))

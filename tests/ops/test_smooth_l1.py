import numpy as np
import pytest

from raymod.test_utils import check_forward, check_gradient, op_symbol


def reference_smooth_l1(x, sigma):
    band = 1 / sigma ** 2
    return np.where(np.abs(x) < band, 0.5 * (sigma * x) ** 2, np.abs(x) - 0.5 * band)


@pytest.mark.parametrize("sigma", [1.0, 2.0, 0.5])
def test_smooth_l1(ctx, rng, sigma):
    x = rng.standard_normal((4, 30)) * 2
    band = 1 / sigma ** 2
    x = x[np.abs(np.abs(x) - band) > 1e-3].reshape(-1)  # finite differences away from the kinks
    sym = op_symbol("smooth_l1", ["data"], scalar=sigma)
    check_forward(sym, {"data": x}, [reference_smooth_l1(x, sigma)], ctx, rtol=1e-12)
    check_gradient(sym, {"data": x}, ctx, max_elements=200)


def test_smooth_l1_mxnet_example_and_float32(ctx):
    x = np.array([1, 2, 3, 4], np.float32)
    out = check_forward(op_symbol("smooth_l1", ["data"]), {"data": x},
                        [np.array([0.5, 1.5, 2.5, 3.5], np.float32)], ctx)
    assert out[0].dtype == np.float32
    assert op_symbol("smooth_l1", ["data"], scalar="2").infer_shape(data=(3, 4))[1] == [(3, 4)]

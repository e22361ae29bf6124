import numpy as np
import pytest

from raymod.test_utils import check_forward, check_gradient, op_symbol

REFERENCES = {
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "softrelu": lambda x: np.log1p(np.exp(x)),
    "softsign": lambda x: x / (1 + np.abs(x)),
}


@pytest.mark.parametrize("act_type", sorted(REFERENCES))
def test_activation(ctx, rng, act_type):
    sym = op_symbol("Activation", ["data"], act_type=act_type)
    x = rng.standard_normal((4, 6))
    x[np.abs(x) < 1e-3] = 0.5  # keep finite differences away from relu's kink
    check_forward(sym, {"data": x}, lambda data: REFERENCES[act_type](data), ctx)
    check_gradient(sym, {"data": x}, ctx)


def test_activation_float32_keeps_dtype(rng):
    sym = op_symbol("Activation", ["data"], act_type="sigmoid")
    out = check_forward(sym, {"data": rng.standard_normal((2, 3)).astype(np.float32)},
                        lambda data: 1 / (1 + np.exp(-data)), rtol=1e-6)
    assert out[0].dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
def test_relu_against_shared_zeros_is_maximum(monkeypatch, rng, dtype):
    """numpy's ReLU reads a shared block of zeros (see raymod/ops/nn/_relu.py): the same
    values as ``maximum(x, 0)`` at any size, layout and dtype, NaN kept; the block stays zeros."""
    from raymod.ops.nn import _relu
    monkeypatch.setattr(_relu, "SHARED_ZEROS_MAX", 64)
    monkeypatch.setattr(_relu, "_ZEROS", {})
    for shape in [(3,), (2, 5, 3), (4, 16), (5, 16)]:  # 80 values: above the limit
        x = (rng.standard_normal(shape) * 4).astype(dtype)
        if x.dtype.kind == "f":
            x.flat[0] = np.nan
        for arr in (x, x.T):  # contiguous and strided
            got = _relu.relu(np, arr)
            np.testing.assert_array_equal(got, np.maximum(arr, 0))
            assert got.dtype == arr.dtype and got.shape == arr.shape
    for buf in _relu._ZEROS.values():
        assert not buf.any() and not buf.flags.writeable and buf.size <= 64

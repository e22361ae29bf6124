import numpy as np
import pytest

from raymod.base import ShapeError
from raymod.context import as_numpy
from raymod.test_utils import bind, check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("index_dtype", [np.float64, np.int32])
def test_embedding(ctx, rng, index_dtype):
    sym = op_symbol("Embedding", ["data", "weight"], input_dim=6, output_dim=3)
    data = np.array([[0, 2.7, -1], [5, 9, 3], [3, 3, 1]]).astype(index_dtype)
    weight = rng.standard_normal((6, 3))
    clipped = np.clip(data.astype(np.int64), 0, 5)  # truncate, then clip like MXNet
    check_forward(sym, {"data": data, "weight": weight}, weight[clipped], ctx)
    grads = check_gradient(sym, {"data": data, "weight": weight}, ctx, no_grad=["data"])
    assert grads["weight"][4].sum() == 0  # row 4 is never looked up


def test_embedding_scatter_add_is_exact(rng):
    """Repeated indices add up exactly (its speed is the bucketing LSTM anchor's, measured by
    bench/bench_anchor_steps.py, not timed here)."""
    sym = op_symbol("Embedding", ["data", "weight"], input_dim=10000, output_dim=200)
    data = rng.integers(0, 50, (32, 40)).astype(np.float32)  # many repeats
    ex = bind(sym, {"data": data, "weight": np.zeros((10000, 200), np.float32)},
              no_grad=["data"])
    ex.forward(is_train=True)
    g = rng.standard_normal((32, 40, 200)).astype(np.float32)
    ex.backward([g])
    expected = np.zeros((10000, 200))
    np.add.at(expected, data.astype(int).ravel(), g.reshape(-1, 200).astype(np.float64))
    np.testing.assert_allclose(as_numpy(ex.grad_dict["weight"]), expected, rtol=1e-5, atol=1e-5)


def test_embedding_shapes_and_types():
    sym = op_symbol("Embedding", ["data", "weight"], input_dim=7, output_dim=4)
    assert sym.infer_shape(data=(2, 5)) == ([(2, 5), (7, 4)], [(2, 5, 4)], [])
    args, outs, _ = sym.infer_type(data=np.int32)
    assert args == [np.int32, np.float32] and outs == [np.float32]
    sym16 = op_symbol("Embedding", ["data", "weight"], input_dim=7, output_dim=4, dtype="float16")
    assert sym16.infer_type(data=np.float32)[1] == [np.float16]
    with pytest.raises(ShapeError, match=r"Embedding 'op'.*weight"):
        sym.infer_shape(data=(2, 5), weight=(7, 3))

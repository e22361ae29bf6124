import pytest

from raymod.base import ShapeError
from raymod.test_utils import check_forward, check_gradient, op_symbol


@pytest.mark.parametrize("flatten", [True, False])
@pytest.mark.parametrize("no_bias", [False, True])
def test_fully_connected(ctx, rng, flatten, no_bias):
    names = ["data", "weight"] + ([] if no_bias else ["bias"])
    sym = op_symbol("FullyConnected", names, num_hidden=5, flatten=flatten, no_bias=no_bias)
    data = rng.standard_normal((3, 2, 4))
    in_units = 8 if flatten else 4
    inputs = {"data": data, "weight": rng.standard_normal((5, in_units))}
    if not no_bias:
        inputs["bias"] = rng.standard_normal(5)

    def reference(data, weight, bias=0.0):
        x = data.reshape(3, -1) if flatten else data
        return x @ weight.T + bias
    check_forward(sym, inputs, reference, ctx)
    check_gradient(sym, inputs, ctx)


def test_fully_connected_infers_weight_and_rejects_wrong_width():
    sym = op_symbol("FullyConnected", ["data", "weight", "bias"], num_hidden=7)
    args, outs, _ = sym.infer_shape(data=(10, 3, 4))
    assert args == [(10, 3, 4), (7, 12), (7,)] and outs == [(10, 7)]
    with pytest.raises(ShapeError, match=r"FullyConnected 'op'.*weight.*\(7, 11\).*\(7, 12\)"):
        sym.infer_shape(data=(10, 12), weight=(7, 11))


@pytest.mark.parametrize("rows", [1, 2, 4, 8, 9])
def test_small_batch_products_match_the_written_out_sums(rng, rows):
    """The weight-sliced GEMMs of a small batch (see ``_skinny_gemm``) at a weight large
    enough to take them, against the sums written out in float64."""
    import numpy as np

    from raymod.ops.nn import _skinny_gemm

    hidden, units = 1030, 1100  # not a multiple of any slice: the last slice is short
    assert hidden * units >= _skinny_gemm.MIN_WEIGHT
    x = rng.standard_normal((rows, units)).astype(np.float32)
    w = rng.standard_normal((hidden, units)).astype(np.float32)
    gy = rng.standard_normal((rows, hidden)).astype(np.float32)
    x64, w64, gy64 = x.astype(np.float64), w.astype(np.float64), gy.astype(np.float64)
    y_ref = (x64[:, None, :] * w64[None, :, :]).sum(axis=2)
    dx_ref = (gy64[:, :, None] * w64[None, :, :]).sum(axis=1)
    dw_ref = (gy64[:, :, None] * x64[:, None, :]).sum(axis=0)
    out = np.full((hidden, units), np.nan, dtype=np.float32)
    for got, ref in ((_skinny_gemm.forward(np, x, w), y_ref),
                     (_skinny_gemm.data_grad(np, gy, w), dx_ref),
                     (_skinny_gemm.weight_grad(np, gy, x, out=out), dw_ref)):
        assert got.dtype == np.float32 and got.shape == ref.shape
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)
    assert not np.isnan(out).any()


def test_fully_connected_small_batch_large_weight(ctx, rng):
    """A batch of 2 through a weight large enough for the sliced path, forward and both
    gradients against the written-out formula (float32, as the zoo runs it)."""
    import numpy as np

    from raymod.test_utils import assert_almost_equal, bind

    sym = op_symbol("FullyConnected", ["data", "weight", "bias"], num_hidden=1030)
    inputs = {"data": rng.standard_normal((2, 1100)).astype(np.float32),
              "weight": rng.standard_normal((1030, 1100)).astype(np.float32),
              "bias": rng.standard_normal(1030).astype(np.float32)}
    check_forward(sym, inputs, lambda data, weight, bias: data @ weight.T + bias, ctx,
                  rtol=1e-4, atol=1e-3)
    gy = rng.standard_normal((2, 1030)).astype(np.float32)
    ex = bind(sym, inputs, ctx)
    ex.forward(is_train=True)
    ex.backward([ctx.xp.asarray(gy)])
    x64, w64, gy64 = (a.astype(np.float64) for a in (inputs["data"], inputs["weight"], gy))
    expected = {"data": (gy64[:, :, None] * w64[None]).sum(axis=1),
                "weight": (gy64[:, :, None] * x64[:, None, :]).sum(axis=0), "bias": gy64.sum(0)}
    for name, ref in expected.items():
        assert_almost_equal(ex.grad_dict[name], ref, 1e-4, 1e-3, (name, "reference"))

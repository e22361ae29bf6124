"""2-bit gradient compression with residual error feedback (spec section 6, dist tests' rules)."""
import numpy as np
import pytest

from raymod import kvstore as kv
from raymod import optimizer as opt
from raymod.base import MXNetError
from raymod.kvstore.compression import GradientCompression, dequantize_2bit, quantize_2bit

T = 0.5
SHAPE = (3, 5)


def _store(threshold=T):
    store = kv.create("device")
    store.set_gradient_compression({"type": "2bit", "threshold": threshold})
    return store


def _pulled(store, key, shape=SHAPE):
    out = np.empty(shape, np.float32)
    store.pull(key, out=out)
    return out


def _reference(residual, grad, threshold):
    """The 2-bit rule written out one element at a time."""
    sent = np.zeros_like(grad)
    for i in np.ndindex(grad.shape):
        r = residual[i] + grad[i]
        if r >= threshold:
            sent[i] = threshold
        elif r <= -threshold:
            sent[i] = -threshold
        residual[i] = r - sent[i]
    return sent


def test_small_pushes_accumulate_in_the_residual_until_they_cross():
    store = _store()
    store.init(0, np.zeros(SHAPE, np.float32))
    pulled = []
    for _ in range(6):
        store.push(0, np.full(SHAPE, 0.2, np.float32))   # no updater: the push replaces
        pulled.append(_pulled(store, 0)[0, 0])
    # residuals 0.2, 0.4, 0.6 -> send 0.5 (keep 0.1), 0.3, 0.5 -> send, 0.0 ...
    np.testing.assert_array_equal(pulled, [0, 0, T, 0, T, 0])


def test_negative_pushes_and_accumulation_through_an_updater():
    store = _store()
    store.set_optimizer(opt.Test(rescale_grad=1.0))
    store.init("w", np.zeros(SHAPE, np.float32))
    for _ in range(5):
        store.push("w", np.full(SHAPE, -0.3, np.float32))
    # residual sequence: -0.3, -0.6 -> -0.5 sent, -0.4, -0.7 -> sent, -0.5 -> sent
    np.testing.assert_allclose(_pulled(store, "w"), -1.5)


def test_decompressed_values_are_plus_minus_threshold_or_zero(rng):
    store = _store(0.25)
    got = []
    store._set_updater(lambda key, recv, stored: got.append(recv.copy()))
    store.init(1, np.zeros((50, 40), np.float32))
    for _ in range(3):
        store.push(1, rng.standard_normal((50, 40)).astype(np.float32))
    values = np.unique(np.concatenate([g.ravel() for g in got]))
    assert set(values.tolist()) == {-0.25, 0.0, 0.25}


def test_init_is_not_compressed():
    store = _store()
    store.init([0, 1], [np.full(SHAPE, 0.3, np.float32), np.full(SHAPE, -7.0, np.float32)])
    assert (_pulled(store, 0) == np.float32(0.3)).all() and (_pulled(store, 1) == -7).all()


def test_matches_the_written_out_rule_per_device_slot(rng):
    threshold = 0.4
    store = _store(threshold)
    store.init(0, np.zeros((6, 7), np.float32))
    residuals = [np.zeros((6, 7), np.float32) for _ in range(2)]
    for _ in range(5):
        grads = [rng.uniform(-0.6, 0.6, (6, 7)).astype(np.float32) for _ in range(2)]
        store.push(0, grads)
        expected = sum(_reference(r, g, threshold) for r, g in zip(residuals, grads))
        np.testing.assert_allclose(_pulled(store, 0, (6, 7)), expected, atol=1e-6)
    np.testing.assert_allclose(store._compression.residual(0, 1, grads[1]), residuals[1],
                               atol=1e-6)


@pytest.mark.parametrize("size", [1, 4, 7, 33])
def test_two_bit_codes_round_trip(rng, size):
    grad = rng.uniform(-1, 1, size).astype(np.float32)
    res_a, res_b = np.zeros(size, np.float32), np.zeros(size, np.float32)
    packed = quantize_2bit(grad, res_a, T)
    assert packed.dtype == np.uint8 and packed.size == -(-size // 4)
    expected = _reference(res_b, grad.copy(), T)
    np.testing.assert_array_equal(dequantize_2bit(packed, (size,), T), expected)
    np.testing.assert_allclose(res_a, res_b, atol=1e-7)
    comp = GradientCompression("2bit", T)
    codes = comp.quantize("k", 0, grad)
    out = np.empty(size, np.float64)
    assert comp.dequantize(codes, (size,), out=out) is out
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("params,match", [
    ({"type": "3bit"}, "unknown gradient compression type"),
    ({"threshold": 0.5}, "needs a 'type'"),
    ({"type": "2bit", "threshold": 0}, "greater than 0"),
    ({"type": "2bit", "threshold": -1}, "greater than 0"),
    ({"type": "2bit", "threshold": "x"}, "number"),
    ({"type": "2bit", "ratio": 2}, "unknown gradient compression parameter"),
])
def test_bad_parameters(params, match):
    with pytest.raises(MXNetError, match=match):
        _store().set_gradient_compression(params)
    with pytest.raises(ValueError, match=match):
        GradientCompression.from_params(params)


def test_none_turns_compression_off_and_defaults():
    store = _store()
    store.set_gradient_compression({"type": "none"})
    store.init(0, np.zeros(SHAPE, np.float32))
    store.push(0, np.full(SHAPE, 0.2, np.float32))
    assert (_pulled(store, 0) == np.float32(0.2)).all()
    assert GradientCompression.from_params({"type": "2bit"}).get_params() == \
        {"type": "2bit", "threshold": 0.5}
    with pytest.raises(TypeError):
        GradientCompression.from_params("2bit")


@pytest.mark.parametrize("name", ["local", "local_update_cpu", "local_allreduce_cpu"])
def test_host_stores_refuse_compression_as_in_mxnet(name):
    with pytest.raises(MXNetError, match="not supported"):
        kv.create(name).set_gradient_compression({"type": "2bit", "threshold": T})
    kv.create("local_allreduce_device").set_gradient_compression({"type": "2bit"})

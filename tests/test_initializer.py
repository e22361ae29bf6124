"""Initializers against written-out reference formulas (spec section 9)."""
import json
import pickle

import numpy as np
import pytest

import raymod as rm
from raymod import initializer as init
from raymod.initializer import InitDesc

W = (64, 32, 3, 3)                        # fan_in = 32*9 = 288, fan_out = 64*9 = 576


def _fill(initializer, name="fc_weight", shape=W, attrs=None, dtype=np.float32):
    arr = np.full(shape, np.nan, dtype=dtype)
    initializer(InitDesc(name, attrs), arr)
    return arr


@pytest.mark.parametrize("factor_type,factor", [("avg", (288 + 576) / 2), ("in", 288),
                                                ("out", 576)])
def test_xavier_uniform_bounds_and_std(factor_type, factor):
    rm.random.seed(0)
    scale = np.sqrt(3.0 / factor)
    arr = _fill(init.Xavier(factor_type=factor_type))
    assert arr.dtype == np.float32
    assert np.abs(arr).max() <= scale and np.abs(arr).max() > 0.99 * scale
    assert abs(arr.std() - scale / np.sqrt(3)) < 0.02 * scale / np.sqrt(3)
    assert abs(arr.mean()) < 0.02 * scale


@pytest.mark.parametrize("factor_type,factor", [("avg", 432), ("in", 288), ("out", 576)])
def test_xavier_gaussian_and_msraprelu_std(factor_type, factor):
    rm.random.seed(1)
    arr = _fill(init.Xavier("gaussian", factor_type, magnitude=2))
    assert abs(arr.std() - np.sqrt(2 / factor)) < 0.02 * np.sqrt(2 / factor)
    msra = _fill(init.MSRAPrelu(factor_type, slope=0.25))
    expected = np.sqrt(2 / (1 + 0.25 ** 2) / factor)
    assert abs(msra.std() - expected) < 0.02 * expected
    assert json.loads(init.MSRAPrelu().dumps()) == ["msraprelu", {"factor_type": "avg",
                                                                  "slope": 0.25}]


def test_xavier_refuses_vectors():
    with pytest.raises(ValueError, match="at least 2"):
        _fill(init.Xavier(), shape=(5,))


def test_uniform_and_normal():
    rm.random.seed(2)
    u = _fill(init.Uniform())
    assert np.abs(u).max() <= 0.07 and np.abs(u).max() > 0.069
    n = _fill(init.Normal(sigma=0.5))
    assert abs(n.std() - 0.5) < 0.01 and abs(n.mean()) < 0.01


def test_bilinear_4x4_is_outer_product():
    arr = _fill(init.Bilinear(), "upsample_weight", (1, 1, 4, 4))
    k = np.array([0.25, 0.75, 0.75, 0.25])
    np.testing.assert_allclose(arr[0, 0], np.outer(k, k))
    big = _fill(init.Bilinear(), "up_weight", (2, 3, 3, 3))
    k3 = 1 - np.abs(np.arange(3) / 2.0 - 0.75)      # MXNet's f = ceil(3/2) = 2, c = 3/4
    np.testing.assert_allclose(big[1, 2], np.outer(k3, k3))


@pytest.mark.parametrize("rand_type", ["uniform", "normal"])
def test_orthogonal_rows_or_columns(rand_type):
    wide = _fill(init.Orthogonal(scale=1.414, rand_type=rand_type), shape=(8, 4, 2, 4))
    flat = wide.reshape(8, 32).astype(np.float64)
    np.testing.assert_allclose(flat @ flat.T, 1.414 ** 2 * np.eye(8), atol=1e-5)
    tall = _fill(init.Orthogonal(scale=0.5, rand_type=rand_type), shape=(32, 8))
    np.testing.assert_allclose(tall.T.astype(np.float64) @ tall, 0.25 * np.eye(8), atol=1e-5)


def test_lstm_bias_through_variable_init_attribute():
    attrs = {"__init__": init.LSTMBias(forget_bias=2.0).dumps()}
    arr = _fill(init.Xavier(), "lstm_i2h_bias", (20,), attrs)
    expected = np.zeros(20)
    expected[5:10] = 2.0                                      # forget gate: 2nd of i, f, c, o
    np.testing.assert_array_equal(arr, expected)


def test_name_rules():
    xavier = init.Xavier()
    assert (_fill(xavier, "fc1_bias", (3,)) == 0).all()
    assert (_fill(xavier, "bn_gamma", (3,)) == 1).all()
    assert (_fill(xavier, "bn_beta", (3,)) == 0).all()
    assert (_fill(xavier, "bn_moving_mean", (3,)) == 0).all()
    assert (_fill(xavier, "bn_moving_var", (3,)) == 1).all()
    assert (_fill(xavier, "bn_moving_inv_var", (3,)) == 0).all()
    assert (_fill(xavier, "q_min", (1,)) == 0).all() and (_fill(xavier, "q_max", (1,)) == 1).all()
    with pytest.raises(ValueError, match="Unknown initialization pattern for 'embedding'"):
        _fill(xavier, "embedding", (3,))


def test_variable_init_attribute_wins_prelu_gamma():
    # the LeakyReLU op marks its gamma with an __init__ attribute; that beats the "gamma" rule
    arr = _fill(init.Uniform(), "prelu_gamma", (4,), {"__init__": init.Constant(0.25).dumps()})
    np.testing.assert_array_equal(arr, 0.25)
    desc = InitDesc("w_weight", {"__init__": '["one", {}]'})
    arr = np.zeros((2, 2), np.float32)
    glob = init.Normal()
    glob(desc, arr)
    assert (arr == 1).all() and desc.global_init is glob


def test_constant_zero_one_and_dumps():
    assert (_fill(init.Constant(2.0), shape=(3, 2)) == 2).all()
    assert (_fill(init.Zero(), shape=(3,)) == 0).all()
    assert (_fill(init.One(), shape=(3,)) == 1).all()
    assert json.loads(init.Constant(3).dumps()) == ["constant", {"value": 3}]
    assert json.loads(init.Constant(np.float32(1.5)).dumps()) == ["constant", {"value": 1.5}]
    assert json.loads(init.Constant(np.array([1.0, 2.0])).dumps()) == \
        ["constant", {"value": [1.0, 2.0]}]
    row = _fill(init.Constant(np.array([1.0, 2.0])), shape=(3, 2))
    np.testing.assert_array_equal(row, [[1, 2]] * 3)
    again = init.create(init.Constant(np.array([1.0, 2.0])).dumps())
    assert isinstance(again, init.Constant) and again.value == [1.0, 2.0]
    assert json.loads(init.Xavier().dumps()) == \
        ["xavier", {"rnd_type": "uniform", "factor_type": "avg", "magnitude": 3}]


def test_create_and_registry():
    assert isinstance(init.create("xavier", magnitude=2), init.Xavier)
    assert isinstance(init.create("zeros"), init.Zero) and isinstance(init.create("ONES"), init.One)
    u = init.Uniform(0.3)
    assert init.create(u) is u
    assert init.create(u.dumps()).scale == 0.3
    with pytest.raises(ValueError, match="known initializers: .*bilinear.*xavier"):
        init.create("glorot")

    @init.register
    class Halves(init.Initializer):
        def _init_weight(self, _, arr):
            arr[...] = 0.5

    assert (_fill(init.create("halves"), shape=(2,)) == 0.5).all()


def test_seed_gives_identical_draws():
    rm.random.seed(42)
    a = _fill(init.Xavier(rnd_type="gaussian"))
    b0 = _fill(init.Orthogonal(), shape=(6, 6))
    rm.random.seed(42)
    np.testing.assert_array_equal(a, _fill(init.Xavier(rnd_type="gaussian")))
    np.testing.assert_array_equal(b0, _fill(init.Orthogonal(), shape=(6, 6)))
    assert not np.array_equal(a, _fill(init.Xavier(rnd_type="gaussian")))


def test_float64_target_and_in_place():
    arr = np.zeros((4, 4), np.float64)
    view = arr[:, :2]
    init.Uniform(1.0)(InitDesc("a_weight"), view)
    assert (arr[:, 2:] == 0).all() and (arr[:, :2] != 0).all()


def test_mixed_and_load():
    mixed = init.Mixed(["fc_", ".*"], [init.Constant(0.1), init.One()])
    assert (_fill(mixed, "fc_weight", (2,)) == np.float32(0.1)).all()
    assert (_fill(mixed, "conv_weight", (2,)) == 1).all()
    assert (_fill(mixed, "fc_bias", (2,)) == 0).all()     # the chosen one still applies name rules
    with pytest.raises(ValueError, match="matches none"):
        _fill(init.Mixed(["a"], [init.One()]), "b_weight", (1,))
    saved = {"arg:fc_weight": np.arange(4.0).reshape(2, 2), "aux:bn_moving_var": np.ones(2)}
    load = init.Load(saved, default_init=init.Zero())
    np.testing.assert_array_equal(_fill(load, "fc_weight", (2, 2)), saved["arg:fc_weight"])
    assert (_fill(load, "other_weight", (3,)) == 0).all()
    with pytest.raises(ValueError, match="shape mismatch"):
        _fill(load, "fc_weight", (4,))
    with pytest.raises(ValueError, match="no default_init"):
        _fill(init.Load(saved), "other_weight", (3,))


def test_load_from_npz(tmp_path):
    np.savez(tmp_path / "p.npz", **{"arg:w_weight": np.full((2,), 7.0)})
    np.testing.assert_array_equal(_fill(init.Load(str(tmp_path / "p.npz")), "w_weight", (2,)), 7)


def test_plain_string_name_still_works_with_deprecation_warning():
    arr = np.zeros(3, np.float32)
    with pytest.warns(DeprecationWarning):
        init.Xavier()("fc_gamma", arr)
    assert (arr == 1).all()


def test_init_desc_is_str_with_attrs_and_pickles():
    d = InitDesc("fc_weight", {"lr_mult": "2"})
    assert d == "fc_weight" and d.endswith("weight") and d.attrs == {"lr_mult": "2"}
    e = pickle.loads(pickle.dumps(d))
    assert e == d and e.attrs == d.attrs and e.global_init is None


def test_unknown_parameters_refused():
    with pytest.raises(ValueError, match="factor_type"):
        init.Xavier(factor_type="sum")
    with pytest.raises(ValueError, match="rnd_type"):
        init.Xavier(rnd_type="cauchy")


@pytest.mark.gpu
@pytest.mark.skipif(not rm.context.gpu_available(), reason="needs CuPy and a CUDA device")
def test_fills_cupy_arrays_in_place():
    import cupy
    arr = cupy.zeros((8, 4), dtype=cupy.float32)
    rm.random.seed(3)
    init.Xavier()(InitDesc("fc_weight"), arr)
    rm.random.seed(3)
    host = _fill(init.Xavier(), shape=(8, 4))
    np.testing.assert_array_equal(cupy.asnumpy(arr), host)
    init.LSTMBias(2.0)(InitDesc("b", {"__init__": init.LSTMBias(2.0).dumps()}), arr[:, 0])
    assert float(arr[2:4, 0].sum()) == 4.0 and float(arr[:2, 0].sum()) == 0.0

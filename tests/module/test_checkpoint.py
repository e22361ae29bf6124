"""MXNet's .params format (raymod.ndarray_io) and checkpoints (raymod.checkpoint / model)."""
import os
import pickle
import struct

import numpy as np
import pytest

import raymod as rm
from raymod import checkpoint, model, ndarray_io
from raymod.base import MXNetError
from raymod.module import Module

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "mxnet")
MLP_BN = os.path.join(FIXTURES, "mlp_bn")


# ---- ndarray_io ---------------------------------------------------------------------------

def test_mxnet_written_params_load_with_mxnet_names_and_values():
    loaded = ndarray_io.load(MLP_BN + "-0001.params")
    expected = np.load(MLP_BN + "-io.npz")
    assert list(loaded) == ["arg:fc1_weight", "arg:fc1_bias", "arg:bn1_gamma", "arg:bn1_beta",
                            "arg:fc2_weight", "arg:fc2_bias", "aux:bn1_moving_mean",
                            "aux:bn1_moving_var"]
    for name, value in loaded.items():
        assert value.dtype == expected[name].dtype and value.flags.writeable
        np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_writing_the_loaded_fixture_gives_the_same_bytes(tmp_path):
    source = MLP_BN + "-0001.params"
    ndarray_io.save(tmp_path / "copy.params", ndarray_io.load(source))
    with open(source, "rb") as a, open(tmp_path / "copy.params", "rb") as b:
        assert a.read() == b.read()


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "uint8", "int32", "int8",
                                   "int64", "bool"])
def test_round_trip_keeps_dtype_and_values(tmp_path, dtype):
    arr = (np.arange(12).reshape(3, 4) % 3).astype(dtype)
    ndarray_io.save(tmp_path / "a.params", {"x": arr})
    back = ndarray_io.load(tmp_path / "a.params")["x"]
    assert back.dtype == arr.dtype and back.shape == arr.shape
    np.testing.assert_array_equal(back, arr)


def test_lists_single_arrays_and_big_endian_input(tmp_path):
    f = tmp_path / "l.params"
    ndarray_io.save(f, [np.ones((2, 2)), np.arange(3, dtype=">i4")])
    out = ndarray_io.load(f)
    assert isinstance(out, list) and len(out) == 2
    np.testing.assert_array_equal(out[1], [0, 1, 2])
    ndarray_io.save(f, np.float32(3.5) * np.ones(4, np.float32))
    assert isinstance(ndarray_io.load(f), list)
    ndarray_io.save(f, {})
    assert ndarray_io.load(f) == []  # MXNet loads an empty dict back as an empty list


def test_scalars_and_empty_arrays_use_v3_records_for_the_whole_file(tmp_path):
    f = tmp_path / "v3.params"
    data = {"s": np.array(2.5), "e": np.zeros((0, 3), np.int64), "w": np.ones((2,), np.float32)}
    ndarray_io.save(f, data)
    raw = open(f, "rb").read()
    assert struct.unpack("<I", raw[24:28])[0] == ndarray_io.V3_MAGIC
    assert raw.count(struct.pack("<I", ndarray_io.V2_MAGIC)) == 0
    back = ndarray_io.load(f)
    for k, v in data.items():
        assert back[k].shape == v.shape and back[k].dtype == v.dtype
        np.testing.assert_array_equal(back[k], v)


def test_load_frombuffer_matches_load(tmp_path):
    raw = open(MLP_BN + "-0001.params", "rb").read()
    a, b = ndarray_io.load_frombuffer(raw), ndarray_io.load(MLP_BN + "-0001.params")
    assert list(a) == list(b) and all(np.array_equal(a[k], b[k]) for k in a)


def test_unsupported_values_are_type_errors(tmp_path):
    with pytest.raises(TypeError, match="complex"):
        ndarray_io.save(tmp_path / "c.params", {"c": np.zeros(2, np.complex64)})
    with pytest.raises(TypeError, match="numpy or cupy array"):
        ndarray_io.save(tmp_path / "c.params", {"c": [1, 2]})
    with pytest.raises(TypeError, match="keys must be str"):
        ndarray_io.save(tmp_path / "c.params", {1: np.zeros(2)})


def _good_bytes():
    return ndarray_io._encode({"a": np.arange(6, dtype=np.float32).reshape(2, 3)})


def _patched(offset, fmt, value):
    raw = bytearray(_good_bytes())
    struct.pack_into(fmt, raw, offset, value)
    return bytes(raw)


@pytest.mark.parametrize("raw, message", [
    (b"", "too short"),
    (_patched(0, "<Q", 0x113), "list magic"),
    (_good_bytes()[:40], "truncated"),
    (_good_bytes()[:-3], "truncated"),
    (_good_bytes() + b"\0", "unexpected bytes"),
    (_patched(24, "<I", 0xDEADBEEF), "magic 0xDEADBEEF"),
    (_patched(28, "<i", 5), "storage type 5"),
    (_patched(28, "<i", 1), "array 0"),  # a dense record read as row_sparse: malformed
    (_patched(32, "<i", 99), "ndim 99"),
    (_patched(60, "<i", 12), "dtype flag 12"),
    (_patched(16, "<Q", 1 << 40), "more than the file can hold"),
    (pickle.dumps({"a": 1}), "too short"),
    (pickle.dumps(list(range(30))), "list magic"),
])
def test_malformed_files_raise_mxnet_error(raw, message):
    with pytest.raises(MXNetError, match=message):
        ndarray_io.load_frombuffer(raw)


def test_name_count_must_match_array_count():
    raw = bytearray(_good_bytes())
    names_at = len(raw) - (8 + 8 + 1)  # u64 count, u64 length, "a"
    struct.pack_into("<Q", raw, names_at, 2)
    with pytest.raises(MXNetError, match="2 names for 1 arrays"):
        ndarray_io.load_frombuffer(bytes(raw))


def test_a_failed_save_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    f = tmp_path / "keep.params"
    ndarray_io.save(f, {"a": np.ones(3, np.float32)})
    before = open(f, "rb").read()

    def broken_fsync(fd):
        raise OSError("disk full")
    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk full"):
        ndarray_io.save(f, {"a": np.zeros(1000, np.float32)})
    assert open(f, "rb").read() == before
    assert os.listdir(tmp_path) == ["keep.params"]


# ---- checkpoints ---------------------------------------------------------------------------

def _net():
    data = rm.sym.Variable("data")
    x = rm.sym.FullyConnected(data, num_hidden=4, name="fc1")
    x = rm.sym.BatchNorm(x, name="bn1")
    return rm.sym.SoftmaxOutput(rm.sym.FullyConnected(x, num_hidden=2, name="fc2"), name="softmax")


def test_save_and_load_checkpoint_round_trip(tmp_path):
    net = _net()
    rng = np.random.default_rng(0)
    arg = {"fc1_weight": rng.standard_normal((4, 3)).astype(np.float32),
           "fc1_bias": np.zeros(4, np.float32)}
    aux = {"bn1_moving_var": np.ones(4, np.float32)}
    prefix = str(tmp_path / "net")
    model.save_checkpoint(prefix, 7, net, arg, aux)
    assert sorted(os.listdir(tmp_path)) == ["net-0007.params", "net-symbol.json"]
    assert list(ndarray_io.load(prefix + "-0007.params")) == [
        "arg:fc1_weight", "arg:fc1_bias", "aux:bn1_moving_var"]
    sym, arg2, aux2 = model.load_checkpoint(prefix, 7)
    assert sym.tojson() == net.tojson()
    assert set(arg2) == set(arg) and set(aux2) == set(aux)
    np.testing.assert_array_equal(arg2["fc1_weight"], arg["fc1_weight"])
    assert checkpoint.load_params(prefix, 7)[1].keys() == aux.keys()


def test_checkpoint_params_need_arg_or_aux_prefixes(tmp_path):
    prefix = str(tmp_path / "bad")
    _net().save(prefix + "-symbol.json")
    ndarray_io.save(prefix + "-0001.params", {"fc1_weight": np.ones(2)})
    with pytest.raises(MXNetError, match="'arg:' or 'aux:'"):
        model.load_checkpoint(prefix, 1)
    ndarray_io.save(prefix + "-0001.params", [np.ones(2)])
    with pytest.raises(MXNetError, match="unnamed"):
        model.load_checkpoint(prefix, 1)
    with pytest.raises(FileNotFoundError):
        model.load_checkpoint(str(tmp_path / "missing"), 1)


def test_do_checkpoint_callback_writes_mxnet_layout(tmp_path):
    prefix = str(tmp_path / "cb")
    rm.callback.do_checkpoint(prefix)(0, _net(), {"w": np.ones(2, np.float32)}, {})
    assert sorted(os.listdir(tmp_path)) == ["cb-0001.params", "cb-symbol.json"]


def test_mxnet_checkpoint_fixture_predicts_like_mxnet():
    io = np.load(MLP_BN + "-io.npz")
    mod = Module.load(MLP_BN, 1)
    assert mod.params_initialized and not mod.binded
    it = rm.io.NDArrayIter(io["input"], batch_size=10)
    with pytest.warns(UserWarning, match="label_shapes"):
        mod.bind(it.provide_data, None, for_training=False)
    np.testing.assert_allclose(mod.predict(it), io["pred"], rtol=1e-5, atol=1e-5)
    arg, aux = mod.get_params()
    np.testing.assert_array_equal(aux["bn1_moving_var"], io["aux:bn1_moving_var"])


def test_load_optimizer_states_needs_the_states_file(tmp_path):
    prefix = str(tmp_path / "m")
    model.save_checkpoint(prefix, 1, _net(), {}, {})
    with pytest.raises(FileNotFoundError, match="m-0001.states"):
        Module.load(prefix, 1, load_optimizer_states=True)

"""MXNet's module paths and helpers under the compatibility layer (issue 22).

``mxnet.module`` is a package with MXNet's submodules; an MXNet-era ``Module(BaseModule)``
written against ``mxnet.model``'s private helpers trains exactly as the stock Module; any
``mxnet.*`` import succeeds (a stand-in raises on first use, naming it); iterators may
assign ``provide_data``; ``mx.test_utils``'s MNIST helpers read local files only; and
tools/mxnet_unittests.py stands in for MXNet's support files only when they are absent.
"""
import importlib.util
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

import raymod as rm
import raymod.compat
from compat_data import write_idx
from raymod.compat import NotSupportedError

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture
def mx():
    """``import mxnet`` meaning raymod, as under ``raymod run``; everything it and the
    imports of a test added is removed afterwards."""
    import raymod.compat.mxnet as layer
    import raymod.compat.mxnet.contrib as contrib
    before = {m: set(vars(m)) for m in (layer, contrib)}
    raymod.compat.install()
    import mxnet
    yield mxnet
    raymod.compat.uninstall()
    for name in [n for n in sys.modules if n == "mxnet" or n.startswith("mxnet.")]:
        del sys.modules[name]  # the names the finder made on import
    for module, names in before.items():  # ... and set on their (real) parents
        for name in set(vars(module)) - names:
            delattr(module, name)


# ---- 1. mxnet.module is a package ------------------------------------------------------------
SUBMODULES = {"base_module": ["BaseModule"], "module": ["Module"],
              "bucketing_module": ["BucketingModule"],
              "sequential_module": ["SequentialModule"],
              "python_module": ["PythonModule", "PythonLossModule"]}


def test_module_submodules_import_both_ways_and_hold_the_compat_classes(mx):
    import mxnet.module.base_module
    from mxnet.module.base_module import (BaseModule, _check_input_names,  # noqa: F401
                                          _parse_data_desc)
    from mxnet.module.executor_group import DataParallelExecutorGroup

    assert mxnet.module.base_module is mx.module.base_module is mx.mod.base_module
    assert BaseModule is mx.mod.BaseModule
    for sub, classes in SUBMODULES.items():
        module = importlib.import_module(f"mxnet.module.{sub}")
        assert module is getattr(mx.module, sub) is sys.modules[f"mxnet.module.{sub}"]
        for cls in classes:
            assert getattr(module, cls) is getattr(mx.mod, cls), (sub, cls)
    assert DataParallelExecutorGroup is rm.parallel.executor_group.DataParallelExecutorGroup
    assert mx.module.executor_group.DataParallelExecutorGroup is DataParallelExecutorGroup
    assert _parse_data_desc is rm.module.base_module._parse_data_desc
    assert mx.mod.Module.__module__ == "raymod.compat.mxnet.module"  # as before the package


def test_base_module_helpers_check_names():
    from raymod.compat.mxnet.module.base_module import (_check_input_names,
                                                        _check_names_match, _parse_data_desc)
    net = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=2, name="fc")
    with pytest.raises(ValueError, match="'x' is not an argument"):
        _check_input_names(net, ["x"], "data", True)
    descs, labels = _parse_data_desc(["data"], [], [("data", (4, 3))], None)
    assert descs[0].name == "data" and descs[0].shape == (4, 3) and labels is None
    _check_names_match(["data"], [("data", (4, 3))], "data", True)
    with pytest.raises(ValueError, match=r"data_shapes provide \['x'\] but data_names are "
                                         r"\['data'\]"):
        _check_names_match(["data"], [("x", (4, 3))], "data", True)
    with pytest.warns(UserWarning, match="label_shapes provide"):
        _check_names_match(["softmax_label"], [], "label", False)


# ---- 2. an MXNet-era Module(BaseModule) over mxnet.model's helpers ---------------------------
def _load_old_style_module():
    """tests/compat/scripts/old_style_module.py, imported with ``mxnet`` meaning raymod."""
    path = os.path.join(HERE, "scripts", "old_style_module.py")
    spec = importlib.util.spec_from_file_location("old_style_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _mlp(mx):
    net = mx.sym.FullyConnected(mx.sym.Variable("data"), num_hidden=8, name="fc1")
    net = mx.sym.Activation(net, act_type="relu")
    net = mx.sym.FullyConnected(net, num_hidden=2, name="fc2")
    return mx.sym.SoftmaxOutput(net, name="softmax")


def _fit(mx, cls, contexts, batch_end_callback=None):
    rng = np.random.RandomState(0)
    x = rng.randn(200, 10).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float32)
    train = mx.io.NDArrayIter(x, y, batch_size=20)
    mx.random.seed(11)
    mod = cls(_mlp(mx), context=contexts)
    mod.fit(train, num_epoch=4, optimizer="sgd", initializer=mx.init.Xavier(),
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
            batch_end_callback=batch_end_callback)
    return mod, train


@pytest.mark.parametrize("devices, on_kvstore, kvstore", [
    (1, "1", None),          # one device: no kvstore, the updater runs here
    (2, "1", "local"),       # the optimizer runs in the kvstore
    (2, "0", "local"),       # the kvstore sums, each device copy updates itself
], ids=["one-device", "update-on-kvstore", "update-on-devices"])
def test_old_style_module_trains_as_the_stock_module(mx, monkeypatch, tmp_path, devices,
                                                     on_kvstore, kvstore):
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", on_kvstore)
    from mxnet.model import BatchEndParam
    old_style = _load_old_style_module()
    contexts = [mx.cpu(i) for i in range(devices)]
    seen = []
    old, train = _fit(mx, old_style.OldModule, contexts, seen.append)
    stock, _ = _fit(mx, mx.mod.Module, contexts)

    assert (old._kvstore is None) == (kvstore is None)
    assert old._update_on_kvstore == (kvstore is not None and on_kvstore == "1")
    assert isinstance(seen[0], BatchEndParam) and seen[-1].epoch == 3
    acc = dict(old.score(train, "acc"))["accuracy"]
    assert acc == dict(stock.score(train, "acc"))["accuracy"] and acc > 0.95
    old_args, stock_args = old.get_params()[0], stock.get_params()[0]
    for name, value in stock_args.items():
        np.testing.assert_allclose(old_args[name], value, rtol=1e-6, atol=1e-7, err_msg=name)
    # its own get_outputs returns the executor group's arrays: viewed as NDArrays all the same
    assert isinstance(old.get_outputs()[0], mx.nd.NDArray)
    assert isinstance(old.predict(train), mx.nd.NDArray)

    prefix = str(tmp_path / "old")
    old.save_checkpoint(prefix, 4)
    loaded = old_style.OldModule.load(prefix, 4, context=contexts)
    loaded.bind(train.provide_data, train.provide_label, for_training=False)
    assert dict(loaded.score(train, "acc"))["accuracy"] == acc


def test_model_helpers_follow_mxnet(mx, monkeypatch):
    from mxnet.model import (_create_kvstore, _initialize_kvstore, _update_params,
                             _update_params_on_kvstore)
    params = {"w": np.ones((2, 2), np.float32)}
    assert _create_kvstore("local", 1, params) == (None, False)  # one device: no store
    assert _create_kvstore(None, 4, params) == (None, False)
    kv, on_kv = _create_kvstore("local", 2, params)
    assert kv.type == "local" and on_kv
    monkeypatch.setenv("MXNET_UPDATE_ON_KVSTORE", "0")
    assert _create_kvstore(kv, 1, params) == (kv, False)
    with pytest.raises(TypeError, match="kvstore must be"):
        _create_kvstore(3, 2, params)

    copies = [[np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32)]]
    _initialize_kvstore(kv, copies, {"w": np.full((2, 2), 3, np.float32)}, ["w"], True)
    assert all((c == 3).all() for c in copies[0])  # broadcast to every device copy
    grads = [[np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)]]
    kv.set_optimizer(rm.optimizer.SGD(learning_rate=0.5))
    _update_params_on_kvstore(copies, grads, kv, ["w"])
    assert all(np.allclose(c, 3 - 0.5 * 2) for c in copies[0])  # the summed gradient

    calls = []
    weights = [[np.zeros(2), np.zeros(2)], [np.zeros(2), np.zeros(2)]]
    _update_params(weights, [[np.ones(2), np.ones(2)], [None, None]],
                   updater=lambda i, g, w: calls.append(list(i)), num_device=2)
    assert calls == [[0], [1]]  # index * num_device + device; the fixed one is skipped
    with pytest.raises(ValueError, match=r"_update_params: param_names must name each of "
                                         r"the 2 parameters .*got None"):
        _update_params(weights, weights, updater=lambda *a: None, num_device=2, kvstore=kv)


# ---- 4. any mxnet.* import succeeds; use names it ---------------------------------------------
def test_left_out_modules_import_and_fail_on_first_use_naming_it(mx):
    from mxnet.contrib.amp import amp
    import mxnet.gluon.nn
    import mxnet.contrib.onnx as onnx_mxnet
    import mxnet.no_such_module.deeper as deeper

    with pytest.raises(NotSupportedError, match=r"mxnet\.contrib\.amp\.amp\.init: automatic "
                                                r"mixed precision"):
        amp.init()
    with pytest.raises(NotSupportedError, match=r"mxnet\.gluon\.nn\.Dense: Gluon"):
        mxnet.gluon.nn.Dense(3)
    with pytest.raises(NotSupportedError, match=r"mxnet\.contrib\.onnx\.import_model"):
        onnx_mxnet.import_model("m.onnx")
    with pytest.raises(NotSupportedError, match=r"mxnet\.no_such_module\.deeper\.f: the MXNet "
                                                r"module mxnet\.no_such_module is not supported"):
        deeper.f
    with pytest.raises(NotSupportedError, match=r"mxnet\.no_such_module\.deeper\(\.\.\.\)"):
        deeper()
    assert not hasattr(amp, "init")  # feature tests (hasattr) read it as missing
    assert mx.contrib.amp is sys.modules["mxnet.contrib.amp"]


def test_provided_modules_still_say_what_is_missing(mx):
    import mxnet.symbol.symbol
    import mxnet.optimizer.optimizer as optimizer_module

    # a submodule raymod has is raymod's, keeping its own spec
    assert mxnet.symbol.symbol is sys.modules["raymod.symbol.symbol"]
    assert mxnet.symbol.symbol.__spec__.name == "raymod.symbol.symbol"
    assert optimizer_module.Optimizer is rm.optimizer.Optimizer
    with pytest.raises(AttributeError, match="no attribute 'nonexistent_name'") as err:
        mx.nonexistent_name
    assert not isinstance(err.value, NotSupportedError)
    with pytest.raises(AttributeError, match="FullyConected") as err:
        mx.sym.FullyConected
    assert not isinstance(err.value, NotSupportedError)
    with pytest.raises(ImportError, match="cannot import name 'Modul'"):
        from mxnet.module import Modul  # noqa: F401


# ---- 5. iterators may assign provide_data / provide_label ------------------------------------
def test_iterator_assigning_provide_data_in_init_trains(mx):
    class Batches(mx.io.DataIter):  # MXNet's nce-loss example writes its iterators this way
        def __init__(self, x, y, batch_size):
            super().__init__()
            self.x, self.y, self.batch_size, self.cursor = x, y, batch_size, 0
            self.provide_data = [("data", (batch_size, x.shape[1]))]
            self.provide_label = [("softmax_label", (batch_size,))]

        def __iter__(self):
            for i in range(0, len(self.x), self.batch_size):
                yield mx.io.DataBatch([mx.nd.array(self.x[i:i + self.batch_size])],
                                      [mx.nd.array(self.y[i:i + self.batch_size])])

        def reset(self):
            pass

    rng = np.random.RandomState(1)
    x = rng.rand(80, 5).astype(np.float32)
    y = (x[:, 0] > 0.5).astype(np.float32)
    it = Batches(x, y, 16)
    assert it.provide_data == [("data", (16, 5))]
    mod = mx.mod.Module(_mlp(mx))
    mod.fit(it, num_epoch=2, optimizer_params={"learning_rate": 0.1})
    assert mod.data_shapes[0].shape == (16, 5)


def test_assigned_descriptors_replace_the_computed_ones_per_instance():
    x, y = np.zeros((8, 3), np.float32), np.zeros(8, np.float32)

    class Renamed(rm.io.NDArrayIter):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.provide_data = [rm.io.DataDesc("pixels", (4, 3))]

    assert Renamed(x, y, batch_size=4).provide_data == [("pixels", (4, 3))]
    plain = rm.io.NDArrayIter(x, y, batch_size=4)
    assert plain.provide_data == [("data", (4, 3))]  # computed, as before
    assert plain.provide_label == [("softmax_label", (4,))]
    with pytest.raises(NotImplementedError, match="DataIter defines no provide_data"):
        rm.io.DataIter().provide_data


# ---- 3. MNIST from local files only ----------------------------------------------------------
@pytest.fixture
def offline(monkeypatch, tmp_path):
    """Work in an empty folder, with any attempt to reach the network failing the test."""
    def no_network(*args, **kwargs):
        raise AssertionError("tried to reach the network")
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _mnist_files(folder, train=40, test=20, gz=False):
    rng = np.random.default_rng(0)
    os.makedirs(folder, exist_ok=True)
    arrays = {}
    for prefix, rows in (("train", train), ("t10k", test)):
        arrays[f"{prefix}-images-idx3-ubyte"] = rng.integers(0, 256, (rows, 28, 28), np.uint8)
        arrays[f"{prefix}-labels-idx1-ubyte"] = (np.arange(rows) % 10).astype(np.uint8)
    for name, array in arrays.items():
        path = os.path.join(folder, name)
        write_idx(path, array)
        if gz:
            import gzip
            with open(path, "rb") as f, gzip.open(path + ".gz", "wb") as out:
                out.write(f.read())
            os.remove(path)
    return arrays


def test_get_mnist_iterator_reads_data_folder(mx, offline):
    arrays = _mnist_files("data")
    train, val = mx.test_utils.get_mnist_iterator(10, (784,))
    batch = next(iter(train))
    assert batch.data[0].shape == (10, 784) and isinstance(batch.data[0], mx.nd.NDArray)
    assert sum(1 for _ in val) == 2
    train, _ = mx.test_utils.get_mnist_iterator(10, (1, 28, 28), num_parts=2, part_index=1)
    labels = np.concatenate([b.label[0].asnumpy() for b in train])
    assert train.provide_data[0].shape == (10, 1, 28, 28) and len(labels) == 20
    np.testing.assert_array_equal(np.sort(labels),
                                  np.sort(arrays["train-labels-idx1-ubyte"][20:]))


def test_mnist_helpers_name_the_missing_paths(mx, offline):
    missing = os.path.join(str(offline), "data", "train-images-idx3-ubyte")
    with pytest.raises(NotSupportedError, match=f"downloading .*{missing}"):
        mx.test_utils.get_mnist_iterator(10, (784,))
    with pytest.raises(NotSupportedError, match=f"train-images-idx3-ubyte.gz.*{missing}"):
        mx.test_utils.get_mnist()
    with pytest.raises(TypeError, match="input_shape must be a tuple .* got int 784"):
        mx.test_utils.get_mnist_iterator(10, 784)


@pytest.mark.parametrize("where", ["data", "data-gz", "cwd-gz"])
def test_get_mnist_returns_mxnet_arrays(mx, offline, where):
    folder = "." if where == "cwd-gz" else "data"
    arrays = _mnist_files(folder, gz=where != "data")
    got = mx.test_utils.get_mnist()
    assert got["train_data"].shape == (40, 1, 28, 28) and got["train_data"].dtype == np.float32
    np.testing.assert_allclose(got["test_data"][:, 0],
                               arrays["t10k-images-idx3-ubyte"] / np.float32(255), rtol=1e-6)
    assert got["train_label"].dtype == np.int8
    np.testing.assert_array_equal(got["test_label"], arrays["t10k-labels-idx1-ubyte"])


def test_mnist_iter_takes_mxnet_arguments(mx, offline):
    _mnist_files("data")
    it = mx.io.MNISTIter(image="data/train-images-idx3-ubyte",
                         label="data/train-labels-idx1-ubyte", input_shape=(1, 28, 28),
                         batch_size=8, shuffle=True, flat=True, silent=True, seed=2,
                         num_parts=1, part_index=0, prefetch_buffer=4, data_shape=(784,))
    assert it.provide_data[0].shape == (8, 784)  # batches follow `flat`, as in MXNet
    with pytest.raises(ValueError, match=r"input_shape=\(3, 3\) .* expected 784 pixels.* got 9"):
        mx.io.MNISTIter(image="data/train-images-idx3-ubyte",
                        label="data/train-labels-idx1-ubyte", input_shape=(3, 3))
    with pytest.raises(TypeError, match="unexpected argument.*'colour'"):
        mx.io.MNISTIter(image="data/train-images-idx3-ubyte",
                        label="data/train-labels-idx1-ubyte", colour=True)


# ---- 6. tools/mxnet_unittests.py: stand-ins only for absent support files --------------------
def test_unittest_plugin_stands_in_only_for_absent_support_files(tmp_path):
    spec = importlib.util.spec_from_file_location(
        "mxnet_unittests", os.path.join(ROOT, "tools", "mxnet_unittests.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    tests = tmp_path / "python" / "unittest"
    tests.mkdir(parents=True)
    (tmp_path / "python" / "train").mkdir()
    (tmp_path / "python" / "train" / "test_bucketing.py").write_text(
        "raise ImportError('the support file itself failed')\n")  # no common/models.py
    probe = tool.PLUGIN + (
        "\nimport json\nout = {}\n"
        "try:\n    import test_bucketing\nexcept ImportError as e:\n    out['bucketing'] = str(e)\n"
        "import models\ntry:\n    models.lenet()\nexcept RuntimeError as e:\n"
        "    out['models'] = str(e)\nprint(json.dumps(out))\n")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "MXCOMPAT_TESTS": str(tests)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["bucketing"] == "the support file itself failed"
    assert "tests/python/common/models.py is missing" in out["models"]


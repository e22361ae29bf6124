"""BaseModule.fit: per-batch order, hooks, logging, callbacks, validation, resuming."""
import logging

import numpy as np
import pytest

import raymod as rm
from raymod.io import NDArrayIter
from raymod.module import BaseModule, Module

TWO = [rm.cpu(0), rm.cpu(1)]


class _Batch:
    """A batch whose label may only be read while it is the latest one fetched."""

    latest = None

    def __init__(self, i):
        self.i = i

    @property
    def label(self):
        assert _Batch.latest == self.i, "label of an older batch was read"
        return [f"label{self.i}"]


class _Data:
    """An iterator of ``_Batch``es with MXNet's DataIter surface."""

    provide_data = provide_label = None

    def __init__(self, batches):
        self.batches, self.resets = batches, 0

    def __iter__(self):
        self.pos = 0
        return self

    def __next__(self):
        if self.pos == self.batches:
            raise StopIteration
        _Batch.latest = self.pos
        self.pos += 1
        return _Batch(self.pos - 1)

    def reset(self):
        self.resets += 1


class _Recorder(BaseModule):
    """A stub module that records which primitives fit calls, and with what."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def _log(self, *entry):
        self.calls.append(entry)

    def bind(self, *a, **k): self._log("bind", k.get("for_training"))
    def init_params(self, *a, **k): self._log("init_params")
    def init_optimizer(self, *a, **k): self._log("init_optimizer", k.get("optimizer"))
    def forward(self, batch, is_train=None): self._log("forward", batch.i, is_train)
    def backward(self, out_grads=None): self._log("backward")
    def update(self): self._log("update")
    def update_metric(self, metric, labels, pre_sliced=False): self._log("metric", labels[0])
    def prepare(self, batch, sparse_row_id_fn=None): self._log("prepare", batch.i)
    def get_params(self): self._log("get_params"); return {}, {}


def test_fit_runs_mxnet_per_batch_order():
    mod, data = _Recorder(), _Data(3)
    mod.fit(data, num_epoch=1, batch_end_callback=lambda p: mod._log("batch_end", p.nbatch),
            epoch_end_callback=lambda e, *_: mod._log("epoch_end", e))
    assert mod.calls == [
        ("bind", True), ("init_params",), ("init_optimizer", "sgd"),
        ("forward", 0, True), ("backward",), ("update",), ("metric", "label0"), ("prepare", 1),
        ("batch_end", 0),
        ("forward", 1, True), ("backward",), ("update",), ("metric", "label1"), ("prepare", 2),
        ("batch_end", 1),
        ("forward", 2, True), ("backward",), ("update",), ("metric", "label2"),
        ("batch_end", 2),
        ("get_params",), ("init_params",), ("epoch_end", 0)]
    assert data.resets == 1


def test_fit_on_a_bare_base_module_with_patched_primitives():
    # MXNet's own stub test: only the latest fetched batch's labels are touched
    mod = BaseModule()
    for name in ("bind", "init_params", "init_optimizer", "forward", "backward", "update",
                 "update_metric"):
        setattr(mod, name, lambda *a, **k: None)
    mod.get_params = lambda: (None, None)
    mod.fit(_Data(2), num_epoch=1)


def test_fit_hooks_can_be_overridden_without_copying_the_loop():
    class Variant(_Recorder):
        def _fit_begin_epoch(self, epoch, train_data, eval_metric):
            self._log("begin", epoch)
            super()._fit_begin_epoch(epoch, train_data, eval_metric)

    mod = Variant()
    mod.fit(_Data(1), num_epoch=2, begin_epoch=0)
    assert [c for c in mod.calls if c[0] == "begin"] == [("begin", 0), ("begin", 1)]


def test_fit_checks_its_arguments_before_binding():
    x = np.zeros((8, 5), np.float32)
    it = NDArrayIter(x, np.zeros(8, np.float32), batch_size=4)
    mod = Module(rm.sym.SoftmaxOutput(rm.sym.FullyConnected(rm.sym.Variable("data"),
                                                            num_hidden=2), name="softmax"))
    for kwargs, error, message in [
            ({}, ValueError, "num_epoch"),
            ({"num_epoch": 1, "kvstore": "nope"}, ValueError, "unknown kvstore type 'nope'"),
            ({"num_epoch": 1, "optimizer": "nope"}, ValueError, "unknown optimizer 'nope'"),
            ({"num_epoch": 1, "eval_metric": "nope"}, ValueError, "nope")]:
        with pytest.raises(error, match=message):
            mod.fit(it, **kwargs)
        assert not mod.binded
    other = NDArrayIter({"x": x}, np.zeros(8, np.float32), batch_size=4)
    with pytest.raises(ValueError, match=r"provide \['x'\] but the module's data_names"):
        mod.fit(other, num_epoch=1)
    assert not mod.binded


def _separable(rows, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 10)).astype(np.float32)
    return x, (x[:, :4].argmax(axis=1)).astype(np.float32)


def _classifier():
    x = rm.sym.Activation(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=32,
                                                name="fc1"), act_type="relu")
    return rm.sym.SoftmaxOutput(rm.sym.FullyConnected(x, num_hidden=4, name="fc2"),
                                name="softmax")


def test_fit_learns_a_separable_problem_and_logs_like_mxnet(caplog):
    rm.random.seed(3)
    x, y = _separable(600, 0)
    vx, vy = _separable(200, 1)
    train = NDArrayIter(x, y, batch_size=30, shuffle=True, seed=0)
    val = NDArrayIter(vx, vy, batch_size=50)
    seen = []
    mod = Module(_classifier(), context=TWO)
    with caplog.at_level(logging.INFO):
        mod.fit(train, eval_data=val, num_epoch=8, optimizer="sgd",
                optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
                initializer=rm.init.Xavier(), batch_end_callback=seen.append)
    assert mod.score(val, "acc")[0][1] > 0.93
    assert len(seen) == 8 * 20 and seen[-1].epoch == 7 and seen[-1].nbatch == 19
    assert seen[0].eval_metric.get()[0] == "accuracy"
    text = caplog.text
    for line in ("Epoch[0] Train-accuracy=", "Epoch[7] Time cost=",
                 "Epoch[7] Validation-accuracy="):
        assert line in text


def test_fit_after_a_checkpoint_resumes_the_uninterrupted_run(tmp_path):
    x, y = _separable(80, 2)
    kwargs = dict(optimizer="sgd", optimizer_params={"learning_rate": 0.1, "momentum": 0.9},
                  initializer=rm.init.Xavier())

    def train(mod, begin, end, **extra):
        mod.fit(NDArrayIter(x, y, batch_size=20), begin_epoch=begin, num_epoch=end,
                **kwargs, **extra)

    rm.random.seed(5)
    straight = Module(_classifier())
    train(straight, 0, 4)

    rm.random.seed(5)
    first = Module(_classifier())
    prefix = str(tmp_path / "run")
    train(first, 0, 2, epoch_end_callback=rm.callback.module_checkpoint(
        first, prefix, save_optimizer_states=True))
    resumed = Module.load(prefix, 2, load_optimizer_states=True)
    with pytest.warns(UserWarning, match="already initialized"):  # as MXNet: fit's init_params
        train(resumed, 2, 4)
    for k, v in straight.get_params()[0].items():
        np.testing.assert_allclose(resumed.get_params()[0][k], v, rtol=1e-6, atol=1e-7,
                                   err_msg=k)


def test_fit_with_speedometer_and_validation_metric(caplog):
    x, y = _separable(60, 4)
    mod = Module(_classifier())
    ends = []
    with caplog.at_level(logging.INFO):
        mod.fit(NDArrayIter(x, y, batch_size=20), eval_data=NDArrayIter(x, y, batch_size=20),
                num_epoch=1, validation_metric="ce",
                batch_end_callback=rm.callback.Speedometer(20, frequent=1),
                eval_end_callback=ends.append)
    assert "Validation-cross-entropy=" in caplog.text
    assert ends[0].nbatch == 3

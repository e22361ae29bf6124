"""rm.callback: MXNet's log lines and checkpoint calls, plus TqdmProgress and MetricsLogger."""
import io
import json
import logging
import sys
import types

import numpy as np
import pytest

import raymod.callback as callback
import raymod.metric as metric


class FakeClock:
    """Stands in for the ``time`` module inside raymod.callback."""

    def __init__(self):
        self.now = 1000.0

    def time(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(callback, "time", fake)
    return fake


def accuracy_half():
    acc = metric.Accuracy()
    acc.update(np.array([0.0, 1.0]), np.array([[0.9, 0.1], [0.8, 0.2]]))
    return acc


def param(epoch, nbatch, eval_metric=None):
    return callback.BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric, locals=None)


def messages(caplog):
    return [r.getMessage() for r in caplog.records]


def test_batch_end_param_fields():
    p = param(1, 2)
    assert (p.epoch, p.nbatch, p.eval_metric, p.locals) == (1, 2, None, None)


def test_speedometer_logs_mxnet_lines(caplog, clock):
    caplog.set_level(logging.INFO)
    acc = accuracy_half()
    speed = callback.Speedometer(batch_size=10, frequent=2)
    for nbatch in range(5):
        speed(param(0, nbatch, acc))
        clock.now += 0.25
    # batch 0 starts the clock; batches 2 and 4 log 2 batches x 10 samples / 0.5 s
    assert messages(caplog) == ["Epoch[0] Batch [0-2]\tSpeed: 40.00 samples/sec\taccuracy=0.500000",
                                "Epoch[0] Batch [2-4]\tSpeed: 40.00 samples/sec\taccuracy=nan"]
    assert acc.num_inst == 0 and acc.global_num_inst == 2  # auto_reset clears local stats only


def test_speedometer_without_reset_and_without_metric(caplog, clock):
    caplog.set_level(logging.INFO)
    acc = accuracy_half()
    keep = callback.Speedometer(batch_size=4, frequent=1, auto_reset=False)
    keep(param(3, 0, acc))
    clock.now += 2.0
    keep(param(3, 1, acc))
    bare = callback.Speedometer(batch_size=4, frequent=1)
    bare(param(0, 0))
    clock.now += 1.0
    bare(param(0, 1))
    assert messages(caplog) == ["Epoch[3] Batch [0-1]\tSpeed: 2.00 samples/sec\taccuracy=0.500000",
                                "Iter[0] Batch [1]\tSpeed: 4.00 samples/sec"]
    assert acc.num_inst == 2


def test_speedometer_restarts_each_epoch(caplog, clock):
    caplog.set_level(logging.INFO)
    speed = callback.Speedometer(batch_size=1, frequent=1)
    speed(param(0, 0))
    speed(param(0, 1))
    speed(param(1, 0))  # batch index went back: only restarts the clock
    assert len(caplog.records) == 1


def test_speedometer_composite_metric(caplog, clock):
    caplog.set_level(logging.INFO)
    comp = metric.create(["acc", "mse"])
    comp.update(np.array([1.0, 1.0]), np.array([[0.1, 0.9], [0.2, 0.8]]))
    speed = callback.Speedometer(batch_size=2, frequent=1)
    speed(param(0, 0, comp))
    clock.now += 1.0
    speed(param(0, 1, comp))
    assert messages(caplog)[0].endswith("\taccuracy=1.000000\tmse=0.375000")


def test_log_train_metric(caplog):
    caplog.set_level(logging.INFO)
    acc = accuracy_half()
    cb = callback.log_train_metric(period=2, auto_reset=True)
    cb(param(0, 1, acc))
    cb(param(0, 2, acc))
    assert messages(caplog) == ["Iter[0] Batch[2] Train-accuracy=0.500000"]
    assert acc.num_inst == 0


def test_progress_bar(caplog):
    caplog.set_level(logging.INFO)
    callback.ProgressBar(total=4, length=8)(param(0, 1))
    assert messages(caplog) == ["[==------] 25%\r"]


def test_log_validation_metrics(caplog):
    caplog.set_level(logging.INFO)
    callback.LogValidationMetricsCallback()(param(2, 0, accuracy_half()))
    assert messages(caplog) == ["Epoch[2] Validation-accuracy=0.500000"]


def test_do_checkpoint_calls_save_checkpoint_every_period(monkeypatch):
    calls = []
    fake = types.ModuleType("raymod.checkpoint")
    fake.save_checkpoint = lambda *args: calls.append(args)
    monkeypatch.setitem(sys.modules, "raymod.checkpoint", fake)
    cb = callback.do_checkpoint("run/model", period=2)
    for epoch in range(5):
        cb(epoch, "sym", {"w": 1}, {"a": 2})
    assert calls == [("run/model", 2, "sym", {"w": 1}, {"a": 2}),
                     ("run/model", 4, "sym", {"w": 1}, {"a": 2})]


def test_module_checkpoint_calls_module():
    class FakeModule:
        def __init__(self):
            self.calls = []

        def save_checkpoint(self, prefix, epoch, save_optimizer_states=False):
            self.calls.append((prefix, epoch, save_optimizer_states))

    mod = FakeModule()
    cb = callback.module_checkpoint(mod, "ck", period=0, save_optimizer_states=True)
    cb(0)
    cb(1, "sym", {}, {})
    assert mod.calls == [("ck", 1, True), ("ck", 2, True)]


def test_metrics_logger_writes_json_lines(tmp_path, clock):
    path = tmp_path / "logs" / "metrics.jsonl"
    acc = accuracy_half()
    with callback.MetricsLogger(path, frequent=2) as log:
        log(param(0, 0, acc))
        log(param(0, 1, acc))  # skipped by frequent=2
        acc.reset_local()
        log(param(0, 2, acc))
        log(param(0, 3))
        log(0, "sym", {}, {})  # as an epoch-end callback
        log.log_epoch(0, [("accuracy", np.float32(0.75)), ("time", 3)], split="val", n=np.int64(4))
        log.log_epoch(1, {"mse": 0.5})
        assert path.read_text().count("\n") == 5  # flushed on each write
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == {"event": "batch", "epoch": 0, "nbatch": 0, "time": 1000.0, "accuracy": 0.5}
    assert lines[1]["accuracy"] is None  # NaN is written as null (strict JSON)
    assert lines[2] == {"event": "epoch", "epoch": 0, "time": 1000.0}
    assert lines[3] == {"event": "epoch", "epoch": 0, "time": 1000.0, "accuracy": 0.75,
                        "metric_time": 3, "split": "val", "n": 4}
    assert lines[4]["mse"] == 0.5
    assert len(lines) == 5


def test_tqdm_progress_updates_and_reopens_per_epoch():
    out = io.StringIO()
    acc = accuracy_half()
    bar = callback.TqdmProgress(file=out, mininterval=0)
    for nbatch in range(3):
        bar(param(0, nbatch, acc))
    first = bar.bar
    assert first.n == 3 and first.total is None
    assert "accuracy" in first.postfix and "0.5000" in first.postfix
    bar(param(1, 0, acc))
    assert bar.bar is not first and bar.bar.total == 3  # learnt from the first epoch
    assert bar.bar.desc.startswith("Epoch 1")
    bar(1, None, {}, {})  # as an epoch-end callback: closes the bar
    assert bar.bar is None
    bar(param(2, 0))  # no metric: still counts
    assert bar.bar.n == 1
    bar.close()
    assert "Epoch 0" in out.getvalue()


def test_speedometer_clocks_steps_by_their_completion_times(caplog):
    """Callbacks called all at once (as on Ray workers running ahead) but carrying when each
    step completed: the speed is that of the steps, not of the calls."""
    acc = metric.create("acc")
    speedometer = callback.Speedometer(batch_size=10, frequent=2)
    with caplog.at_level(logging.INFO):
        for nbatch in range(7):  # step n completed at 100 + 0.25 n seconds
            speedometer(callback.BatchEndParam(epoch=0, nbatch=nbatch, eval_metric=acc,
                                                  locals=None, completed_at=100 + 0.25 * nbatch))
    speeds = [float(r.getMessage().split("Speed: ")[1].split(" ")[0]) for r in caplog.records
              if "Speed:" in r.getMessage()]
    # 2 batches of 10 samples per 0.5 s (the first call of an epoch starts the clock)
    assert speeds == [40.0, 40.0, 40.0]

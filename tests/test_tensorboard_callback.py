"""rm.callback.TensorBoard: an event file read back with TensorBoard's own reader holds the
per-epoch training and validation metrics that fit logs."""
import logging

import numpy as np
import pytest

import raymod as rm

pytest.importorskip("tensorboardX")
event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")


def test_fit_writes_per_epoch_metrics(tmp_path, caplog):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 8)).astype(np.float32)
    y = x[:, :4].argmax(axis=1).astype(np.float32)
    net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=4),
                               name="softmax")
    train = rm.io.NDArrayIter(x[:160], y[:160], batch_size=20)
    val = rm.io.NDArrayIter(x[160:], y[160:], batch_size=20)
    mod = rm.mod.Module(net)
    tb = rm.callback.TensorBoard(tmp_path / "tb", frequent=2)
    with caplog.at_level(logging.INFO):
        mod.fit(train, eval_data=val, num_epoch=3, eval_metric="acc",
                optimizer_params={"learning_rate": 0.5}, batch_end_callback=tb,
                epoch_end_callback=tb, eval_end_callback=tb)
    tb.close()
    logged = {}  # ("Train" | "Validation", epoch) -> accuracy, from fit's own log lines
    for record in caplog.records:
        msg = record.getMessage()
        if msg.startswith("Epoch[") and "-accuracy=" in msg:
            epoch = int(msg[6:msg.index("]")])
            split = msg[msg.index("]") + 2:msg.index("-accuracy")]
            logged[split, epoch] = float(msg.split("=")[1])
    reader = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
    reader.Reload()
    tags = reader.Tags()["scalars"]
    assert {"train/accuracy", "val/accuracy", "train_batch/accuracy"} <= set(tags)
    for tag, split in (("train/accuracy", "Train"), ("val/accuracy", "Validation")):
        events = reader.Scalars(tag)
        assert [e.step for e in events] == [0, 1, 2]
        np.testing.assert_allclose([e.value for e in events],
                                   [logged[split, k] for k in range(3)], rtol=1e-6)
    assert [e.step for e in reader.Scalars("train_batch/accuracy")] == list(range(1, 25, 2))


def test_fit_writes_learning_rate_loss_and_speed(tmp_path):
    """Per ``frequent`` batches and per epoch: the learning rate the schedule gives at that
    update, the cross-entropy again as ``loss``, samples/s and step time."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((160, 8)).astype(np.float32)
    y = x[:, :4].argmax(axis=1).astype(np.float32)
    net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=4),
                               name="softmax")
    tb = rm.callback.TensorBoard(tmp_path / "tb", frequent=2)
    rm.mod.Module(net).fit(
        rm.io.NDArrayIter(x, y, batch_size=20), num_epoch=2, eval_metric=["acc", "ce"],
        optimizer_params={"learning_rate": 0.5,
                          "lr_scheduler": rm.lr_scheduler.FactorScheduler(3, 0.5, base_lr=0.5)},
        batch_end_callback=tb, epoch_end_callback=tb)
    tb.close()
    reader = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
    reader.Reload()

    def scalars(tag):
        return {e.step: e.value for e in reader.Scalars(tag)}
    # FactorScheduler(step=3, factor=0.5): updates 1-3 at 0.5, 4-6 at 0.25, 7-9 at 0.125...
    want_lr = {n: 0.5 * 0.5 ** ((n - 1) // 3) for n in range(1, 17, 2)}
    got_lr = scalars("train_batch/learning_rate")
    assert sorted(got_lr) == sorted(want_lr)
    np.testing.assert_allclose([got_lr[n] for n in sorted(want_lr)],
                               [want_lr[n] for n in sorted(want_lr)], rtol=1e-6)
    assert scalars("train_batch/loss") == scalars("train_batch/cross-entropy")
    assert scalars("train/loss") == scalars("train/cross-entropy")
    assert sorted(scalars("train/learning_rate")) == [0, 1]
    for prefix, steps in (("train_batch", list(range(3, 17, 2))), ("train", [0, 1])):
        speed, step_time = scalars(f"{prefix}/samples_per_s"), scalars(f"{prefix}/step_time_s")
        assert sorted(speed) == sorted(step_time) == steps
        for k in steps:  # 20 samples a step: samples/s and step time describe the same span
            assert speed[k] > 0 and step_time[k] > 0
            assert speed[k] * step_time[k] == pytest.approx(20, rel=1e-4)


def test_fit_writes_hparams_and_validation_loss(tmp_path):
    """TensorBoard's HPARAMS tab: the module's optimizer, batch and workers and the given
    hparams as one session of the event file, judged by the epoch scalars (``val/loss``:
    the validation cross-entropy again)."""
    plugin_data = pytest.importorskip("tensorboard.plugins.hparams.plugin_data_pb2")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((160, 8)).astype(np.float32)
    y = x[:, :4].argmax(axis=1).astype(np.float32)
    net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=4),
                               name="softmax")
    tb = rm.callback.TensorBoard(tmp_path / "tb", hparams={"num_epoch": 2, "seed": 7,
                                                           "note": None})
    rm.mod.Module(net).fit(
        rm.io.NDArrayIter(x[:120], y[:120], batch_size=20), num_epoch=2,
        eval_data=rm.io.NDArrayIter(x[120:], y[120:], batch_size=20), eval_metric=["acc", "ce"],
        optimizer_params={"learning_rate": 0.5, "momentum": 0.9}, batch_end_callback=tb,
        epoch_end_callback=tb, eval_end_callback=tb)
    tb.close()
    reader = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
    reader.Reload()
    content = {tag: plugin_data.HParamsPluginData.FromString(data)
               for tag, data in reader.PluginTagToContent("hparams").items()}
    assert set(content) == {"_hparams_/experiment", "_hparams_/session_start_info",
                            "_hparams_/session_end_info"}
    start = content["_hparams_/session_start_info"].session_start_info.hparams
    numbers = {k: v.number_value for k, v in start.items() if v.HasField("number_value")}
    texts = {k: v.string_value for k, v in start.items() if v.HasField("string_value")}
    assert numbers["optimizer.learning_rate"] == 0.5 and numbers["optimizer.momentum"] == 0.9
    assert numbers["batch_size"] == 20 and numbers["num_epoch"] == 2 and numbers["seed"] == 7
    assert texts["optimizer"] == "sgd" and texts["module"] == "Module" and texts["workers"] == "0"
    assert "note" not in start  # None: left out
    experiment = content["_hparams_/experiment"].experiment
    assert {m.name.tag for m in experiment.metric_infos} >= {
        "train/accuracy", "val/accuracy", "train/loss", "val/loss", "train/samples_per_s"}
    assert {h.name for h in experiment.hparam_infos} == set(start)
    end = content["_hparams_/session_end_info"].session_end_info
    api = pytest.importorskip("tensorboard.plugins.hparams.api_pb2")
    assert end.status == api.Status.Value("STATUS_SUCCESS")  # written by close()

    def scalars(tag):
        return [(e.step, e.value) for e in reader.Scalars(tag)]
    assert scalars("val/loss") == scalars("val/cross-entropy") and len(scalars("val/loss")) == 2

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

"""``rm.callback.EarlyStopping`` stops ``fit`` at an epoch's end (in process and on workers)
and the result says why; an exception out of ``fit`` carries the result so far."""
import math

import pytest

import raymod as rm
from raymod.callback import EarlyStopping

from small_fit import iters, net, scripted


def records(values, key="val_loss"):
    return [{"epoch": e, key: v} for e, v in enumerate(values)]


def decisions(stopper, values, key="val_loss"):
    return [stopper.on_epoch_record(r) for r in records(values, key)]


# ---- the rule -------------------------------------------------------------------------------
def test_patience_counts_epochs_without_improvement():
    stop = EarlyStopping("val_loss", patience=2)
    assert stop.mode == "min"  # a loss: lower is better
    said = decisions(stop, [1.0, 0.8, 0.9, 0.7, 0.75, 0.71])
    assert said[:5] == [None] * 5 and said[5].startswith("EarlyStopping: val_loss did not "
                                                         "improve on 0.7 (epoch 3) for 2 epochs")
    assert (stop.best, stop.best_epoch, stop.stopped_epoch) == (0.7, 3, 5)


def test_min_delta_mode_inference_and_zero_patience():
    stop = EarlyStopping("val_accuracy", patience=1, min_delta=0.01)
    assert stop.mode == "max"
    said = decisions(stop, [0.5, 0.505, 0.6], "val_accuracy")
    assert said[0] is None and "by more than 0.01" in said[1]
    assert EarlyStopping("val_accuracy", patience=0, mode="min").mode == "min"
    assert decisions(EarlyStopping("val_loss", patience=0), [1.0, 1.0])[1] is not None


def test_a_nan_stops_at_once():
    said = decisions(EarlyStopping("val_loss", patience=5), [1.0, math.nan])
    assert said[0] is None and "val_loss is nan at epoch 1" in said[1]


@pytest.mark.parametrize("kwargs, message", [
    ({"monitor": ""}, "monitor"), ({"monitor": "val_loss", "patience": -1}, "patience"),
    ({"monitor": "val_loss", "patience": 1.5}, "patience"),
    ({"monitor": "val_loss", "min_delta": -0.1}, "min_delta"),
    ({"monitor": "val_loss", "mode": "lower"}, "mode"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EarlyStopping(**kwargs)


# ---- in fit ---------------------------------------------------------------------------------
def test_fit_stops_at_the_epoch_end_and_says_why(tmp_path):
    train, val = iters()
    metric, note_epoch = scripted([0.5, 0.6, 0.55, 0.58, 0.9, 0.95, 0.99, 1.0])
    stop = EarlyStopping("val_score", patience=2)
    mod = rm.mod.Module(net())
    root = tmp_path / "ck"
    result = mod.fit(train, eval_data=val, validation_metric=metric, num_epoch=8,
                     epoch_end_callback=[note_epoch, stop],
                     checkpoint=rm.CheckpointConfig(str(root), keep=8))
    assert [r["epoch"] for r in result.epochs] == [0, 1, 2, 3]
    assert result.stop_reason.startswith("EarlyStopping: val_score did not improve on 0.6 "
                                         "(epoch 1) for 2 epochs")
    assert stop.stopped_epoch == 3 and result.error is None
    assert mod.score(val, "acc")[0][0] == "accuracy"  # the module is as after any fit
    # the stopped epoch's checkpoint records why; reopened and resumed, the run stays stopped
    assert rm.mod.FitResult.from_path(str(root)).stop_reason == result.stop_reason
    metric, note_epoch = scripted([0.5, 0.6, 0.55, 0.58, 0.9, 0.95, 0.99, 1.0])
    again = rm.mod.Module(net()).fit(
        train, eval_data=val, validation_metric=metric, num_epoch=8, resume=True,
        epoch_end_callback=[note_epoch, stop], checkpoint=rm.CheckpointConfig(str(root)))
    assert again.epochs == [] and again.stop_reason == result.stop_reason


def test_an_unknown_monitor_fails_before_anything_starts():
    train, val = iters()
    mod = rm.mod.Module(net())
    with pytest.raises(ValueError, match="monitor='val_acc'.*val_accuracy"):
        mod.fit(train, eval_data=val, num_epoch=2,
                epoch_end_callback=EarlyStopping("val_acc"))
    assert not mod.binded


def test_a_callback_that_raises_hands_back_the_result_so_far(tmp_path):
    train, val = iters()

    def boom(param):
        if param.epoch == 2 and param.nbatch == 1:
            raise RuntimeError("enough")
    with pytest.raises(RuntimeError, match="enough") as caught:
        rm.mod.Module(net()).fit(train, eval_data=val, num_epoch=5, batch_end_callback=boom,
                                  checkpoint=rm.CheckpointConfig(str(tmp_path / "ck")))
    result = caught.value.fit_result
    assert [r["epoch"] for r in result.epochs] == [0, 1] and result.error is caught.value
    assert result.last_checkpoint == str(tmp_path / "ck" / "step-0000000008")


# ---- on Ray workers -------------------------------------------------------------------------
@pytest.mark.ray
def test_on_workers(ray_cluster, close_modules):
    train, val = iters()
    mod = rm.mod.Module(net(), workers=2)
    close_modules(mod)
    # nothing beats the first epoch by 10: the second epoch stops it
    stop = EarlyStopping("train_accuracy", patience=1, min_delta=10.0)
    result = mod.fit(train, eval_data=val, num_epoch=5, kvstore="dist_sync",
                     epoch_end_callback=stop)
    assert [r["epoch"] for r in result.epochs] == [0, 1]
    assert "train_accuracy did not improve by more than 10" in result.stop_reason
    assert [e["event"] for e in result.events].count("join") == 2
    assert 0 <= mod.score(val, "acc")[0][1] <= 1  # the workers are as after any fit

    def boom(param):
        if param.epoch == 1 and param.nbatch == 2:
            raise RuntimeError("stop here")
    with pytest.raises(RuntimeError, match="stop here") as caught:
        mod.fit(train, eval_data=val, num_epoch=5, kvstore="dist_sync", force_init=True,
                batch_end_callback=boom)
    assert [r["epoch"] for r in caught.value.fit_result.epochs] == [0]

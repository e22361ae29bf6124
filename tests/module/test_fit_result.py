"""``fit`` returns a FitResult: the epochs' metrics as records and a pyarrow Table, the last
and best checkpoints, and (on workers) the membership events."""
import pytest

import raymod as rm

from small_fit import iters, net


def test_in_process_records_table_and_checkpoints(tmp_path):
    train, val = iters()
    rm.random.seed(1)
    mod = rm.mod.Module(net())
    result = mod.fit(train, eval_data=val, num_epoch=4, optimizer_params={"learning_rate": 0.3},
                     checkpoint=rm.CheckpointConfig(str(tmp_path / "ck"), keep=2))
    assert isinstance(result, rm.mod.FitResult) and len(result.epochs) == 4
    assert [r["epoch"] for r in result.epochs] == [0, 1, 2, 3]
    for record in result.epochs:
        assert record["steps"] == 4 and record["samples"] == 160
        assert record["samples_per_s"] == pytest.approx(160 / record["seconds"])
        assert 0 <= record["train_accuracy"] <= 1 and 0 <= record["val_accuracy"] <= 1
    # the last record's validation value is what score gives for the final parameters
    assert result.metrics["val_accuracy"] == pytest.approx(mod.score(val, "acc")[0][1])
    table = result.table()
    assert table.num_rows == 4 and table.column("val_accuracy").to_pylist() == \
        [r["val_accuracy"] for r in result.epochs]
    # keep=2: the first two epochs' checkpoints are gone, the last is the newest folder
    kept = [r["checkpoint"] for r in result.epochs]
    assert kept[:2] == [None, None] and all(kept[2:])
    assert result.last_checkpoint == kept[3]
    best = max(result.epochs[2:], key=lambda r: r["val_accuracy"])
    assert result.best_checkpoint == best["checkpoint"]
    assert result.events == [] and result.error is None


def test_without_checkpoints_or_validation(tmp_path):
    train, _ = iters()
    result = rm.mod.Module(net()).fit(train, num_epoch=1)
    assert result.last_checkpoint is None and result.best_checkpoint is None
    assert set(result.epochs[0]) >= {"train_accuracy", "seconds", "samples_per_s"}
    assert not any(k.startswith("val_") for k in result.epochs[0])


def test_a_loss_metric_picks_the_lowest_validation_value():
    result = rm.mod.FitResult(epochs=[
        {"epoch": 0, "val_cross-entropy": 0.9, "checkpoint": "a"},
        {"epoch": 1, "val_cross-entropy": 0.4, "checkpoint": "b"},
        {"epoch": 2, "val_cross-entropy": 0.6, "checkpoint": "c"}])
    result.choose_best(higher_is_better=False)
    assert result.best_checkpoint == "b"
    result.choose_best(higher_is_better=True)
    assert result.best_checkpoint == "a"


@pytest.mark.ray
def test_on_workers_the_result_holds_the_membership_events(ray_cluster, close_modules):
    train, val = iters()
    mod = rm.mod.Module(net(), workers=2)
    close_modules(mod)
    result = mod.fit(train, eval_data=val, num_epoch=2, kvstore="dist_sync")
    assert len(result.epochs) == 2 and "val_accuracy" in result.metrics
    assert [e["event"] for e in result.events].count("join") == 2
    assert result.table().num_rows == 2

"""``CheckpointConfig(keep=N, score=..., mode=...)``: the N best-scored epoch checkpoints plus
the newest are kept, and ``FitResult.best_checkpoint`` is always one of them."""
import os

import pyarrow.fs as pafs
import pytest

import raymod as rm
from raymod.module.fit_checkpoint import scan_steps

from small_fit import iters, net, scripted


def fit_scripted(root, scores, num_epoch, resume=False, **config):
    train, val = iters()
    metric, note_epoch = scripted(scores)
    rm.random.seed(3)
    mod = rm.mod.Module(net())
    result = mod.fit(train, eval_data=val, validation_metric=metric, num_epoch=num_epoch,
                     epoch_end_callback=note_epoch, optimizer_params={"learning_rate": 0.1},
                     checkpoint=rm.CheckpointConfig(str(root), **config), resume=resume)
    return mod, result


def step(root, n):
    return str(root / f"step-{n:010d}")


def test_keeps_the_best_n_and_the_newest(tmp_path):
    root = tmp_path / "ck"
    _, result = fit_scripted(root, [0.3, 0.9, 0.5, 0.8, 0.1], 5, keep=2, score="val_score")
    # epoch e ends at step 4 (e + 1): the best two are epochs 1 and 3, the newest is 4
    kept = [step(root, 8), step(root, 16), step(root, 20)]
    assert sorted(str(p) for p in root.iterdir()) == kept
    assert [f for f, _ in result.checkpoints] == kept
    assert [m["val_score"] for _, m in result.checkpoints] == pytest.approx([0.9, 0.8, 0.1])
    assert [r["checkpoint"] for r in result.epochs] == [None, kept[0], None, kept[1], kept[2]]
    assert result.best_checkpoint == kept[0] and result.last_checkpoint == kept[2]
    assert result.get_best_checkpoint("val_score", "min") == kept[2]
    assert result.best_checkpoints == result.checkpoints  # Ray's name


def test_min_mode_and_mid_epoch_saves(tmp_path):
    root = tmp_path / "ck"
    # every_n_steps=2 also saves mid-epoch: those carry no score and go once not the newest
    _, result = fit_scripted(root, [0.3, 0.9, 0.5, 0.8, 0.4], 5, keep=1, score="val_score",
                             mode="min", every_n_steps=2)
    assert sorted(str(p) for p in root.iterdir()) == [step(root, 4), step(root, 20)]
    assert result.best_checkpoint == step(root, 4)
    assert result.checkpoints[0][1]["val_score"] == pytest.approx(0.3)


def test_without_score_the_newest_n_are_kept_as_before(tmp_path):
    root = tmp_path / "ck"
    _, result = fit_scripted(root, [0.3, 0.9, 0.5, 0.8, 0.1], 5, keep=2)
    assert sorted(str(p) for p in root.iterdir()) == [step(root, 16), step(root, 20)]
    # the best of the kept ones, never the pruned epoch 1
    assert result.best_checkpoint == step(root, 16)


def test_a_resumed_run_keeps_the_best_of_the_earlier_part(tmp_path):
    root = tmp_path / "ck"
    scores = [0.3, 0.9, 0.5, 0.8, 0.1, 0.2]
    fit_scripted(root, scores, 3, keep=1, score="val_score")
    _, result = fit_scripted(root, scores, 6, resume=True, keep=1, score="val_score")
    assert [r["epoch"] for r in result.epochs] == [3, 4, 5]  # this fit's epochs
    assert result.best_checkpoint == step(root, 8)  # epoch 1, before the resume
    assert sorted(str(p) for p in root.iterdir()) == [step(root, 8), step(root, 24)]
    reopened = rm.mod.FitResult.from_path(str(root))
    assert [r["epoch"] for r in reopened.epochs] == list(range(6))
    assert [r["val_score"] for r in reopened.epochs] == pytest.approx(scores)
    assert reopened.best_checkpoint == step(root, 8)


@pytest.mark.parametrize("config, message", [
    ({"score": "val_acc"}, "score='val_acc'.*no such key.*val_accuracy"),
    ({"score": "val_accuracy", "mode": "best"}, "mode.*'min', 'max'"),
    ({"mode": "min"}, "needs score="),
    ({"score": ""}, "score=.*record key"),
    ({"score": "val_accuracy", "every_n_epochs": None}, "needs epoch-end checkpoints"),
])
def test_bad_score_settings_fail_before_anything_starts(tmp_path, config, message):
    train, val = iters()
    mod = rm.mod.Module(net())
    with pytest.raises(ValueError, match=message):
        mod.fit(train, eval_data=val, num_epoch=1,
                checkpoint=rm.CheckpointConfig(str(tmp_path / "ck"), **config))
    assert not mod.binded and not (tmp_path / "ck").exists()


def test_a_score_on_validation_needs_eval_data(tmp_path):
    train, _ = iters()
    with pytest.raises(ValueError, match="val_accuracy.*they have.*train_accuracy"):
        rm.mod.Module(net()).fit(train, num_epoch=1, checkpoint=rm.CheckpointConfig(
            str(tmp_path / "ck"), score="val_accuracy"))


def test_manifests_hold_the_epoch_records(tmp_path):
    root = tmp_path / "ck"
    fit_scripted(root, [0.3, 0.9], 2, keep=5, score="val_score")
    found = scan_steps(pafs.LocalFileSystem(), str(root))
    assert [found.metrics[f]["epoch"] for f in found.folders] == [0, 1]
    assert all("checkpoint" not in m and m["steps"] == 4 for m in found.metrics.values())


@pytest.mark.ray
def test_on_workers_the_best_is_never_pruned(ray_cluster, close_modules, tmp_path):
    train, val = iters()
    root = tmp_path / "ck"
    mod = rm.mod.Module(net(), workers=2)
    close_modules(mod)
    # mode='min' on accuracy: the best is usually an early epoch, which keep=1 must hold on to
    result = mod.fit(train, eval_data=val, num_epoch=4, kvstore="dist_sync",
                     optimizer_params={"learning_rate": 0.3},
                     checkpoint=rm.CheckpointConfig(str(root), keep=1, score="val_accuracy",
                                                    mode="min"))
    values = [r["val_accuracy"] for r in result.epochs]
    best_epoch = values.index(min(values))  # the older of equal values
    best = step(root, 4 * (best_epoch + 1))
    assert result.best_checkpoint == best and os.path.isdir(best)
    assert sorted(str(p) for p in root.iterdir()) == sorted({best, step(root, 16)})
    assert rm.mod.FitResult.from_path(str(root)).best_checkpoint == best

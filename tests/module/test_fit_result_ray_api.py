"""What Ray Train's ``Result`` gives, on ``FitResult``: ``metrics_dataframe``,
``FitResult.from_path`` (a finished or a killed run) and ``get_best_checkpoint``."""
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

import raymod as rm
from raymod.module.fit_checkpoint import CheckpointError, CheckpointLocationError

from small_fit import iters, net

ROOT = Path(rm.__file__).resolve().parents[1]  # the checkout: `import raymod` from there


def _same(reopened, result):
    keys = ["epoch", "train_accuracy", "val_accuracy", "steps", "samples", "checkpoint"]
    assert [[r[k] for k in keys] for r in reopened.epochs] == \
        [[r[k] for k in keys] for r in result.epochs]
    assert reopened.last_checkpoint == result.last_checkpoint
    assert reopened.best_checkpoint == result.best_checkpoint
    assert [f for f, _ in reopened.checkpoints] == [f for f, _ in result.checkpoints]


def test_metrics_dataframe_from_path_and_best_by_metric(tmp_path):
    pd = pytest.importorskip("pandas")
    train, val = iters()
    root = str(tmp_path / "ck")
    result = rm.mod.Module(net()).fit(train, eval_data=val, num_epoch=3,
                                       optimizer_params={"learning_rate": 0.3},
                                       checkpoint=rm.CheckpointConfig(root, keep=2))
    frame = result.metrics_dataframe
    assert isinstance(frame, pd.DataFrame) and list(frame["epoch"]) == [0, 1, 2]
    assert list(frame["val_accuracy"]) == [r["val_accuracy"] for r in result.epochs]
    _same(rm.mod.FitResult.from_path(root), result)
    assert rm.mod.FitResult.from_path("file://" + root).last_checkpoint == \
        result.last_checkpoint
    # by another metric and order, among the kept checkpoints only (epochs 1 and 2)
    kept = {r["epoch"]: r for r in result.epochs if r["checkpoint"]}
    fastest = max(kept.values(), key=lambda r: r["samples_per_s"])
    assert result.get_best_checkpoint("samples_per_s", "max") == fastest["checkpoint"]
    lowest = min(kept.values(), key=lambda r: r["train_accuracy"])
    assert result.get_best_checkpoint("train_accuracy", "min") == lowest["checkpoint"]
    with pytest.raises(ValueError, match="metric='val_acc'.*val_accuracy"):
        result.get_best_checkpoint("val_acc")
    with pytest.raises(ValueError, match="mode"):
        result.get_best_checkpoint("val_accuracy", "highest")


def test_metrics_dataframe_without_pandas_is_the_arrow_table(monkeypatch):
    result = rm.mod.FitResult(epochs=[{"epoch": 0, "val_loss": 0.5}])
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas -> ImportError
    table = result.metrics_dataframe
    assert isinstance(table, pa.Table) and table.column("val_loss").to_pylist() == [0.5]


def test_from_path_reopens_a_killed_run(tmp_path):
    """A process killed during its third epoch: the reopened result holds the two epochs its
    newest checkpoint recorded."""
    root = tmp_path / "ck"
    script = textwrap.dedent(f"""
        import os, signal
        import numpy as np
        import raymod as rm
        data = rm.sym.Variable("data")
        net = rm.sym.SoftmaxOutput(rm.sym.FullyConnected(data, num_hidden=3, name="fc"),
                                   name="softmax")
        rng = np.random.default_rng(0)
        x = rng.standard_normal((160, 6)).astype(np.float32)
        y = x[:, :3].argmax(axis=1).astype(np.float32)
        def kill(param):
            if param.epoch == 2 and param.nbatch == 1:
                os.kill(os.getpid(), signal.SIGKILL)
        rm.mod.Module(net).fit(rm.io.NDArrayIter(x, y, batch_size=40),
                               eval_data=rm.io.NDArrayIter(x, y, batch_size=40), num_epoch=5,
                               batch_end_callback=kill,
                               checkpoint=rm.CheckpointConfig({str(root)!r}, every_n_steps=3))
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr[-2000:]
    reopened = rm.mod.FitResult.from_path(str(root))
    # steps 3, 4 (epoch 0's end), 6, 8 (epoch 1's end), 9 (mid epoch 2): the newest three
    assert reopened.last_checkpoint == str(root / "step-0000000009")
    assert [r["epoch"] for r in reopened.epochs] == [0, 1]
    assert [r["checkpoint"] for r in reopened.epochs] == [None, str(root / "step-0000000008")]
    assert reopened.best_checkpoint == str(root / "step-0000000008")  # the only one scored
    assert reopened.stop_reason is None and reopened.events == []


def test_from_path_errors_are_one_line(tmp_path):
    with pytest.raises(CheckpointError, match="no complete checkpoint under"):
        rm.mod.FitResult.from_path(str(tmp_path))
    with pytest.raises(CheckpointLocationError, match="CheckpointConfig\\(path='bogus://x'\\)"):
        rm.mod.FitResult.from_path("bogus://x")


@pytest.mark.ray
def test_on_workers(ray_cluster, close_modules, tmp_path):
    train, val = iters()
    root = str(tmp_path / "ck")
    mod = rm.mod.Module(net(), workers=2)
    close_modules(mod)
    result = mod.fit(train, eval_data=val, num_epoch=2, kvstore="dist_sync",
                     checkpoint=rm.CheckpointConfig(root, keep=1, score="val_accuracy"))
    assert list(result.metrics_dataframe["epoch"]) == [0, 1]
    reopened = rm.mod.FitResult.from_path(root)
    _same(reopened, result)
    # the membership log of the newest checkpoint: the two workers' joins
    assert [e["event"] for e in reopened.events].count("join") == 2

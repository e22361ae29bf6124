"""``rm.tune.fit_trainable`` in the session's Ray cluster (2 trials of 2 epochs, one crashing
and resumed from its Tune checkpoint), its placement groups, and ``jobs/tune_digits.py``'s bad
flags."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

tune = pytest.importorskip("ray.tune", reason="the Tune helper needs raymod[tune]")

import raymod as rm  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
JOB = ROOT / "jobs" / "tune_digits.py"


def _data(config):
    rng = np.random.default_rng(7)
    x = rng.uniform(-1, 1, (240, 6)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.float32)
    batch = int(config["batch_size"])
    return (rm.io.NDArrayIter(x[:160], y[:160], batch, shuffle=False),
            rm.io.NDArrayIter(x[160:], y[160:], batch))


def _net():
    net = rm.sym.FullyConnected(rm.sym.Variable("data"), num_hidden=8, name="fc1")
    net = rm.sym.FullyConnected(rm.sym.Activation(net, act_type="tanh"), num_hidden=2,
                                name="fc2")
    return rm.sym.SoftmaxOutput(net, name="softmax")


def _module(config, workers):
    import ray

    # the trial's worker actors and KVServers land in the trial's placement group
    assert ray.get_runtime_context().should_capture_child_tasks_in_placement_group
    pg = ray.util.get_current_placement_group()
    assert pg is not None and [b for b in pg.bundle_specs if b.get("CPU")] == \
        [{"CPU": 1.0}] * config["workers"]
    rm.random.seed(3)
    return rm.mod.Module(_net(), workers=workers)


def _fit_kwargs(config):
    def crash_once(param):
        # the "crash" trial dies at the start of its second epoch, the first time only
        marker = Path(config["marker"])
        if config["crash"] and param.epoch == 1 and not marker.exists():
            marker.write_text("crashed")
            raise RuntimeError("planned crash")

    # plain SGD keeps no optimizer state, so a resumed trial retraces the uninterrupted one
    return {"optimizer": "sgd", "optimizer_params": {"learning_rate": config["lr"]},
            "initializer": rm.init.Xavier(), "batch_end_callback": crash_once}


def _hparams_in(folder):
    """The hyper-parameter and metric names a trial folder's TensorBoard event files
    declare for TensorBoard's hparams view."""
    accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator")
    from tensorboard.plugins.hparams import plugin_data_pb2
    reader = accumulator.EventAccumulator(str(folder))
    reader.Reload()
    names, metrics = set(), set()
    for content in reader.PluginTagToContent("hparams").values():
        data = plugin_data_pb2.HParamsPluginData.FromString(content)
        names |= set(data.session_start_info.hparams)
        metrics |= {m.name.tag for m in data.experiment.metric_infos}
    return names, metrics


@pytest.mark.ray
def test_two_trials_report_checkpoint_and_resume(ray_cluster, tmp_path):
    from ray import cloudpickle

    # this file is not importable on Ray's workers: ship its functions by value
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    trainable = rm.tune.fit_trainable(_module, _data, num_epoch=2, fit_kwargs=_fit_kwargs)
    tuner = tune.Tuner(
        trainable, param_space={"lr": 0.3, "batch_size": 20, "workers": 1,
                                "crash": tune.grid_search([False, True]),
                                "marker": str(tmp_path / "crashed")},
        tune_config=tune.TuneConfig(metric="val_accuracy", mode="max"),
        run_config=tune.RunConfig(name="t", storage_path=str(tmp_path), verbose=0,
                                  failure_config=tune.FailureConfig(max_failures=1)))
    results = tuner.fit()
    assert not results.errors, results.errors
    assert (tmp_path / "crashed").exists()
    params = {}
    for result in results:
        m = result.metrics
        assert m["epoch"] == 2 and m["workers"] == 1 and m["training_iteration"] == 2
        assert 0 <= m["train_accuracy"] <= 1
        # a restored trial's progress may start at its restore (Tune keeps what it flushed)
        epochs = list(result.metrics_dataframe["epoch"])
        assert epochs == [1, 2] if not result.config["crash"] else epochs[-1] == 2
        # the checkpoint holds the parameters the reported validation accuracy came from
        with result.checkpoint.as_directory() as folder:
            sym, arg, aux = rm.model.load_checkpoint(os.path.join(folder, "model"), 2)
        mod = rm.mod.Module(sym)
        _, val = _data(result.config)
        mod.bind(val.provide_data, val.provide_label, for_training=False)
        mod.set_params(arg, aux)
        assert abs(dict(mod.score(val, "acc"))["accuracy"] - m["val_accuracy"]) < 1e-9
        params[result.config["crash"]] = arg
        # TensorBoard's hparams view (Tune's own TBX logger): the searched parameter, with
        # the metrics raymod reports
        hparams, metrics = _hparams_in(result.path)
        assert hparams == {"crash"}
        assert {"ray/tune/val_accuracy", "ray/tune/train_accuracy"} <= metrics, metrics
    # resumed from its epoch-1 checkpoint, the crashed trial ends where the other one does
    assert sorted(params) == [False, True]
    for name, value in params[False].items():
        np.testing.assert_allclose(params[True][name], value, rtol=1e-5, atol=1e-6)


def test_trial_resources_cover_the_workers():
    pgf = rm.tune.trial_resources(3, cpus_per_worker=2)
    assert pgf.head_bundle_is_empty and pgf.bundles == [{"CPU": 2}] * 3
    assert rm.tune.trial_resources(0, driver_cpus=0.5).bundles == [{"CPU": 1.0}]
    with pytest.raises(ValueError, match="num_epoch must be an int >= 1, got 0"):
        rm.tune.fit_trainable(_module, _data, num_epoch=0)
    with pytest.raises(ValueError, match="cpus_per_worker must be >= 0"):
        rm.tune.fit_trainable(_module, _data, num_epoch=1, cpus_per_worker=-1)


@pytest.fixture
def job_module():
    sys.path.insert(0, str(JOB.parent))
    try:
        import tune_digits
        yield tune_digits
    finally:
        sys.path.remove(str(JOB.parent))


@pytest.mark.parametrize("args, flag", [
    (["--lr-range", "-0.1", "0.5"], "--lr-range"),
    (["--lr-range", "0.5", "0.1"], "--lr-range"),
    (["--workers", "2,-1"], "--workers"),
    (["--batch-sizes", "1", "--workers", "2"], "--batch-sizes"),
    (["--storage", "/proc/raymod-cannot-write-here"], "--storage"),  # before Ray or Tune
])
def test_job_bad_flags_are_one_line(job_module, args, flag, capsys):
    with pytest.raises(SystemExit) as exit_:
        job_module.parse_args(args)
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and flag in lines[0], lines


def test_job_without_trials_exits_with_one_line():
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    result = subprocess.run([sys.executable, str(JOB), "--trials", "0"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tune_digits.py: error:") and "--trials" in lines[0]

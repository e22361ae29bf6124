"""rm.callback.MLflowLogger: each fit recorded as an MLflow run in a real local store (MLflow's
file store under tmp_path), read back with MLflow's own client: parameters, per-batch and
per-epoch metric histories, membership, checkpoints as artifacts, the run's status; in
process, on Ray workers, and from the digits job's ``--mlflow``."""
import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import raymod as rm

from small_fit import iters, net

pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "jobs" / "train_digits.py"


@pytest.fixture(autouse=True)
def _file_store_allowed(monkeypatch):
    """MLflow 3.x refuses its file store unless this is set (the logger sets it for a local
    folder when unset); set here so that the reading client works and nothing leaks."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)


def history(client, run_id, key):
    """{step: value} of a metric."""
    return {m.step: m.value for m in client.get_metric_history(run_id, key)}


def artifact_files(client, run_id, path=None):
    """Every artifact file under ``path``, recursively."""
    for item in client.list_artifacts(run_id, path):
        if item.is_dir:
            yield from artifact_files(client, run_id, item.path)
        else:
            yield item.path


def check_checkpoints(client, run_id, result, tmp_path):
    """Every kept epoch checkpoint is an artifact folder holding the same files, the last one
    byte for byte, and ``checkpoint.last`` names it."""
    run = client.get_run(run_id)
    last = result.last_checkpoint
    assert run.data.tags["checkpoint.last"] == last
    logged = set(artifact_files(client, run_id, "checkpoints"))
    for record in result.epochs:
        folder = Path(record["checkpoint"])
        want = {f"checkpoints/{folder.name}/{f.name}" for f in folder.iterdir()}
        assert want <= logged and len(want) >= 3, folder
    copy = Path(client.download_artifacts(run_id, f"checkpoints/{Path(last).name}",
                                          str(tmp_path / "download")))
    for local in Path(last).iterdir():
        assert (copy / local.name).read_bytes() == local.read_bytes(), local.name


# ---- in process -----------------------------------------------------------------------------
def test_a_fit_in_process_is_one_run_with_params_metrics_and_checkpoints(tmp_path):
    train, val = iters()
    store = tmp_path / "mlruns"
    with rm.callback.MLflowLogger(store, experiment="digits-test", run_name="in-process",
                                  params={"num_epoch": 3}, tags={"team": "ml"}) as logger:
        assert logger.tracking_uri == store.as_uri()
        result = rm.mod.Module(net()).fit(
            train, eval_data=val, num_epoch=3, eval_metric=["acc", "ce"],
            optimizer="sgd", optimizer_params={"learning_rate": 0.2, "momentum": 0.9},
            batch_end_callback=logger, checkpoint=rm.CheckpointConfig(str(tmp_path / "ck")))
        run_id = logger.run_id
    client = MlflowClient(store.as_uri())
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "in-process"
    assert client.get_experiment(run.info.experiment_id).name == "digits-test"
    params = run.data.params
    assert {k: params[k] for k in ("module", "optimizer", "optimizer.learning_rate",
                                   "optimizer.momentum", "batch_size", "workers",
                                   "num_epoch")} == {
        "module": "Module", "optimizer": "sgd", "optimizer.learning_rate": "0.2",
        "optimizer.momentum": "0.9", "batch_size": "40", "workers": "0", "num_epoch": "3"}
    assert run.data.tags["team"] == "ml" and run.data.tags["raymod.version"] == rm.__version__
    # per epoch, step = epoch: the records fit returned, the loss again as *_loss
    for key in ("train_accuracy", "val_accuracy", "train_cross-entropy", "val_cross-entropy",
                "samples_per_s", "seconds"):
        got = history(client, run_id, key)
        assert sorted(got) == [0, 1, 2], key
        np.testing.assert_allclose([got[e] for e in range(3)],
                                   [r[key] for r in result.epochs], rtol=1e-9, err_msg=key)
    assert history(client, run_id, "val_loss") == history(client, run_id, "val_cross-entropy")
    assert history(client, run_id, "train_loss") == \
        history(client, run_id, "train_cross-entropy")
    assert set(history(client, run_id, "learning_rate").values()) == {0.2}
    # per batch, step = the global step: 4 steps an epoch
    batch = history(client, run_id, "batch/accuracy")
    assert sorted(batch) == list(range(1, 13))
    assert history(client, run_id, "batch/loss") == \
        history(client, run_id, "batch/cross-entropy")
    # the last batch of an epoch saw the epoch's whole metric
    assert batch[12] == pytest.approx(result.epochs[2]["train_accuracy"])
    assert len(result.epochs) == 3 and all(r["checkpoint"] for r in result.epochs)
    check_checkpoints(client, run_id, result, tmp_path)
    assert "membership.jsonl" not in set(artifact_files(client, run_id))  # no workers


def test_each_fit_is_its_own_run_and_a_failed_fit_is_marked_failed(tmp_path):
    train, val = iters()
    logger = rm.callback.MLflowLogger(tmp_path / "mlruns", frequent=2)
    mod = rm.mod.Module(net())
    mod.fit(train, num_epoch=1, batch_end_callback=logger)
    first = logger.run_id
    # fit's end ends the run (on_fit_end), without close()
    assert MlflowClient(logger.tracking_uri).get_run(first).info.status == "FINISHED"

    def boom(param):
        if param.epoch == 1 and param.nbatch == 1:
            raise RuntimeError("enough")
    with pytest.raises(RuntimeError, match="enough"):
        mod.fit(train, eval_data=val, num_epoch=3, force_init=True,
                batch_end_callback=[logger, boom])
    second = logger.run_id
    logger.close()
    logger.close()  # nothing left to end
    client = MlflowClient(logger.tracking_uri)
    assert second != first
    assert client.get_run(first).info.status == "FINISHED"
    run = client.get_run(second)
    assert run.info.status == "FAILED"
    assert run.data.tags["error"] == "RuntimeError: enough"
    assert sorted(history(client, second, "val_accuracy")) == [0]
    assert sorted(history(client, first, "batch/accuracy")) == [1, 3]  # frequent=2


def test_a_store_failing_mid_run_warns_and_training_goes_on(tmp_path, caplog):
    train, _ = iters()
    logger = rm.callback.MLflowLogger(tmp_path / "mlruns")

    def break_store(param):  # the store starts refusing writes after the run started
        if param.epoch == 0 and param.nbatch == 0:
            def refuse(*args, **kwargs):
                raise OSError("disk full")
            logger._client.log_batch = refuse
    with caplog.at_level(logging.WARNING, logger="raymod.mlflow_logger"):
        result = rm.mod.Module(net()).fit(train, num_epoch=2,
                                          batch_end_callback=[break_store, logger])
        logger.close()
    assert len(result.epochs) == 2 and result.error is None
    said = [r.getMessage() for r in caplog.records if r.name == "raymod.mlflow_logger"]
    # one warning per kind of call; after 5 failures in a row it stops trying (a server
    # gone for good would hold each step for MLflow's retries); then what the run misses
    assert said == [f"MLflowLogger: logging {what} to {logger.tracking_uri} failed, training "
                    f"goes on: disk full" for what in ("parameters", "batch metrics")] + [
        f"MLflowLogger: 5 calls in a row to {logger.tracking_uri} failed: run "
        f"{logger.run_id} logs nothing more",
        f"MLflowLogger: run {logger.run_id} at {logger.tracking_uri} is incomplete: 8 calls "
        f"to batch metrics, 2 calls to epoch metrics, 1 call to parameters lost (failed or "
        f"skipped)"]
    assert MlflowClient(logger.tracking_uri).get_run(logger.run_id).info.status == "FINISHED"


def test_an_unreachable_server_fails_at_fit_start_in_one_line():
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    logger = rm.callback.MLflowLogger(f"http://127.0.0.1:{port}")
    train, _ = iters()
    mod = rm.mod.Module(net())
    with pytest.raises(ValueError) as caught:
        mod.fit(train, num_epoch=1, batch_end_callback=logger)
    message = str(caught.value)
    assert message.startswith(f"MLflowLogger(tracking_uri='http://127.0.0.1:{port}'")
    assert "expected a reachable MLflow tracking store, got: cannot connect" in message
    assert "\n" not in message and not mod.binded  # before anything was bound


def test_bad_locations_and_arguments_fail_when_made(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"MLflowLogger\(tracking_uri='file://.*/file'\): "
                                         r"expected a folder it can write, got: .* is a file"):
        rm.callback.MLflowLogger(tmp_path / "file")
    with pytest.raises(ValueError, match="frequent"):
        rm.callback.MLflowLogger(tmp_path / "m", frequent=0)
    with pytest.raises(ValueError, match="log_checkpoints"):
        rm.callback.MLflowLogger(tmp_path / "m", log_checkpoints="all")
    assert not (tmp_path / "m").exists()  # nothing is made before a fit


def test_a_checkpoint_in_an_object_store_is_tagged_not_copied(tmp_path):
    """A fit checkpointing to ``s3://...`` (its filesystem is no local one): the logger
    names the checkpoint's URI in a tag instead of downloading it to upload it again."""
    from types import SimpleNamespace
    logger = rm.callback.MLflowLogger(tmp_path / "mlruns")
    logger.on_fit_start()
    folder = "bucket/run/step-0000000004"  # the form fit's records give: a path in the store
    logger._module = SimpleNamespace(_checkpointer=SimpleNamespace(
        fs=SimpleNamespace(), config=SimpleNamespace(path="s3://bucket/run?region=x")))
    logger.on_fit_end(rm.mod.FitResult(epochs=[{"epoch": 0, "checkpoint": folder}],
                                       last_checkpoint=folder))
    client = MlflowClient(logger.tracking_uri)
    run = client.get_run(logger.run_id)
    assert run.data.tags["checkpoint.step-0000000004"] == "s3://bucket/run/step-0000000004"
    assert run.data.tags["checkpoint.last"] == "s3://bucket/run/step-0000000004"
    assert client.list_artifacts(logger.run_id) == [] and run.info.status == "FINISHED"


def test_default_store_is_mlruns_here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert rm.callback.MLflowLogger().tracking_uri == (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5000")
    assert rm.mlflow_logger.resolve_tracking_uri(None) == "http://127.0.0.1:5000"


def test_without_mlflow_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)
    with pytest.raises(ImportError, match=r"pip install 'raymod\[mlflow\]'"):
        rm.callback.MLflowLogger(tmp_path / "mlruns")


# ---- on Ray workers -------------------------------------------------------------------------
@pytest.mark.ray
def test_a_fit_on_workers_records_membership_and_checkpoints(ray_cluster, close_modules,
                                                             tmp_path):
    train, val = iters()
    mod = rm.mod.Module(net(), workers=2)
    close_modules(mod)
    logger = rm.callback.MLflowLogger(tmp_path / "mlruns")
    result = mod.fit(train, eval_data=val, num_epoch=2, kvstore="dist_sync",
                     optimizer_params={"learning_rate": 0.1}, batch_end_callback=logger,
                     checkpoint=rm.CheckpointConfig(str(tmp_path / "ck")))
    logger.close()
    client = MlflowClient(logger.tracking_uri)
    run = client.get_run(logger.run_id)
    assert run.info.status == "FINISHED"
    params = run.data.params
    assert params["workers"] == "2" and params["workers.cpus_per_worker"] == "1"
    assert params["optimizer"] == "sgd" and params["batch_size"] == "40"
    for key in ("train_accuracy", "val_accuracy"):
        got = history(client, logger.run_id, key)
        np.testing.assert_allclose([got[0], got[1]], [r[key] for r in result.epochs])
    assert sorted(history(client, logger.run_id, "batch/accuracy")) == list(range(1, 9))
    # both workers joined before the first step: 2 live, 2 joins
    assert history(client, logger.run_id, "membership/join") == {1: 2.0}
    assert history(client, logger.run_id, "workers") == {1: 2.0}
    path = client.download_artifacts(logger.run_id, "membership.jsonl", str(tmp_path / "dl"))
    events = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert [e["kind"] for e in events] == ["join", "join"]
    assert sorted(e["rank"] for e in events) == [0, 1]
    assert all(e["step"] == 1 and e["epoch"] == 0 for e in events)
    assert [e["event"] for e in result.events].count("join") == 2
    check_checkpoints(client, logger.run_id, result, tmp_path)


# ---- the digits job -------------------------------------------------------------------------
def run_job(*args, timeout=180):
    """Run the digits job (in process: --workers 0), as tests/test_jobs.py does."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.run([sys.executable, str(DIGITS), *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_digits_job_records_its_run_in_mlflow_with_loss(tmp_path):
    pytest.importorskip("sklearn")
    store = tmp_path / "mlruns"
    result = run_job("--epochs", 2, "--workers", 0, "--batch-size", 128,
                     "--checkpoint", tmp_path / "d", "--metrics", tmp_path / "m.jsonl",
                     "--checkpoint-dir", tmp_path / "fit", "--tensorboard", tmp_path / "tb",
                     "--mlflow", store)
    assert result.returncode == 0, result.stderr[-3000:]
    records = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    for record in records:  # the loss, always: cross-entropy beside accuracy
        assert record["train_loss"] == record["train_cross-entropy"] > 0
        assert record["val_loss"] == record["val_cross-entropy"] > 0
    client = MlflowClient(store.as_uri())
    [run] = client.search_runs([client.get_experiment_by_name("raymod").experiment_id])
    run_id = run.info.run_id
    assert run.info.status == "FINISHED" and run.info.run_name == "train_digits"
    assert run.data.tags["raymod.metrics_run"] == records[0]["run"]
    params = run.data.params
    assert (params["num_epoch"], params["job.lr"], params["job.batch_size"]) == ("2", "0.1",
                                                                              "128")
    assert (params["optimizer"], params["optimizer.momentum"], params["workers"]) == (
        "sgd", "0.9", "0")
    for key in ("train_accuracy", "val_accuracy", "train_loss", "val_loss"):
        got = history(client, run_id, key)
        assert sorted(got) == [0, 1], key
        np.testing.assert_allclose([got[0], got[1]], [r[key] for r in records], err_msg=key)
    # 1,437 rows at batch 128: 12 steps an epoch
    assert sorted(history(client, run_id, "batch/loss")) == list(range(1, 25))
    # the final checkpoint, written after the last epoch, is an artifact
    final = "checkpoints/step-0000000024"
    assert {f"{final}/{f.name}" for f in (tmp_path / "fit" / "step-0000000024").iterdir()} \
        <= set(artifact_files(client, run_id, final))
    assert run.data.tags["checkpoint.last"] == str(tmp_path / "fit" / "step-0000000024")
    # --tensorboard: the loss and the hparams
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    reader = accumulator.EventAccumulator(str(tmp_path / "tb"))
    reader.Reload()
    for tag, key in (("train/loss", "train_loss"), ("val/loss", "val_loss")):
        np.testing.assert_allclose([e.value for e in reader.Scalars(tag)],
                                   [r[key] for r in records], rtol=1e-6, err_msg=tag)
    assert "_hparams_/session_start_info" in reader.PluginTagToContent("hparams")


def test_digits_job_mlflow_flag(tmp_path):
    sys.path.insert(0, str(ROOT / "jobs"))
    try:
        import train_digits
    finally:
        sys.path.remove(str(ROOT / "jobs"))
    default = train_digits.parse_args(["--workers", "0", "--mlflow"])
    assert default.mlflow == "runs/digits/mlruns"  # beside the job's other outputs
    assert train_digits.parse_args(["--workers", "0"]).mlflow is None
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    bad = run_job("--workers", 0, "--mlflow", f"http://127.0.0.1:{port}")
    assert bad.returncode == 2 and bad.stdout == ""
    [line] = bad.stderr.strip().splitlines()
    assert line.startswith("train_digits.py: error: argument --mlflow: cannot use "
                           f"'http://127.0.0.1:{port}': cannot connect")

"""The LSTM bucketing and SVRG regression jobs, run as a user runs them: as subprocesses,
checking exit codes, metrics lines, checkpoints and plots, with small flags.

The runs on workers join the test session's Ray cluster with ``--address`` (the path of
``ray submit``), which saves starting a cluster per job; tests/test_jobs.py covers a job
starting its own.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LSTM = ROOT / "jobs" / "train_lstm_bucketing.py"
SVRG = ROOT / "jobs" / "train_svrg_regression.py"
HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None

# a small corpus and model: a few seconds an epoch on one loaded core
LSTM_SMALL = ("--max-sentences", 800, "--vocab-size", 300, "--num-embed", 16,
              "--num-hidden", 32, "--batch-size", 16, "--buckets", "10,20")


def run_job(job, *args, timeout=180):
    """Run a job; it starts its own local Ray cluster, whatever RAY_ADDRESS says."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.run([sys.executable, str(job), *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def outputs(tmp_path, name):
    return ("--checkpoint", tmp_path / name, "--metrics", tmp_path / "m.jsonl",
            "--plot", tmp_path / "curves.png")


def epoch_lines(path):
    records = [json.loads(line) for line in Path(path).read_text().splitlines()]
    assert all(r["event"] == "epoch" for r in records)
    return records


def check_plot(tmp_path, result):
    png = tmp_path / "curves.png"
    if HAVE_MATPLOTLIB:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert not png.exists() and "matplotlib is not installed" in result.stderr


def check_checkpoint(tmp_path, prefix, epoch):
    for suffix in ("-symbol.json", f"-{epoch:04d}.params", f"-{epoch:04d}.states"):
        assert (tmp_path / f"{prefix}{suffix}").stat().st_size > 0, prefix + suffix


# ---- train_lstm_bucketing -------------------------------------------------------------------

def _check_lstm_run(result, tmp_path, epochs):
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    records = epoch_lines(tmp_path / "m.jsonl")
    assert [r["epoch"] for r in records] == list(range(epochs))
    for r in records:
        assert 1.0 < r["val_perplexity"] < 400 and 1.0 < r["train_perplexity"]
        assert r["time_cost"] > 0 and r["samples_per_sec"] > 0
    check_checkpoint(tmp_path, "lm", epochs)
    vocab = json.loads((tmp_path / "lm-vocab.json").read_text())
    assert vocab["<pad>"] == 0 and vocab["<unk>"] == len(vocab) - 1 == 301
    final = [ln for ln in result.stdout.splitlines() if ln.startswith("final validation")]
    assert len(final) == 1 and float(final[0].split()[-1]) == pytest.approx(
        records[-1]["val_perplexity"], abs=0.01)
    check_plot(tmp_path, result)
    return records


def test_lstm_in_process_perplexity_falls(tmp_path):
    result = run_job(LSTM, "--workers", 0, "--epochs", 2, *LSTM_SMALL,
                     *outputs(tmp_path, "lm"))
    records = _check_lstm_run(result, tmp_path, 2)
    assert records[1]["val_perplexity"] < records[0]["val_perplexity"]
    assert "Epoch[1] Validation-perplexity=" in result.stderr


@pytest.mark.ray
def test_lstm_on_two_workers_joining_a_cluster(tmp_path, ray_cluster):
    result = run_job(LSTM, "--workers", 2, "--epochs", 1, *LSTM_SMALL, *outputs(tmp_path, "lm"),
                     "--address", ray_cluster["address"])
    _check_lstm_run(result, tmp_path, 1)
    assert "on 2 Ray workers" in result.stderr and "(joined)" in result.stderr


# ---- train_svrg_regression ------------------------------------------------------------------

def _check_svrg_run(result, tmp_path, epochs):
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    records = epoch_lines(tmp_path / "m.jsonl")
    by_method = {m: [r for r in records if r["method"] == m] for m in ("sgd", "svrg")}
    assert len(records) == 2 * epochs
    for method, recs in by_method.items():
        assert [r["epoch"] for r in recs] == list(range(epochs)), method
        for r in recs:
            assert r["excess_mse"] >= 0 and r["mse"] >= r["excess_mse"]
            assert r["train_mse"] > 0 and r["time_cost"] > 0
        check_checkpoint(tmp_path, "lr" if method == "svrg" else "lr_sgd", epochs)
    [final] = [ln for ln in result.stdout.splitlines() if ln.startswith("final excess MSE")]
    svrg, sgd = (by_method[m][-1]["excess_mse"] for m in ("svrg", "sgd"))
    assert f"SVRG {svrg:.4g}, SGD {sgd:.4g}, SGD/SVRG ratio {sgd / svrg:.4g}" in final
    check_plot(tmp_path, result)
    return svrg, sgd


def test_svrg_diabetes_in_process_beats_sgd(tmp_path):
    pytest.importorskip("sklearn")
    result = run_job(SVRG, "--workers", 0, "--dataset", "diabetes", "--min-ratio", 3,
                     *outputs(tmp_path, "lr"))
    _check_svrg_run(result, tmp_path, 30)


@pytest.mark.ray
def test_svrg_noisy_on_two_workers_beats_sgd(tmp_path, ray_cluster):
    # a small, fast-converging variant: in process it ends with SGD/SVRG = 17
    result = run_job(SVRG, "--workers", 2, "--rows", 1000, "--cols", 12, "--batch-size", 50,
                     "--lr", 0.2, "--epochs", 4, "--update-freq", 1, *outputs(tmp_path, "lr"),
                     "--address", ray_cluster["address"])
    svrg, sgd = _check_svrg_run(result, tmp_path, 4)
    assert svrg * 5 < sgd
    assert "on 2 Ray workers" in result.stderr


def test_svrg_min_ratio_gate_and_no_plot(tmp_path):
    result = run_job(SVRG, "--workers", 0, "--rows", 500, "--cols", 4, "--epochs", 1,
                     "--min-ratio", 1e12, "--checkpoint", tmp_path / "lr",
                     "--metrics", tmp_path / "m.jsonl", "--plot", "none")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "below --min-ratio" in result.stderr.splitlines()[-1]
    assert "Traceback" not in result.stderr
    assert not list(tmp_path.glob("*.png"))


# ---- bad flags ------------------------------------------------------------------------------

@pytest.mark.parametrize("job, args, flag", [
    (LSTM, ["--buckets", "10,x"], "--buckets"),
    (LSTM, ["--val-fraction", "1"], "--val-fraction"),
    (LSTM, ["--vocab-size", "0"], "--vocab-size"),
    (LSTM, ["--workers", "3", "--batch-size", "2"], "--batch-size"),
    (SVRG, ["--dataset", "iris"], "--dataset"),
    (SVRG, ["--rows", "50"], "--rows"),
    (SVRG, ["--min-ratio", "-1"], "--min-ratio"),
])
def test_bad_flags_are_one_line_and_exit_2(job, args, flag):
    result = run_job(job, *args, timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"{job.name}: error:") and flag in lines[0]
    assert result.stdout == ""

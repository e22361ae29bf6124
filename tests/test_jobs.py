"""The jobs in jobs/, run as a user runs them: as subprocesses, checking exit codes and files."""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from raymod.ndarray_io import load

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "jobs" / "train_digits.py"


def run_job(*args, timeout=180):
    """Run the digits job; it starts its own local Ray cluster, whatever RAY_ADDRESS says."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    return subprocess.run([sys.executable, str(DIGITS), *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.ray
def test_train_digits_on_two_workers_writes_checkpoint_and_metrics(tmp_path):
    pytest.importorskip("sklearn")
    result = run_job("--epochs", 2, "--workers", 2, "--checkpoint", tmp_path / "d",
                     "--metrics", tmp_path / "m.jsonl")
    assert result.returncode == 0, result.stderr[-3000:]
    for name in ("d-symbol.json", "d-0002.params", "d-0002.states"):
        assert (tmp_path / name).stat().st_size > 0, name
    lines = (tmp_path / "m.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["epoch"] for r in records] == [0, 1]
    for r in records:
        assert 0.0 <= r["train_accuracy"] <= 1.0 and 0.0 <= r["val_accuracy"] <= 1.0
        assert r["time_cost"] > 0 and r["samples_per_sec"] > 0
    assert "Epoch[1] Validation-accuracy=" in result.stderr
    assert "Ray dashboard http://127.0.0.1:" in result.stderr  # where to watch it, and how
    assert "/metrics" in result.stderr
    # the summary from fit's FitResult: both epochs, and the two workers' joins
    assert "fit: 2 epochs," in result.stderr and "membership events: 2 join" in result.stderr
    final = [ln for ln in result.stdout.splitlines() if ln.startswith("final validation accuracy")]
    assert len(final) == 1 and float(final[0].split()[-1]) == pytest.approx(
        records[-1]["val_accuracy"], abs=1e-4)


def test_train_digits_in_process_with_min_accuracy_gate(tmp_path):
    pytest.importorskip("sklearn")
    result = run_job("--epochs", 1, "--workers", 0, "--batch-size", 128, "--min-accuracy", 0.99,
                     "--checkpoint", tmp_path / "d", "--metrics", tmp_path / "m.jsonl",
                     "--tensorboard", tmp_path / "tb", "--disp-batches", 4)
    assert result.returncode == 1, result.stderr[-3000:]  # one epoch is far from 99%
    # --disp-batches 4: MXNet's Speedometer lines, at batches 4 and 8 of the epoch's 12
    speed = [ln for ln in result.stderr.splitlines() if "Speed:" in ln]
    assert len(speed) == 2 and all("samples/sec" in ln and "Epoch[0]" in ln for ln in speed)
    assert "below --min-accuracy" in result.stderr.splitlines()[-1]
    assert "Traceback" not in result.stderr
    assert (tmp_path / "d-0001.params").exists()
    [record] = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert record["epoch"] == 0 and "val_accuracy" in record
    # --tensorboard: the same epoch figures as scalars, read with TensorBoard's reader
    accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    reader = accumulator.EventAccumulator(str(tmp_path / "tb"))
    reader.Reload()
    for tag, key in (("train/accuracy", "train_accuracy"), ("val/accuracy", "val_accuracy")):
        [event] = reader.Scalars(tag)
        assert event.step == 0 and event.value == pytest.approx(record[key], abs=1e-6)


def test_common_parse_workers():
    sys.path.insert(0, str(ROOT / "jobs"))
    try:
        import _common
    finally:
        sys.path.remove(str(ROOT / "jobs"))
    assert _common.parse_workers("0") is None and _common.parse_workers("None") is None
    workers = _common.parse_workers("2:4")
    assert (workers.min_workers, workers.max_workers) == (2, 4)
    assert _common.parse_workers("3").max_workers == 3
    with pytest.raises(argparse.ArgumentTypeError):
        _common.parse_workers("4:2")
    assert _common.kvstore_for("dist_sync", None) == "local"
    assert _common.kvstore_for("dist_sync", workers) == "dist_sync"


def test_workers_that_never_start_exit_2_with_one_line_saying_what_to_change(capsys):
    from raymod.base import MXNetError
    from raymod.cluster.pool import WorkersUnavailable
    sys.path.insert(0, str(ROOT / "jobs"))
    try:
        import _common
    finally:
        sys.path.remove(str(ROOT / "jobs"))
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=64)
    _common.add_cluster_args(parser)
    args = parser.parse_args(["--workers", "2", "--start-timeout", "300"])
    assert _common.workers_from_args(parser, args).start_timeout == 300
    with pytest.raises(SystemExit) as stop:
        _common.fit_failed(WorkersUnavailable("only 0 of the 2 workers needed are running"))
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and "--start-timeout" in err
    with pytest.raises(SystemExit) as stop:
        _common.fit_failed(MXNetError("something else"))
    assert stop.value.code == 1


@pytest.mark.parametrize("args, flag", [
    (["--workers", "4:2"], "--workers"),
    (["--workers", "two"], "--workers"),
    (["--epochs", "0"], "--epochs"),
    (["--batch-size", "abc"], "--batch-size"),
    (["--lr", "-1"], "--lr"),
    (["--cpus-per-worker", "0"], "--cpus-per-worker"),
    (["--spares", "-1"], "--spares"),
    (["--workers", "3", "--batch-size", "2"], "--batch-size"),
    (["--checkpoint-dir", "bogus://x"], "--checkpoint-dir: CheckpointConfig(path='bogus://x')"),
])
def test_train_digits_bad_input_is_one_line_and_exit_2(args, flag):
    result = run_job(*args, timeout=60)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("train_digits.py: error:") and flag in lines[0]
    assert result.stdout == ""


def test_train_digits_resumes_from_its_checkpoint_dir(tmp_path):
    pytest.importorskip("sklearn")
    common = ("--workers", 0, "--checkpoint", tmp_path / "d", "--metrics", tmp_path / "m.jsonl",
              "--checkpoint-dir", tmp_path / "fit")
    first = run_job("--epochs", 2, *common)
    assert first.returncode == 0, first.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "fit").iterdir()) == [
        "step-0000000023", "step-0000000046"]  # 23 batches of 64 per epoch
    more = run_job("--epochs", 3, "--resume", *common)
    assert more.returncode == 0, more.stderr[-3000:]
    assert "resumed from" in more.stderr and "epoch 2, batch 0, step 46" in more.stderr
    records = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in records] == [0, 1, 2]  # appended: epoch 2 only ran now
    whole = run_job("--epochs", 3, "--workers", 0, "--checkpoint", tmp_path / "w",
                    "--metrics", tmp_path / "w.jsonl", "--checkpoint-dir", tmp_path / "wfit")
    assert whole.returncode == 0, whole.stderr[-3000:]
    resumed, straight = load(tmp_path / "d-0003.params"), load(tmp_path / "w-0003.params")
    for name, value in straight.items():  # the same trajectory as one uninterrupted run
        np.testing.assert_allclose(resumed[name], value, rtol=0, atol=1e-6, err_msg=name)
    done = run_job("--epochs", 3, "--resume", *common)  # nothing left to train
    assert done.returncode == 0, done.stderr[-3000:]
    assert "final validation accuracy" in done.stdout


def test_train_digits_draws_a_progress_bar_on_a_terminal_only(tmp_path):
    """stderr on a pseudo-terminal: tqdm's bar is drawn (the log lines print above it);
    piped, as in the tests above, it is not."""
    pytest.importorskip("sklearn")
    import fcntl
    import pty
    import select
    import struct
    import termios
    import time

    master, slave = pty.openpty()
    # a terminal 100 columns wide (a fresh pty has 0, and tqdm fits its bar into that)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    args = ["--epochs", 1, "--workers", 0, "--checkpoint", tmp_path / "d",
            "--metrics", tmp_path / "m.jsonl"]
    job = subprocess.Popen([sys.executable, str(DIGITS), *map(str, args)], cwd=ROOT, env=env,
                           stdout=subprocess.DEVNULL, stderr=slave)
    os.close(slave)
    out, deadline = b"", time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the job closed its end
                    break
                if not chunk:
                    break
                out += chunk
            elif job.poll() is not None:
                break
    finally:
        if job.poll() is None:
            job.kill()
        os.close(master)
    assert job.wait(10) == 0, out[-3000:]
    text = out.decode(errors="replace")
    assert "Epoch 0:" in text and "%|" in text, text[-2000:]   # tqdm's bar
    assert "Epoch[0] Validation-accuracy=" in text               # the log, above it
    piped = run_job("--epochs", 1, "--workers", 0, "--checkpoint", tmp_path / "p",
                    "--metrics", tmp_path / "p.jsonl")
    assert piped.returncode == 0 and "%|" not in piped.stderr

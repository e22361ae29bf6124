"""No lost history: a job's metrics file is appended to, each run under its own run id, and a
run that fails at its start (a location flag it cannot write) exits 2 with one line before it
opens anything; ``raymod plot`` draws the newest run, the one ``--run`` names, or all."""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import raymod as rm
from raymod.cli import main
from raymod.cli import plot as plot_cli

ROOT = Path(__file__).resolve().parents[1]
DIGITS = ROOT / "jobs" / "train_digits.py"
# a place no one can write, root included (/proc takes no new files)
UNWRITABLE = "/proc/raymod-no-such-place"
NEEDS_PROC = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")


def run_digits(tmp_path, *args, timeout=180):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    base = ("--workers", 0, "--epochs", 1, "--batch-size", 256,
            "--checkpoint", tmp_path / "d", "--metrics", tmp_path / "m.jsonl",
            "--checkpoint-dir", tmp_path / "fit")
    return subprocess.run([sys.executable, str(DIGITS), *map(str, base), *map(str, args)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
                          check=False)


def plot_args(*argv):
    """``raymod plot``'s arguments as plot.add_parser reads them."""
    parser = argparse.ArgumentParser()
    plot_cli.add_parser(parser.add_subparsers())
    return parser.parse_args(["plot", *map(str, argv)])


@NEEDS_PROC
def test_a_failed_start_keeps_the_history_and_plot_draws_both_runs(tmp_path, capsys):
    pytest.importorskip("sklearn")
    first = run_digits(tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    metrics = tmp_path / "m.jsonl"
    before = metrics.read_bytes()
    (tmp_path / "a-file").write_text("in the way")
    for flag, value in (("--tensorboard", UNWRITABLE), ("--checkpoint-dir", UNWRITABLE),
                        ("--tensorboard", tmp_path / "a-file"),
                        ("--metrics", tmp_path / "a-file" / "m.jsonl"),
                        ("--checkpoint", tmp_path / "a-file" / "d")):
        failed = run_digits(tmp_path, flag, value, timeout=60)
        assert failed.returncode == 2, (flag, failed.stderr[-3000:])
        lines = failed.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in failed.stderr, failed.stderr
        assert lines[0].startswith(f"train_digits.py: error: argument {flag}:"), lines[0]
        assert failed.stdout == ""
        assert metrics.read_bytes() == before  # neither truncated nor touched
    second = run_digits(tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    records = [json.loads(line) for line in metrics.read_text().splitlines()]
    runs = list(dict.fromkeys(r["run"] for r in records))
    assert len(runs) == 2 and [r["epoch"] for r in records] == [0, 0]
    if importlib.util.find_spec("matplotlib") is None:
        return  # the history part holds without matplotlib; plotting needs it
    capsys.readouterr()
    assert main(["plot", str(metrics), "-o", str(tmp_path / "newest.png")]) == 0
    assert f"(run 2 of 2, {runs[1]})" in capsys.readouterr().out
    assert main(["plot", str(metrics), "--run", "0", "-o", str(tmp_path / "first.png")]) == 0
    assert f"(run 1 of 2, {runs[0]})" in capsys.readouterr().out
    for selector in (runs[0], runs[0][:17]):  # a run id, or the start of one
        assert plot_cli._cmd_plot(plot_args(metrics, "--run", selector, "-o",
                                            tmp_path / "by-id.png")) == 0
        assert f"(run 1 of 2, {runs[0]})" in capsys.readouterr().out
    assert plot_cli._cmd_plot(plot_args(metrics, "--run", "all", "-o",
                                        tmp_path / "both.png")) == 0
    assert "(runs 1, 2 of 2): " in capsys.readouterr().out
    assert (tmp_path / "both.png").read_bytes()[:4] == b"\x89PNG"


def test_plot_groups_lines_by_run_id(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    metrics = tmp_path / "m.jsonl"
    with rm.callback.MetricsLogger(metrics) as old:  # the layout before run ids
        for epoch in range(2):
            old.log_epoch(epoch, {"accuracy": 0.5})
    for run in ("r1", "r2"):
        with rm.callback.MetricsLogger(metrics, run_id=run) as log:
            for epoch in range(3):
                log.log_epoch(epoch, {"accuracy": 0.5 + 0.1 * epoch})
    runs, bad = plot_cli._read_metrics(str(metrics))
    assert bad == 0 and [(r["id"], len(r["records"])) for r in runs] == \
        [(None, 2), ("r1", 3), ("r2", 3)]
    with pytest.raises(plot_cli.CLIError, match="no run with that id.*r1, r2") as caught:
        plot_cli._cmd_plot(plot_args(metrics, "--run", "r3"))
    assert caught.value.status == 2


# ---- the writers ----------------------------------------------------------------------------
def test_metrics_logger_opens_its_file_at_the_first_line(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"event": "epoch", "epoch": 0}\n')
    rm.callback.MetricsLogger(path, mode="w").close()  # a run that failed before logging
    assert path.read_text() == '{"event": "epoch", "epoch": 0}\n'
    with rm.callback.MetricsLogger(tmp_path / "new" / "m.jsonl", run_id="x") as log:
        assert not (tmp_path / "new").exists()
        log.log_epoch(0, {"run": 1.0})  # a metric named like the reserved key
    [line] = (tmp_path / "new" / "m.jsonl").read_text().splitlines()
    assert json.loads(line)["run"] == "x" and json.loads(line)["metric_run"] == 1.0
    assert rm.callback.MetricsLogger.last_run_id(tmp_path / "new" / "m.jsonl") == "x"
    with pytest.raises(ValueError, match="mode=.*'a' or 'w', got 'x'"):
        rm.callback.MetricsLogger(path, mode="x")
    with pytest.raises(ValueError, match="is a folder"):
        rm.callback.MetricsLogger(tmp_path)


def test_epoch_metrics_appends_a_new_run_or_continues_one(tmp_path):
    sys.path.insert(0, str(ROOT / "jobs"))
    try:
        import _common
    finally:
        sys.path.remove(str(ROOT / "jobs"))
    path = tmp_path / "m.jsonl"
    ids = []
    for mode in ("w", "w", "a"):
        metrics = _common.EpochMetrics(str(path), batch_size=4, has_validation=False, mode=mode)
        metrics.epoch_end(0)
        metrics.close()
        ids.append(metrics.run_id)
    assert ids[0] != ids[1] and ids[2] == ids[1]  # 'a': the resumed run goes on
    assert [json.loads(line)["run"] for line in path.read_text().splitlines()] == ids
    # --plot (the jobs with a plot): 'none', or a file that can be written
    assert _common.plot_location("none") == "none"
    with pytest.raises(argparse.ArgumentTypeError, match="is a file, not a folder"):
        _common.plot_location(str(path / "p.png"))


def test_tensorboard_location_errors_are_one_line(tmp_path):
    pytest.importorskip("tensorboardX")
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="logdir=.*is a file, not a folder") as caught:
        rm.callback.TensorBoard(tmp_path / "file")
    assert caught.value.__cause__ is None and caught.value.__context__ is None
    if os.path.isdir("/proc/self"):
        with pytest.raises(ValueError, match="cannot create files in /proc"):
            rm.callback.TensorBoard(UNWRITABLE)


def test_location_problem(tmp_path):
    problem = rm.callback.location_problem
    assert problem(tmp_path / "a" / "b" / "m.jsonl") is None
    assert problem(tmp_path / "a" / "b", folder=True) is None
    assert not (tmp_path / "a").exists() and os.listdir(tmp_path) == []  # nothing made
    (tmp_path / "f").write_text("keep")
    assert problem(tmp_path / "f") is None and (tmp_path / "f").read_text() == "keep"
    assert "is a file, not a folder" in problem(tmp_path / "f" / "x")
    assert "is a folder, not a file" in problem(tmp_path)


# ---- raymod im2rec --list that lists nothing ------------------------------------------------
def test_im2rec_list_without_a_match_is_an_error(tmp_path, capsys):
    (tmp_path / "img" / "cats").mkdir(parents=True)
    (tmp_path / "img" / "cats" / "notes.txt").write_text("no image here")
    for flags in ([], ["--recursive"]):
        assert main(["im2rec", "--list", *flags, str(tmp_path / "out"),
                     str(tmp_path / "img")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("raymod im2rec: error: no image")
        assert ".jpeg .jpg .png" in err[0]
    assert not list(tmp_path.glob("out*"))  # no empty list written

"""The `raymod` command (raymod/cli.py): train, bench, inspect and plot, and its errors."""
import importlib.util
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import raymod as rm
from raymod.cli import main

ROOT = Path(__file__).resolve().parents[1]


def one_error_line(err, command):
    """The stderr of a failed command: exactly one line, `raymod <command>: error: ...`."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith(f"raymod {command}: error: ") or lines[0].startswith(
        "raymod: error: "), lines[0]
    assert "Traceback" not in err
    return lines[0]


def small_net():
    data = rm.sym.Variable("data")
    net = rm.sym.FullyConnected(data, num_hidden=6, name="fc1")
    net = rm.sym.BatchNorm(net, name="bn1")
    net = rm.sym.Activation(net, act_type="relu", name="relu1")
    net = rm.sym.FullyConnected(net, num_hidden=3, name="fc2")
    return rm.sym.SoftmaxOutput(net, name="softmax")


def train_iter(rng):
    x = rng.random((48, 5)).astype(np.float32)
    y = (x.sum(axis=1) * 0.6).astype(np.int64).clip(0, 2).astype(np.float32)
    return rm.io.NDArrayIter(x, y, batch_size=16, shuffle=True)


@pytest.fixture
def module_checkpoint(tmp_path, rng):
    """A Module.save_checkpoint prefix with epochs 1 (no states) and 3 (SGD momentum)."""
    rm.random.seed(3)
    mod = rm.mod.Module(small_net())
    mod.fit(train_iter(rng), num_epoch=3, optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    prefix = str(tmp_path / "ck" / "net")
    os.makedirs(os.path.dirname(prefix))
    mod.save_checkpoint(prefix, 1)
    mod.save_checkpoint(prefix, 3, save_optimizer_states=True)
    arg_params, aux_params = mod.get_params()
    return prefix, arg_params, aux_params


@pytest.fixture
def fit_checkpoint(tmp_path, rng):
    """A fit(checkpoint=...) folder (Adam: two state arrays per weight)."""
    rm.random.seed(4)
    mod = rm.mod.Module(small_net())
    root = tmp_path / "fit"
    mod.fit(train_iter(rng), num_epoch=2, optimizer="adam",
            checkpoint=rm.CheckpointConfig(str(root), every_n_steps=2, keep=2))
    return root


# ---- the command itself -------------------------------------------------------------------------
def test_no_command_and_unknown_command_are_usage_errors(capsys):
    assert main([]) == 2
    one_error_line(capsys.readouterr().err, "")
    assert main(["frobnicate"]) == 2
    one_error_line(capsys.readouterr().err, "")


def test_help_and_version_exit_0(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for command in ("train", "bench", "inspect", "plot"):
        assert command in out
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("raymod ")


def test_console_entry_point_runs_as_a_module():
    result = subprocess.run([sys.executable, "-m", "raymod.cli", "inspect", "/nonexistent/x"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 1
    one_error_line(result.stderr, "inspect")


# ---- train --------------------------------------------------------------------------------------
def test_train_lists_jobs(capsys):
    assert main(["train"]) == 0
    out = capsys.readouterr().out
    assert "digits" in out and "train_digits.py" in out


def test_train_unknown_job_lists_known_jobs_exit_2(capsys):
    assert main(["train", "no_such_job"]) == 2
    line = one_error_line(capsys.readouterr().err, "train")
    assert "no_such_job" in line and "known jobs: " in line and "digits" in line


def test_train_flags_before_the_job_name_get_a_hint(capsys):
    assert main(["train", "--workers", "2", "digits"]) == 2
    assert "go after its name" in one_error_line(capsys.readouterr().err, "train")


def test_train_runs_a_script_with_arguments_passed_through(tmp_path, capfd):
    script = tmp_path / "myjob.py"
    record = tmp_path / "argv.json"
    script.write_text("import json, sys\n"
                      f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n"
                      "sys.exit(3)\n")
    args = ["--workers", "2:4", "--gpus-per-worker", "0", "--epochs", "1", "--help-me"]
    assert main(["train", str(script), *args]) == 3  # the job's exit status
    assert json.loads(record.read_text()) == args


def test_train_bad_workers_is_the_jobs_one_line_error(capfd):
    pytest.importorskip("sklearn")
    assert main(["train", "digits", "--workers", "4:2"]) == 2
    err = capfd.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--workers" in lines[0] and "Traceback" not in err


def test_train_inspect_plot_chain(tmp_path):
    """`raymod train digits` in process, then inspect its checkpoint and plot its metrics."""
    pytest.importorskip("sklearn")
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}

    def raymod(*args, timeout=300):
        return subprocess.run([sys.executable, "-m", "raymod.cli", *map(str, args)],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=timeout, check=False)

    run = raymod("train", "digits", "--workers", "0", "--epochs", "2", "--batch-size", "128",
                 "--checkpoint", "runs/d", "--metrics", "runs/m.jsonl")
    assert run.returncode == 0, run.stderr[-3000:]
    assert "final validation accuracy" in run.stdout
    info = raymod("inspect", "runs/d", "--json")
    assert info.returncode == 0, info.stderr
    report = json.loads(info.stdout)
    assert report["checkpoint"]["epoch"] == 2
    assert [p["name"] for p in report["params"]] == [
        "conv1_weight", "conv1_bias", "fc1_weight", "fc1_bias", "fc2_weight", "fc2_bias"]
    assert report["optimizer"]["num_update"] == 2 * -(-1437 // 128)
    if importlib.util.find_spec("matplotlib") is not None:
        plot = raymod("plot", "runs/m.jsonl", "-o", "curves.png")
        assert plot.returncode == 0, plot.stderr
        assert (tmp_path / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ---- bench --------------------------------------------------------------------------------------
def test_bench_lists_benchmarks(capsys):
    assert main(["bench"]) == 0
    out = capsys.readouterr().out
    assert "executor" in out and "bench_executor.py" in out
    assert "handwritten" not in out  # helpers are not benchmarks


def test_bench_passes_arguments_through(capfd):
    assert main(["bench", "executor", "--help"]) == 0  # the benchmark's own --help
    assert "--repeats" in capfd.readouterr().out


def test_bench_unknown_exit_2(capsys):
    assert main(["bench", "nope"]) == 2
    assert "known benchmarks: " in one_error_line(capsys.readouterr().err, "bench")


# ---- inspect ------------------------------------------------------------------------------------
def test_inspect_module_checkpoint_text(module_checkpoint, capsys):
    prefix, arg_params, aux_params = module_checkpoint
    assert main(["inspect", prefix]) == 0  # the newest epoch: 3
    out = capsys.readouterr().out
    assert "epoch 3" in out and "epochs saved: 1, 3" in out
    assert "5 ops (Activation, BatchNorm, FullyConnected x2, SoftmaxOutput)" in out
    assert "inputs (arguments without saved values): data, softmax_label" in out
    assert "auxiliary states: bn1_moving_mean, bn1_moving_var" in out
    for name, value in {**arg_params, **aux_params}.items():
        row = next(ln for ln in out.splitlines() if ln.split()[:1] == [name])
        assert f"{float(np.linalg.norm(value.astype(np.float64))):.6g}" in row
        assert str(value.dtype) in row
    assert "optimizer states: 6 indices, num_update 9" in out
    assert "names from the symbol's parameter order" in out
    assert "warning" not in out


def test_inspect_kvstore_states_are_named_without_an_index(tmp_path, rng, capsys):
    # several devices: the kvstore runs the optimizer and keys its states by parameter name
    mod = rm.mod.Module(small_net(), context=[rm.cpu(0), rm.cpu(1)])
    mod.fit(train_iter(rng), num_epoch=1, optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9})
    prefix = str(tmp_path / "kv")
    mod.save_checkpoint(prefix, 1, save_optimizer_states=True)
    assert main(["inspect", prefix, "--json"]) == 0
    states = json.loads(capsys.readouterr().out)["optimizer"]["states"]
    assert {s["index"] for s in states} == {None}
    assert {s["name"] for s in states} == set(mod.get_params()[0])
    assert main(["inspect", prefix]) == 0
    row = next(ln for ln in capsys.readouterr().out.splitlines() if "fc1_weight" in ln
               and "momentum" not in ln and ln.split()[:1] == ["-"])
    assert row.split()[1] == "fc1_weight"


def test_inspect_json_matches_the_arrays(module_checkpoint, capsys):
    prefix, arg_params, aux_params = module_checkpoint
    assert main(["inspect", prefix + "-0003.params", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    params = {p["name"]: p for p in report["params"]}
    assert set(params) == set(arg_params) | set(aux_params)
    for name, value in arg_params.items():
        assert params[name]["kind"] == "arg"
        assert params[name]["shape"] == list(value.shape)
        assert params[name]["dtype"] == str(value.dtype)
        assert params[name]["norm"] == pytest.approx(np.linalg.norm(value), rel=1e-6)
    assert {params[n]["kind"] for n in aux_params} == {"aux"}
    states = report["optimizer"]["states"]
    assert [s["name"] for s in states] == ["fc1_weight", "fc1_bias", "bn1_gamma", "bn1_beta",
                                           "fc2_weight", "fc2_bias"]
    for entry in states:  # SGD momentum: one array shaped like its weight
        [array] = entry["arrays"]
        assert array["shape"] == list(arg_params[entry["name"]].shape)
        assert entry["updates"] == 9
    assert report["optimizer"]["num_update"] == 9


def test_inspect_epoch_argument_and_missing_states(module_checkpoint, capsys):
    prefix, _, _ = module_checkpoint
    assert main(["inspect", prefix, "1"]) == 0
    out = capsys.readouterr().out
    assert "epoch 1" in out and "optimizer states: none saved" in out
    assert main(["inspect", prefix, "2"]) == 1
    assert "no epoch 2 (epochs saved: 1, 3)" in one_error_line(capsys.readouterr().err,
                                                                "inspect")


def test_inspect_uri(module_checkpoint, capsys):
    prefix, _, _ = module_checkpoint
    assert main(["inspect", "file://" + prefix]) == 0
    assert "num_update 9" in capsys.readouterr().out


def test_inspect_fit_checkpoint_folder(fit_checkpoint, capsys):
    steps = sorted(p.name for p in fit_checkpoint.iterdir())
    assert len(steps) == 2
    assert main(["inspect", str(fit_checkpoint)]) == 0  # the newest step-* folder
    out = capsys.readouterr().out
    assert f"checkpoint {fit_checkpoint / steps[-1]}" in out and steps[0] in out
    position = json.loads((fit_checkpoint / steps[-1] / "position.json").read_text())
    assert (f"position: epoch {position['epoch']}, batch {position['nbatch']} (batches done "
            f"in the epoch), global step {position['step']}") in out
    sampler = position["sampler"]
    assert f"sampler: epoch {sampler['epoch']}, cursor {sampler['cursor']}" in out
    assert "membership log: 0 events" in out
    # Adam: mean and variance per weight
    assert "[0] (6, 5) float32" in out and "[1] (6, 5) float32" in out


def test_inspect_skips_a_step_whose_save_did_not_finish(fit_checkpoint, tmp_path, capsys):
    complete = sorted(p.name for p in fit_checkpoint.iterdir())
    params = (fit_checkpoint / complete[-1] / "model-0000.params").read_bytes()
    for root in (fit_checkpoint, tmp_path / "only_killed"):
        killed = root / "step-9999999999"  # a file, but no manifest
        killed.mkdir(parents=True)
        (killed / "model-0000.params").write_bytes(params)
    assert main(["inspect", str(fit_checkpoint)]) == 0
    assert f"checkpoint {fit_checkpoint / complete[-1]}" in capsys.readouterr().out
    assert main(["inspect", str(tmp_path / "only_killed")]) == 1
    assert "no complete checkpoint in" in capsys.readouterr().err


def test_inspect_fit_checkpoint_membership_log(fit_checkpoint, capsys):
    step = max(fit_checkpoint.iterdir())
    position = json.loads((step / "position.json").read_text())
    position["membership"] = [
        {"event": "join", "rank": 0, "time": 1.0, "workers": 1, "pid": 11},
        {"event": "lost", "rank": 1, "time": 2.0, "workers": 1, "step": 5},
    ]
    (step / "position.json").write_text(json.dumps(position))
    assert main(["inspect", str(step / "position.json")]) == 0
    out = capsys.readouterr().out
    assert "membership log: 2 events" in out
    assert "join" in out and "lost" in out and "step 5" in out


def test_inspect_never_unpickles(module_checkpoint, tmp_path, capsys):
    prefix, _, _ = module_checkpoint
    marker = tmp_path / "unpickled"

    class Boom:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    # an MXNet-style (pickled) states file in place of raymod's npz
    Path(prefix + "-0003.states").write_bytes(pickle.dumps({0: Boom()}))
    assert main(["inspect", prefix]) == 1
    captured = capsys.readouterr()
    assert not marker.exists()
    assert "parameters: 8 arrays" in captured.out  # the rest is still reported
    assert "not raymod's (npz + JSON) format" in one_error_line(captured.err, "inspect")


@pytest.mark.parametrize("make, message", [
    (lambda d: d / "nothing", "no checkpoint at"),
    (lambda d: d, "no checkpoint in"),
    (lambda d: (d / "x.txt").write_text("hi") and d / "x.txt", "not a checkpoint file"),
    (lambda d: (d / "bad-0001.params").write_bytes(b"\0" * 12) and d / "bad-0001.params",
     "not an MXNet parameter file"),
])
def test_inspect_bad_input_one_line(tmp_path, capsys, make, message):
    status = main(["inspect", str(make(tmp_path))])
    assert status in (1, 2)
    assert message in one_error_line(capsys.readouterr().err, "inspect")


# ---- plot ---------------------------------------------------------------------------------------
def write_metrics(path, runs=1, epochs=3, batches=4):
    logger = rm.callback.MetricsLogger(path, mode="w")
    for _ in range(runs):
        for epoch in range(epochs):
            for nbatch in range(batches):
                logger.write({"event": "batch", "epoch": epoch, "nbatch": nbatch, "time": 0.0,
                              "accuracy": 0.5 + 0.1 * epoch + 0.01 * nbatch})
            if epoch == 1:
                logger.write({"event": "membership", "epoch": 1, "nbatch": 2, "kind": "lost",
                              "rank": 1, "workers": 1, "time": 0.0})
            logger.log_epoch(epoch, None, train_accuracy=0.5 + 0.1 * epoch,
                             val_accuracy=0.55 + 0.1 * epoch, time_cost=1.0 + epoch,
                             samples_per_sec=1000.0 - epoch, val_note="text is skipped")
    logger.close()


def test_plot_writes_a_png(tmp_path, capsys):
    plt = pytest.importorskip("matplotlib.pyplot")
    metrics = tmp_path / "metrics.jsonl"
    write_metrics(metrics)
    with open(metrics, "a") as f:
        f.write('{"truncated\n')
    assert main(["plot", str(metrics)]) == 0  # default output: metrics.png
    out = capsys.readouterr().out
    assert "2 panels, 3 epochs, 1 unreadable lines skipped" in out
    image = plt.imread(tmp_path / "metrics.png")
    assert image.shape[0] > 200 and image.shape[1] > 400
    assert image[..., :3].std() > 0.05  # not a blank canvas


def test_plot_picks_a_run_of_an_appended_file(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    metrics = tmp_path / "m.jsonl"
    write_metrics(metrics, runs=2)
    assert main(["plot", str(metrics), "-o", str(tmp_path / "a" / "b.png"), "--run", "0",
                 "--no-batches"]) == 0
    assert (tmp_path / "a" / "b.png").stat().st_size > 1000
    capsys.readouterr()
    assert main(["plot", str(metrics), "--run", "5"]) == 2
    assert "holds 2 run(s)" in one_error_line(capsys.readouterr().err, "plot")


def test_plot_without_matplotlib_is_one_line(tmp_path, capsys, monkeypatch):
    metrics = tmp_path / "m.jsonl"
    write_metrics(metrics)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert main(["plot", str(metrics)]) == 1
    assert "pip install 'raymod[plot]'" in one_error_line(capsys.readouterr().err, "plot")


@pytest.mark.parametrize("content", [None, "", "not json\n[1, 2]\n", b"\xff\xfe\x00garbage"])
def test_plot_unreadable_metrics_one_line(tmp_path, capsys, content):
    metrics = tmp_path / "m.jsonl"
    if isinstance(content, bytes):
        metrics.write_bytes(content)
    elif content is not None:
        metrics.write_text(content)
    assert main(["plot", str(metrics)]) == 1
    one_error_line(capsys.readouterr().err, "plot")

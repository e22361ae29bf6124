"""Run MXNet 1.9.1's example scripts, unmodified, through raymod's runner on offline data.

    python tools/run_mxnet_examples.py --examples /tmp/mxnet-1.9.1/example
    python tools/run_mxnet_examples.py --examples EX --only toy_nce word_lm --workers 2
    python tools/run_mxnet_examples.py --examples EX --both --json results.json

For each example: copy its folder of MXNet's ``example/`` tree to a temporary one, write the
files its download step looks for there (offline stand-ins from ``tests/compat/compat_data.py``),
and run it with ``python -m raymod.compat`` (in process) and/or ``python -m raymod.compat
--workers N`` (its modules on N Ray workers of a local cluster the runner starts). Each run gets
its own copy (scripts append to their logs). Prints one row per run and metric (name, mode,
exit status, metric, value, seconds), with ``--both`` whether the workers run reached the
in-process figure, the last lines of a failing run's stderr, and everything as JSON.

The scripts run unchanged through a short wrapper the tool writes beside them, which
seeds Python's, numpy's and raymod's generators (the scripts mostly do not, and the two runs
should start alike), may stand in for what a CPU-only machine with today's libraries lacks,
and then ``runpy``s the script with its own arguments:

* ``gpu_as_cpu``: ``mx.gpu(i)`` / ``mx.context.gpu(i)`` give ``mx.cpu(i)`` (scripts that
  hard-code GPU contexts: sequential_module.py, matrix_factorization, word_lm);
* ``fetch_mldata``: ``sklearn.datasets.fetch_mldata``, removed from scikit-learn, exists again
  as a function that raises if called (svm_mnist.py imports it but reads MNIST with
  ``mx.test_utils.get_mnist``).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

_TESTS = str(Path(__file__).resolve().parents[1] / "tests" / "compat")
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
import compat_data  # noqa: E402 - the data stand-ins live beside the tests

# BLAS threads fight over shared cores; one per process keeps the runs quick
ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
       # wide_deep hashes its feature strings with hash(): the same buckets in every run
       "PYTHONHASHSEED": "0"}
WRAPPER_NAME = "_raymod_example.py"
OUTPUT_NAME = "_raymod_output.txt"  # the run's stdout and stderr, in the copy's folder
NUMBER = r"([-+]?(?:[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?|nan|inf))"

WRAPPER = '''"""Written by raymod's tools/run_mxnet_examples.py: seeds{what},
then runs {script} unmodified, as `python {script} ARGS` would."""
import random
import runpy
import sys

import numpy as np
import mxnet as mx

random.seed(0)
np.random.seed(0)
mx.random.seed(0)
{extra}sys.argv[0] = {script!r}
runpy.run_path({script!r}, run_name="__main__")
'''

GPU_AS_CPU = '''mx.gpu = mx.context.gpu = mx.cpu  # a CPU machine: GPU contexts become CPU ones
'''

FETCH_MLDATA = '''import sklearn.datasets


def fetch_mldata(*args, **kwargs):
    raise NotImplementedError("fetch_mldata (removed from scikit-learn) is a stand-in here: "
                              "the script imports it, MNIST comes from mx.test_utils.get_mnist")


sklearn.datasets.fetch_mldata = fetch_mldata
'''


def _epoch(metric: str) -> str:
    """A regex for fit's epoch-end line ``Epoch[N] metric=value``: the value is group 1."""
    return r"Epoch\[\d+\] " + re.escape(metric) + "=" + NUMBER


@dataclasses.dataclass(frozen=True)
class Example:
    """One script of MXNet's ``example/`` tree and how to run it here.

    ``metrics`` maps a label to a regex whose group 1 is the value (the last match counts);
    ``end`` is a regex that only the script's own end prints (the last epoch's line, or a
    line after training). ``log`` names a file the script logs to (read with its output).
    ``tolerance`` is how far (relative) the workers figure may be from the in-process one.
    """

    name: str
    folder: str
    script: str
    args: tuple
    data: Callable[[Path], object]
    metrics: dict
    end: str
    log: str | None = None
    gpu_as_cpu: bool = False
    fetch_mldata: bool = False
    timeout: float = 300.0
    tolerance: float = 1e-3


def _mnist(sub: str = "data", **kwargs) -> Callable[[Path], object]:
    return lambda folder: compat_data.write_mnist(str(folder / sub), **kwargs)


def _train_mnist(network: str, kv_store: str, epochs: int) -> Example:
    return Example(
        f"train_mnist_{network}_{kv_store}", "image-classification", "train_mnist.py",
        ("--network", network, "--kv-store", kv_store, "--num-epochs", str(epochs),
         "--num-examples", "1500", "--batch-size", "64", "--disp-batches", "10"),
        _mnist(train_copies=1, test_copies=1, gz=True),
        {"Validation-accuracy": _epoch("Validation-accuracy")},
        rf"Epoch\[{epochs - 1}\] Validation-accuracy=")


EXAMPLES = (
    Example("mnist_mlp", "module", "mnist_mlp.py", (),
            _mnist(train_copies=100, test_copies=20),
            {"accuracy": r"(?m)^accuracy=" + NUMBER, "Train-accuracy": _epoch("Train-accuracy"),
             "Validation-accuracy": _epoch("Validation-accuracy")},
            r"validation Accuracy: "),
    Example("sequential_module", "module", "sequential_module.py", (),
            _mnist(train_copies=100, test_copies=20),
            {"Validation-accuracy": _epoch("Validation-accuracy")},
            r"Epoch\[1\] Validation-accuracy=", gpu_as_cpu=True),
    # 10 epochs at lr 0.1, momentum 0.9 amplify float32 rounding: on two workers (each
    # summing half the batch) train accuracy matches the in-process run to 6 digits through
    # epoch 5, then drifts; validation is 200 images (0.005 each). One worker matches exactly.
    Example("custom_softmax", "numpy-ops", "custom_softmax.py", (),
            _mnist(train_copies=4, test_copies=1),
            {"Validation-accuracy": _epoch("Validation-accuracy")},
            r"Epoch\[9\] Validation-accuracy=", tolerance=0.02),
    # One worker repeats the in-process run digit for digit; on two, each worker sums half
    # the batch in float32 and an LSTM at lr 0.5 carries the rounding on: epoch 0 agrees to
    # 7 digits, epoch 3 to 0.2% (validation perplexity 18.626 against 18.650).
    Example("lstm_bucketing", "rnn/bucketing", "lstm_bucketing.py",
            ("--num-layers", "2", "--num-hidden", "32", "--num-embed", "32",
             "--num-epochs", "4", "--batch-size", "32", "--lr", "0.5", "--disp-batches", "20"),
            lambda folder: compat_data.write_sherlock(str(folder / "data"), 1500, 150, 150),
            {"Validation-perplexity": _epoch("Validation-perplexity")},
            r"Epoch\[3\] Validation-perplexity=", tolerance=0.01),
    _train_mnist("mlp", "local", 4),
    _train_mnist("mlp", "dist_sync", 4),
    _train_mnist("lenet", "local", 3),
    _train_mnist("lenet", "dist_sync", 3),
    Example("toy_nce", "nce-loss", "toy_nce.py", (), lambda folder: None,
            {"Validation-nce-accuracy": _epoch("Validation-nce-accuracy")},
            r"Epoch\[19\] Validation-nce-accuracy=", timeout=900.0),
    Example("svrg_linear_regression", "svrg_module/linear_regression", "train.py",
            ("-e", "10"),
            lambda folder: compat_data.write_year_prediction(str(folder / "data")),
            {"Train-mse": _epoch("Train-mse")}, r"Epoch\[9\] Train-mse=",
            log="experiments.log"),
    Example("matrix_factorization", "model-parallel/matrix_factorization", "train.py",
            ("--num-epoch", "4", "--batch-size", "128", "--factor-size", "16",
             "--print-every", "40"),
            lambda folder: compat_data.write_movielens(str(folder), users=300, movies=200),
            {"Validation-mse": _epoch("Validation-mse")},
            r"Epoch\[3\] Validation-mse=", gpu_as_cpu=True),
    Example("word_lm", "rnn/word_lm", "train.py",
            ("--emsize", "32", "--nhid", "32", "--nlayers", "2", "--epochs", "3",
             "--batch_size", "16", "--bptt", "10", "--dropout", "0", "--lr", "1.0",
             "--log-interval", "40"),
            lambda folder: compat_data.write_sherlock(str(folder / "data"), 1500, 150, 150),
            {"Valid perplexity": r"Valid loss:\s*\S+, Perplexity: " + NUMBER},
            r"Training completed\.", gpu_as_cpu=True),
    Example("svm_mnist", "svm_mnist", "svm_mnist.py", (),
            _mnist(".", train_copies=40, test_copies=4, gz=True, noise=20.0),
            {f"{out} accuracy %": rf"(?m)^Accuracy for {out}: {NUMBER} %"
             for out in ("svm_l2", "svm_l1", "softmax")},
            r"(?m)^softmax [0-9.]+ %s$", fetch_mldata=True, timeout=900.0),
    # example/sparse: csr batches and row_sparse tables at the examples' real widths. The
    # linear model runs at its default batch of 8192, which MXNet 1.9.1's wheel refuses
    # (8192 x 1,000,001 elements pass 2^31), with Adam (lazy updates).
    Example("sparse_linear_classification", "sparse/linear_classification", "train.py",
            ("--num-epoch", "2", "--optimizer", "adam"),
            lambda folder: [compat_data.write_clicks(str(folder / "data" / name), rows,
                                                     compat_data.AVAZU_FEATURES, seed=seed)
                            for name, rows, seed in (("avazu-app", 60000, 0),
                                                     ("avazu-app.t", 12000, 1))],
            {"eval nll": r"eval nll = " + NUMBER}, r"Training completed\."),
    Example("sparse_factorization_machine", "sparse/factorization_machine", "train.py",
            ("--data-train", "data/criteo.train", "--data-test", "data/criteo.test",
             "--num-epoch", "2", "--batch-size", "1000"),
            lambda folder: [compat_data.write_clicks(str(folder / "data" / name), rows,
                                                     compat_data.CRITEO_FEATURES, nnz=39,
                                                     seed=seed)
                            for name, rows, seed in (("criteo.train", 20000, 2),
                                                     ("criteo.test", 4000, 3))],
            {"eval log loss": r"eval log loss = " + NUMBER}, r"Training completed\."),
    # its deep half (three FullyConnected layers, Adam) sums each half batch in float32 on
    # two workers: accuracy on 5,000 rows moved by 6 rows (0.748 against 0.7468)
    Example("sparse_wide_deep", "sparse/wide_deep", "train.py", ("--num-epoch", "2"),
            lambda folder: compat_data.write_adult(str(folder / "data")),
            {"accuracy": r"epoch \d+, accuracy = " + NUMBER}, r"epoch 1, accuracy = ",
            tolerance=0.01),
    Example("sparse_matrix_factorization", "sparse/matrix_factorization", "train.py",
            ("--num-epoch", "2", "--factor-size", "16"),
            # MovieLens 10M's id ranges (ids below max_user 71,569 and max_movie 65,135)
            lambda folder: compat_data.write_movielens(str(folder / "data"), users=71568,
                                                       movies=65134, train=20000, test=4000),
            {"eval MSE": r"eval MSE = " + NUMBER}, r"Training completed\."),
)
BY_NAME = {example.name: example for example in EXAMPLES}


@dataclasses.dataclass
class Result:
    """One run: ``mode`` is ``'in-process'`` or ``'workers=N'``; ``metrics`` the values found."""

    name: str
    mode: str
    returncode: int | None
    seconds: float
    metrics: dict
    end_reached: bool
    stderr_tail: str = ""
    folder: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.end_reached and bool(self.metrics)


def wrapper_source(example: Example) -> str:
    """The wrapper that seeds, puts the example's stand-ins in place and runs the script."""
    extra, what = "", ""
    if example.gpu_as_cpu:
        extra, what = extra + GPU_AS_CPU, what + ", makes mx.gpu a CPU context"
    if example.fetch_mldata:
        extra, what = extra + FETCH_MLDATA, what + ", stands in for sklearn's fetch_mldata"
    return WRAPPER.format(script=example.script, extra=extra, what=what)


def prepare(example: Example, examples_root: str | os.PathLike, workdir: str | os.PathLike,
            tag: str = "") -> Path:
    """Copy the example's folder into ``workdir`` (as ``<name><tag>/<folder's name>``), write
    its data and the wrapper there; the copy's path."""
    source = Path(examples_root) / example.folder
    if not (source / example.script).is_file():
        raise FileNotFoundError(f"{example.name}: no {source / example.script}")
    folder = Path(workdir) / f"{example.name}{tag}" / source.name
    shutil.copytree(source, folder)
    example.data(folder)
    (folder / WRAPPER_NAME).write_text(wrapper_source(example))
    return folder


def command(workers: int | None = None) -> list:
    """The command that runs the wrapper in the example's folder."""
    option = [] if workers is None else ["--workers", str(workers)]
    return [sys.executable, "-m", "raymod.compat", *option, WRAPPER_NAME]


def extract(example: Example, text: str) -> dict:
    """The example's metrics found in ``text`` (the last value of each), by label."""
    found = {}
    for label, pattern in example.metrics.items():
        hits = re.findall(pattern, text)
        if hits:
            found[label] = float(hits[-1][-1] if isinstance(hits[-1], tuple) else hits[-1])
    return found


def run(example: Example, folder: Path, workers: int | None = None,
        timeout: float | None = None) -> Result:
    """Run the prepared example in ``folder``; a run past ``timeout`` seconds is stopped
    (exit status None)."""
    mode = "in-process" if workers is None else f"workers={workers}"
    start = time.perf_counter()
    try:
        proc = subprocess.run(command(workers) + list(example.args), cwd=folder,
                              capture_output=True, text=True,
                              timeout=timeout or example.timeout, env={**os.environ, **ENV})
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as expired:
        code = None
        out, err = (_text(expired.stdout), _text(expired.stderr)
                    + f"\n[stopped after {expired.timeout:.0f} s]")
    seconds = time.perf_counter() - start
    text = out + err
    (folder / OUTPUT_NAME).write_text(text)  # for a look afterwards (--keep)
    if example.log and (folder / example.log).is_file():
        text += (folder / example.log).read_text()
    result = Result(example.name, mode, code, round(seconds, 1), extract(example, text),
                    re.search(example.end, text) is not None, folder=str(folder))
    if not result.ok:  # Ray colours its error lines
        result.stderr_tail = "\n".join(re.sub(r"\x1b\[[0-9;]*m", "", err).splitlines()[-25:])
    return result


def _text(data) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def compare(example: Example, in_process: Result, on_workers: Result) -> list:
    """What keeps the workers run from matching the in-process one (empty when it does):
    every in-process metric within ``example.tolerance`` (relative)."""
    problems = []
    for label, want in in_process.metrics.items():
        got = on_workers.metrics.get(label)
        if got is None:
            problems.append(f"{label}: not in the workers run's output")
        elif not math.isclose(got, want, rel_tol=example.tolerance, abs_tol=1e-12):
            problems.append(f"{label}: workers {got:g}, in process {want:g} "
                            f"(tolerance {example.tolerance:g} relative)")
    return problems


def table(results: list) -> str:
    """One row per run and metric (a run without metrics gets one row)."""
    rows = [("name", "mode", "exit", "metric", "value", "seconds")]
    for r in results:
        code = "timeout" if r.returncode is None else str(r.returncode)
        if not r.end_reached and r.returncode == 0:
            code += " (no end)"
        for label, value in (r.metrics.items() or [("-", None)]):
            rows.append((r.name, r.mode, code, label, "-" if value is None else f"{value:.6g}",
                         f"{r.seconds:.1f}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--examples", required=True,
                        help="MXNet 1.9.1's example/ folder")
    parser.add_argument("--only", nargs="+", metavar="NAME", choices=list(BY_NAME),
                        help=f"run only these: {', '.join(BY_NAME)}")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="run on N Ray workers (without --both: only so)")
    parser.add_argument("--both", action="store_true",
                        help="run in process and on workers (N = --workers, default 2) and "
                             "compare the final metrics")
    parser.add_argument("--timeout", type=float,
                        help="seconds per run (default: each example's own)")
    parser.add_argument("--workdir", help="where the copies go (default: a new temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the copies")
    parser.add_argument("--json", metavar="PATH", help="also write the JSON here")
    args = parser.parse_args(argv)

    modes = [None]
    if args.both:
        modes = [None, args.workers or 2]
    elif args.workers:
        modes = [args.workers]
    workdir = args.workdir or tempfile.mkdtemp(prefix="mxnet-examples-")
    results, comparisons = [], {}
    try:
        for example in [BY_NAME[n] for n in args.only] if args.only else EXAMPLES:
            runs = []
            for workers in modes:
                tag = "-inproc" if workers is None else f"-workers{workers}"
                folder = prepare(example, args.examples, workdir, tag)
                runs.append(run(example, folder, workers, args.timeout))
                print(table(runs[-1:]).splitlines()[-1], file=sys.stderr, flush=True)
            results += runs
            if len(runs) == 2 and runs[0].ok:
                comparisons[example.name] = compare(example, *runs)
    finally:
        if not args.keep and not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print(table(results))
    for name, problems in comparisons.items():
        print(f"{name}: workers {'match' if not problems else 'differ: ' + '; '.join(problems)}")
    for r in results:
        if not r.ok:
            print(f"\n--- {r.name} ({r.mode}) failed: exit {r.returncode}, end reached "
                  f"{r.end_reached}; last lines of stderr:\n{r.stderr_tail}")
    report = {"results": [dataclasses.asdict(r) for r in results],
              "comparisons": comparisons}
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    failed = any(not r.ok for r in results) or any(comparisons.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

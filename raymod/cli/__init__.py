"""The ``raymod`` command: run jobs and benchmarks, inspect checkpoints, plot training curves.

    raymod train digits --workers 2:4 --epochs 5    # jobs/train_digits.py, flags passed through
    raymod train                                    # lists the jobs
    raymod bench executor --repeats 3               # bench/bench_executor.py
    raymod bench                                    # lists the benchmarks
    raymod inspect runs/digits/digits               # newest PREFIX-NNNN.params (+ .states)
    raymod inspect runs/digits/digits-0012.params   # one epoch
    raymod inspect runs/mlp                         # newest complete fit(checkpoint=...) step-*
    raymod plot runs/digits/metrics.jsonl -o curves.png
    raymod export runs/digits/digits --onnx digits.onnx --shape 1,1,8,8   # newest epoch
    raymod run train.py -e 2                        # an MXNet 1.x script, `import mxnet` -> raymod
    raymod run --workers 2 train.py -e 2            # ... its modules on 2 Ray workers
    raymod im2rec --list --recursive data/train images/   # a .lst, as MXNet's im2rec.py
    raymod im2rec data/train images/                # pack it into data/train.rec + .idx

Jobs and benchmarks are the scripts of a ``jobs/`` and a ``bench/`` folder: the current
directory's first, then those of the raymod checkout this package was installed from. They
run as child processes of the same Python, in the current directory, with every argument after
the name passed through; their exit status is the command's.

``inspect`` reads checkpoints without unpickling anything: ``.params`` files through raymod's
MXNet NDArray reader, optimizer states through ``rm.optimizer.Updater.set_states`` (npz +
JSON, ``allow_pickle=False``), ``position.json`` as JSON. Paths may be ``pyarrow.fs`` URIs.

Exit status: 0 on success; 1 when a file is missing or unreadable (or a job fails); 2 for a
usage error (unknown command, job or benchmark, bad flags). Errors are one line on stderr.
"""
from __future__ import annotations

import argparse
import os
import sys

from ..compat.workers import WORKERS_ENV
from .argtypes import nonnegative_int
from .errors import ArgumentParser as _ArgumentParser, CLIError
from .export_onnx import _cmd_export, input_shape
from .im2rec import add_parser as _add_im2rec
from .plot import add_parser as _add_plot
from .inspect_checkpoint import _cmd_inspect
from .scripts import _cmd_bench, _cmd_train

__all__ = ["main"]

_PROG = "raymod"


def _build_parser() -> argparse.ArgumentParser:
    parser = _ArgumentParser(prog=_PROG, description=__doc__.splitlines()[0],
                             formatter_class=argparse.RawDescriptionHelpFormatter,
                             epilog="Run 'raymod COMMAND --help' for a command's options.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_ArgumentParser)

    train = sub.add_parser(
        "train", help="run a job of jobs/ (e.g. digits), flags passed through",
        description="Run jobs/<JOB>.py (JOB: digits, train_digits, or a path to a .py file) "
                    "with the same Python; every argument after JOB goes to the job. Without "
                    "JOB, list the jobs.",
        epilog="Common job flags: --workers MIN:MAX (0: in process), --cpus-per-worker N, "
               "--gpus-per-worker N, --address auto, --epochs N, --checkpoint PREFIX, "
               "--metrics PATH. 'raymod train digits --help' shows all of a job's flags.")
    train.add_argument("job", nargs="?", metavar="JOB")
    train.add_argument("job_args", nargs=argparse.REMAINDER, metavar="...",
                       help="the job's own flags")
    train.set_defaults(func=_cmd_train)

    bench = sub.add_parser(
        "bench", help="run a benchmark of bench/ (e.g. executor), flags passed through",
        description="Run bench/bench_<NAME>.py with the same Python, passing every argument "
                    "after NAME; 'all' runs each in turn. Without NAME, list the benchmarks.")
    bench.add_argument("name", nargs="?", metavar="NAME")
    bench.add_argument("bench_args", nargs=argparse.REMAINDER, metavar="...",
                       help="the benchmark's own flags")
    bench.set_defaults(func=_cmd_bench)

    inspect = sub.add_parser(
        "inspect", help="summarise a checkpoint (symbol, parameters, optimizer states, position)",
        description="Summarise a checkpoint: its symbol, parameter names, shapes, dtypes and "
                    "L2 norms, optimizer states (shapes, norms, update counts) and, for a "
                    "fit(checkpoint=...) folder, the sampler position and membership log. "
                    "CHECKPOINT is a PREFIX (newest epoch, or EPOCH), a PREFIX-NNNN.params "
                    "file, a step-* folder or the folder holding them (newest). Nothing is "
                    "unpickled.")
    inspect.add_argument("checkpoint", metavar="CHECKPOINT")
    inspect.add_argument("epoch", nargs="?", type=nonnegative_int, metavar="EPOCH",
                         help="which epoch of a PREFIX (default: the newest)")
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.set_defaults(func=_cmd_inspect)

    _add_plot(sub)

    export = sub.add_parser(
        "export", help="export a checkpoint as an ONNX model (needs raymod[onnx])",
        description="Write the inference graph of checkpoint PREFIX (newest epoch, or EPOCH; "
                    "or a PREFIX-NNNN.params file) as an ONNX file with rm.onnx.export_model.")
    export.add_argument("checkpoint", metavar="CHECKPOINT")
    export.add_argument("epoch", nargs="?", type=nonnegative_int, metavar="EPOCH",
                        help="which epoch of a PREFIX (default: the newest)")
    export.add_argument("--onnx", required=True, metavar="FILE", help="the ONNX file to write")
    export.add_argument("--shape", action="append", type=input_shape, metavar="[NAME=]D1,D2,..",
                        help="an input's shape, batch first (once per input; NAME may be "
                             "left out for a one-input network)")
    export.add_argument("--dynamic", action="store_true",
                        help="leave the batch dimension symbolic")
    export.set_defaults(func=_cmd_export)
    run = sub.add_parser(
        "run", help="run an MXNet 1.x script unmodified, `import mxnet` meaning raymod",
        description="Run SCRIPT in this process as `python SCRIPT ARGS` would, with `import "
                    "mxnet` resolving to raymod's compatibility layer (raymod.compat.mxnet). "
                    "The exit status is the script's. See docs/compat.md.")
    run.add_argument("--workers", metavar="N|MIN:MAX",
                     help="train every Module, BucketingModule and SVRGModule the script "
                          "makes (without workers=) on N, or MIN to MAX, Ray workers; the "
                          "script's batch is the global batch, split over them (default: "
                          f"${WORKERS_ENV}, else in this process)")
    run.add_argument("--cpus-per-worker", metavar="C",
                     help="Ray CPUs per worker, and its BLAS threads (default 1)")
    run.add_argument("--gpus-per-worker", metavar="G",
                     help="GPUs per worker (default 0)")
    run.add_argument("--spares", metavar="S",
                     help="workers kept started and set up, idle, that take a lost one's "
                          "place at the next step (default 0)")
    run.add_argument("script", metavar="SCRIPT")
    run.add_argument("script_args", nargs=argparse.REMAINDER, metavar="...",
                     help="the script's own arguments")
    run.set_defaults(func=_cmd_run)
    _add_im2rec(sub)
    return parser


def _cmd_run(args: argparse.Namespace) -> int:
    from ..compat.runner import run_script
    from ..compat.workers import UsageError, workers_from_options

    try:  # every value is checked before the script runs
        workers = workers_from_options(args.workers, args.cpus_per_worker,
                                       args.gpus_per_worker, args.spares)
    except UsageError as err:
        raise CLIError(str(err), status=2) from None
    if not os.path.isfile(args.script):
        raise CLIError(f"script {args.script!r} is not a file", status=2)
    return run_script(args.script, args.script_args, workers, prog=f"{_PROG} run")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("raymod")
    except Exception:  # not installed as a distribution
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    """Run the ``raymod`` command with ``argv`` (default ``sys.argv[1:]``); its exit status."""
    parser = _build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown and getattr(args, "command", None) in ("train", "bench", "run"):
            what = {"train": "JOB", "bench": "NAME", "run": "SCRIPT"}[args.command]
            print(f"{_PROG} {args.command}: error: unrecognized arguments before {what}: "
                  f"{' '.join(unknown)}; the script's flags go after its name: "
                  f"{_PROG} {args.command} {what} [flags...]", file=sys.stderr)
            return 2
        if unknown:
            parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exit_:  # --help, --version, or a usage error already printed
        return exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 2)
    if args.command is None:
        print(f"{_PROG}: error: choose a command: train, bench, inspect, plot, export, run or "
              "im2rec (see --help)", file=sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except CLIError as err:
        print(f"{_PROG} {args.command}: error: {err}", file=sys.stderr)
        return err.status
    except KeyboardInterrupt:
        print(f"{_PROG} {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # e.g. `raymod inspect ... | head`
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silence the flush at exit
        except OSError:
            pass
        return 0


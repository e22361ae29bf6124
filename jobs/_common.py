"""Helpers the jobs in ``jobs/`` share: command-line flags, the Ray connection, metrics.

A job's outline (``jobs/train_digits.py`` is the worked example)::

    parser = JobArgumentParser(description=...)      # errors: one line, exit status 2
    add_cluster_args(parser); add_output_args(parser, "digits")
    args = parser.parse_args()
    args.workers = workers_from_args(parser, args)   # rm.Workers, or None: in process
    connect(args.workers, args.address)              # Ray, only when on workers
    metrics = EpochMetrics(args.metrics, batch_size)
    with progress_bar(batches) as bar:
        mod.fit(metrics.timed(train), eval_data=val, kvstore=kvstore_for(args.kvstore, ...),
                batch_end_callback=[bar, metrics.batch_end],
                epoch_end_callback=[bar, metrics.epoch_end], eval_end_callback=metrics.eval_end)

The callbacks themselves are ``rm.callback``'s ``TqdmProgress`` and ``MetricsLogger``.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import Any, NoReturn

import raymod as rm

__all__ = ["EpochMetrics", "JobArgumentParser", "add_cluster_args", "add_output_args",
           "add_plot_arg", "connect", "contexts_from_args", "describe_workers", "fail",
           "fit_checkpointing", "fit_failed", "fraction", "kvstore_for", "limit_blas_threads",
           "output_file", "output_folder", "output_prefix", "parse_workers", "plot_location",
           "plot_path", "positive_float", "positive_int", "progress_bar", "save_curves_png",
           "workers_from_args"]

_LOG = logging.getLogger(__name__)

#: the kvstore types a job accepts (``--kvstore``)
KVSTORES = ("local", "device", "dist_sync", "dist_device_sync", "dist_async")


from raymod.cli.argtypes import (  # noqa: E402
    checkpoint_location, fraction, nonnegative_int, positive_float, positive_int)



# ---- locations: checked while the flags are parsed (one line, exit 2), before anything runs
def _writable(text: str, folder: bool) -> str:
    problem = rm.callback.location_problem(text, folder=folder)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: {problem}")
    return text


def output_file(text: str) -> str:
    """A file the job may write (``--metrics``): not a folder, and it or its nearest
    existing folder writable. Nothing is created."""
    return _writable(text, folder=False)


def output_folder(text: str) -> str:
    """A folder the job may write into (``--tensorboard``): not a file, writable or
    creatable. Nothing is created."""
    return _writable(text, folder=True)


def output_prefix(text: str) -> str:
    """A checkpoint prefix (``--checkpoint``): the folder its files go into is writable or
    creatable. Nothing is created."""
    problem = rm.callback.location_problem(os.path.dirname(os.path.abspath(text)), folder=True)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"cannot write files with prefix {text!r}: {problem}")
    return text


def plot_location(text: str) -> str:
    """``--plot``: 'none' (no plot), or a file the job may write."""
    return text if text.strip().lower() in ("", "none") else _writable(text, folder=False)


def parse_workers(text: str) -> rm.Workers | None:
    """``'N'`` or ``'MIN:MAX'`` as an ``rm.Workers``; ``'0'`` or ``'none'``: None (in process)."""
    if text.strip().lower() in ("0", "none", "0:0"):
        return None
    try:
        return rm.Workers.coerce(text.strip())
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(
            f"expected 'N' or 'MIN:MAX' with 1 <= MIN <= MAX (or 0 / none: in process), "
            f"got {text!r}") from None


#: the flags the job parsed last (``JobArgumentParser``): EpochMetrics logs them as the run's
#: MLflow parameters / TensorBoard hparams, and takes ``--mlflow`` from them
_JOB_FLAGS: dict = {}
#: EpochMetrics(mlflow=...)'s default: what the job's --mlflow flag said
_FROM_FLAGS: Any = object()


class JobArgumentParser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line: ``prog: error: message (see --help)``.

    The exit status stays argparse's 2; ``--help`` is unchanged. The parsed flags are also
    kept for :class:`EpochMetrics` (``--mlflow``, and the run's parameters).
    """

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        parsed, extras = super().parse_known_args(args, namespace)
        _JOB_FLAGS.clear()
        _JOB_FLAGS.update(vars(parsed))
        return parsed, extras


def mlflow_location(text: str) -> str:
    """``--mlflow``: a local folder for MLflow's file store (writable or creatable) or a
    tracking URI (an http(s) server must answer); MLflow must be installed. Nothing is
    created."""
    import importlib.util
    if importlib.util.find_spec("mlflow") is None:
        raise argparse.ArgumentTypeError("needs MLflow: pip install 'raymod[mlflow]'")
    from raymod.mlflow_logger import resolve_tracking_uri, tracking_problem
    problem = tracking_problem(resolve_tracking_uri(text))
    if problem is not None:
        raise argparse.ArgumentTypeError(f"cannot use {text!r}: {problem}")
    return text


class _MLflowFlag(argparse.Action):
    """``--mlflow [URI]``: checks the URI, or the default store when none is given (argparse
    does not run ``type`` on ``const``)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        try:
            setattr(namespace, self.dest, mlflow_location(values or self.const))
        except argparse.ArgumentTypeError as err:
            parser.error(f"argument {option}: {err}")


# ---- flags ----------------------------------------------------------------------------------
def add_cluster_args(parser: argparse.ArgumentParser, workers: str = "2",
                     kvstore: str = "dist_sync") -> None:
    """Add ``--workers``, ``--cpus-per-worker``, ``--gpus-per-worker``, ``--spares``,
    ``--kvstore`` and ``--address`` (an argument group "where it runs")."""
    group = parser.add_argument_group("where it runs")
    group.add_argument("--workers", type=parse_workers, default=workers,
                       metavar="MIN:MAX",
                       help="Ray worker actors, 'N' or 'MIN:MAX' (default %(default)s); "
                            "'0' or 'none' trains in this process")
    group.add_argument("--cpus-per-worker", type=positive_float, default=1.0, metavar="N",
                       help="Ray CPUs per worker, and its BLAS threads (with --workers 0: this "
                            "process's BLAS threads) (default %(default)g)")
    group.add_argument("--gpus-per-worker", type=int, default=0, metavar="N",
                       help="GPUs per worker (default %(default)s); in process, N > 0 trains "
                            "on gpu(0)..gpu(N-1)")
    group.add_argument("--spares", type=nonnegative_int, default=0, metavar="N",
                       help="workers kept started and set up, idle, that take a lost one's "
                            "place at the next step (default %(default)s)")
    group.add_argument("--start-timeout", type=positive_float, default=120.0, metavar="S",
                       help="seconds to wait for the workers to start (default %(default)g; "
                            "a loaded machine may need more)")
    group.add_argument("--kvstore", default=kvstore, type=str.lower, choices=KVSTORES,
                       help="kvstore type (default %(default)s); in process a dist type means "
                            "'local'")
    group.add_argument("--address", default=os.environ.get("RAY_ADDRESS") or None,
                       help="Ray cluster to join: 'auto' (as under ray submit) or host:port; "
                            "default $RAY_ADDRESS (set by ray job submit), else start a "
                            "loopback-only local cluster")

    class NoDashboard(argparse.Action):
        def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
            os.environ["RAYMOD_DASHBOARD"] = "0"  # what rm.cluster.init reads
            setattr(namespace, self.dest, True)

    group.add_argument("--no-dashboard", action=NoDashboard, nargs=0, default=False,
                       help="start the local Ray cluster without Ray's dashboard (about 1 GB "
                            "less memory, a faster start; no State API, no `ray list`)")


def add_output_args(parser: argparse.ArgumentParser, name: str) -> None:
    """Add ``--checkpoint PREFIX`` and ``--metrics PATH``, defaulting under ``runs/<name>/``."""
    group = parser.add_argument_group("outputs")
    # every location is checked as the flags are parsed: a bad one exits 2 before any write
    group.add_argument("--checkpoint", default=f"runs/{name}/{name}", metavar="PREFIX",
                       type=output_prefix,
                       help="checkpoint prefix: PREFIX-symbol.json, PREFIX-%%04d.params and "
                            ".states are written at the end (default %(default)s)")
    group.add_argument("--metrics", default=f"runs/{name}/metrics.jsonl", metavar="PATH",
                       type=output_file,
                       help="JSON-lines metrics, one line per epoch, appended: each run's "
                            "lines carry its own run id (raymod plot --run picks one) "
                            "(default %(default)s)")
    group.add_argument("--checkpoint-dir", default=f"runs/{name}/fit", metavar="PATH_OR_URI",
                       type=checkpoint_location,  # checked now: a bad one exits 2 at once
                       help="resumable checkpoints (parameters, optimizer state, sampler "
                            "position, ...) every epoch: a folder or a pyarrow.fs URI such as "
                            "s3://bucket/run (default %(default)s)")
    group.add_argument("--checkpoint-every", type=positive_int, default=None, metavar="STEPS",
                       help="also write a resumable checkpoint every STEPS training steps")
    group.add_argument("--resume", action="store_true",
                       help="continue from the newest checkpoint under --checkpoint-dir "
                            "(starts afresh if there is none)")
    group.add_argument("--disp-batches", type=positive_int, default=None, metavar="N",
                       help="log training speed and the metric every N batches, as MXNet's "
                            "Speedometer does (default: once per epoch only)")
    group.add_argument("--tensorboard", default=None, metavar="DIR", type=output_folder,
                       help="also write TensorBoard scalars (training and validation metrics, "
                            "learning rate, loss, samples/s, step time, worker membership) "
                            "and hparams under DIR; needs raymod[tensorboard]")
    group.add_argument("--mlflow", nargs="?", const=f"runs/{name}/mlruns", default=None,
                       metavar="URI", action=_MLflowFlag,
                       help="also record the run in MLflow (rm.callback.MLflowLogger, "
                            "experiment 'raymod'): the flags and optimizer as parameters, "
                            "batch and epoch metrics, worker membership, checkpoints as "
                            "artifacts; URI: a tracking server or a local folder (MLflow's "
                            "file store); without URI: %(const)s; needs raymod[mlflow]")


def fit_checkpointing(args: argparse.Namespace, run: str | None = None) -> dict:
    """``fit`` keyword arguments for the job's resumable checkpoints (``checkpoint=`` and
    ``resume=``); ``run`` names a sub-folder when a job fits several models."""
    path = args.checkpoint_dir
    if run is not None:  # before a URI's query: s3://bucket/dir/run?endpoint_override=...
        base, mark, query = path.partition("?") if "://" in path else (path, "", "")
        path = f"{base.rstrip('/')}/{run}{mark}{query}"
    return {"checkpoint": rm.CheckpointConfig(path, every_n_steps=args.checkpoint_every),
            "resume": args.resume}


def workers_from_args(parser: argparse.ArgumentParser,
                      args: argparse.Namespace) -> rm.Workers | None:
    """``args.workers`` with the per-worker resources applied; ``parser.error`` when invalid
    (also when ``args.batch_size`` has fewer rows than a batch has slices)."""
    if args.gpus_per_worker < 0:
        parser.error(f"argument --gpus-per-worker: must be >= 0, got {args.gpus_per_worker}")
    if args.workers is None:
        return None
    try:
        workers = dataclasses.replace(args.workers, cpus_per_worker=args.cpus_per_worker,
                                      gpus_per_worker=args.gpus_per_worker,
                                      spares=args.spares, start_timeout=args.start_timeout)
    except (TypeError, ValueError) as err:
        parser.error(str(err))
    if args.batch_size < workers.slices:
        parser.error(f"--batch-size {args.batch_size} is smaller than the {workers.slices}"
                     " slices a batch is cut into (one per worker)")
    return workers


def describe_workers(workers: rm.Workers | None) -> str:
    """Where a job trains, for its log lines and plot titles."""
    if workers is None:
        return "in process"
    if workers.max_workers > workers.min_workers:
        return f"on {workers.min_workers}..{workers.max_workers} Ray workers"
    return f"on {workers.min_workers} Ray workers"


def contexts_from_args(args: argparse.Namespace) -> list:
    """The in-process devices: ``gpu(0..N-1)`` for ``--gpus-per-worker N``, else ``cpu()``."""
    if args.workers is None and args.gpus_per_worker > 0:
        return [rm.gpu(i) for i in range(args.gpus_per_worker)]
    return [rm.cpu()]


def limit_blas_threads(threads: float) -> Any:
    """Cap this process's BLAS threads at ``threads``, as a worker's are (see ``rm.Workers``).

    For training in process. The small GEMMs of these jobs run fastest on one thread, and on
    a busy machine surplus OpenBLAS threads spin against each other (the digits job took
    6-20x longer with 2 than with 1 on a loaded 2-core box). Does nothing when
    ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS`` / ``MKL_NUM_THREADS`` is set or
    threadpoolctl (a scikit-learn dependency) is missing; returns the limiter or None.
    """
    if any(v in os.environ for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                     "MKL_NUM_THREADS")):
        return None
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return None
    return threadpool_limits(max(1, int(threads)), user_api="blas")


def kvstore_for(kvstore: str, workers: rm.Workers | None) -> str:
    """The kvstore to use: as given on workers; 'local' in place of a dist type in process."""
    if workers is None and kvstore.lower().startswith("dist"):
        return "local"
    return kvstore


def connect(workers: rm.Workers | None, address: str | None = None) -> dict | None:
    """Connect to Ray when training on workers (in process: nothing, returns None).

    ``address`` None starts a loopback-only local cluster (``rm.cluster.init()``) with at
    least the CPUs that ``workers.min_workers`` need, so that the minimum always starts on
    a small machine (the CPUs are then shared); ``'auto'`` joins the running cluster.

    Raises
    ------
    raymod.MXNetError
        When the local cluster has fewer GPUs than ``min_workers`` need (rather than
        waiting ``start_timeout`` seconds for workers that cannot start).
    """
    if workers is None:
        if address is not None:
            _LOG.warning("training in process: --address %s is not used", address)
        return None
    try:
        info = rm.cluster.init_for_workers(workers, address)
    except rm.cluster.ClusterStartError as err:
        # one line and status 2 (not Ray's 20-line traceback): what failed, what to do
        fail(f"could not start a local Ray cluster ({err.tries} "
             f"{'try' if err.tries == 1 else 'tries'}): {err.cause}; run it again, add "
             f"--no-dashboard, or join a running cluster with --address HOST:PORT", status=2)
    _LOG.info("Ray cluster %s (%s), resources %s", info["address"],
              "local" if info["local"] else "joined",
              {k: v for k, v in info["resources"].items() if k in ("CPU", "GPU")})
    if info.get("dashboard_url"):
        _LOG.info("Ray dashboard %s (with token authentication on, its page asks for the "
                  "token in ~/.ray/auth_token, and the ray CLI needs RAY_AUTH_MODE=token)",
                  info["dashboard_url"])
    if info.get("metrics_export_port"):
        _LOG.info("Ray metrics (raymod_samples_per_second, ...) at "
                  "http://127.0.0.1:%s/metrics", info["metrics_export_port"])
    return info


def log_fit_result(result: Any) -> None:
    """One summary line from what ``fit`` returned (``rm.mod.FitResult``): the epochs, the
    mean samples/s, what happened to the workers and the newest checkpoint."""
    if result is None or not result.epochs:
        return
    speeds = [r["samples_per_s"] for r in result.epochs if r.get("samples_per_s")]
    kinds: dict[str, int] = {}
    for event in result.events:
        kinds[event["event"]] = kinds.get(event["event"], 0) + 1
    membership = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "none"
    _LOG.info("fit: %d epochs, %.0f samples/s on average; membership events: %s%s",
              len(result.epochs), sum(speeds) / len(speeds) if speeds else float("nan"),
              membership, f"; last checkpoint {result.last_checkpoint}"
              if result.last_checkpoint else "")


def fit_failed(err: Exception) -> NoReturn:
    """Exit on an error out of ``fit``: status 2 when the workers never started (the
    machine or the flags are the cause: say what to change), 1 otherwise."""
    from raymod.cluster.pool import WorkersUnavailable
    if isinstance(err, WorkersUnavailable):
        fail(f"{err}; run it again with a larger --start-timeout, fewer --workers, or "
             f"--workers 0 to train in this process", status=2)
    fail(str(err))


def fail(message: str, status: int = 1) -> NoReturn:
    """Exit with ``<prog>: error: message`` on stderr (no traceback)."""
    prog = os.path.basename(sys.argv[0]) or "job"
    print(f"{prog}: error: {message}", file=sys.stderr)
    sys.exit(status)


# ---- callbacks ------------------------------------------------------------------------------
@contextlib.contextmanager
def progress_bar(batches_per_epoch: int | None = None) -> Iterator[rm.callback.TqdmProgress]:
    """A tqdm bar per epoch showing the running training metric, for the ``with`` block.

    Use the yielded ``rm.callback.TqdmProgress`` as a batch-end and an epoch-end callback.
    Inside the block, log records go through ``tqdm.write`` so that they print above the
    bar instead of onto it; the bar is closed at the end. It is drawn only when stderr is a
    terminal (tqdm's ``disable=None``), so logs of batch runs stay clean.
    """
    from tqdm.contrib.logging import logging_redirect_tqdm

    bar = rm.callback.TqdmProgress(total=batches_per_epoch, desc="Epoch", leave=False,
                                   disable=None, mininterval=0.2)
    try:
        with logging_redirect_tqdm():
            yield bar
    finally:
        bar.close()


class EpochMetrics:
    """Writes one JSON line per epoch: training and validation metrics, time and throughput.

    Lines look like ``{"event": "epoch", "run": "20250101-120000-1a2b3c", "epoch": 0,
    "time": <unix time>, "train_accuracy": 0.91, "val_accuracy": 0.95, "time_cost": 1.23,
    "samples_per_sec": 1170.2}``. Give
    :meth:`batch_end` as a ``batch_end_callback``, :meth:`epoch_end` as an
    ``epoch_end_callback`` and :meth:`eval_end` as the ``eval_end_callback`` of
    ``Module.fit``; with no validation data the line is written at the epoch's end.

    ``time_cost`` is the epoch's training time and ``samples_per_sec`` the samples trained
    over it. Train on :meth:`timed` of the training iterator to start the clock when ``fit``
    starts each pass over it (as MXNet's ``Time cost`` does: binding, initializing and
    starting workers before the first epoch are not counted); otherwise the clock starts
    at the previous epoch's line (or at construction).

    The file is only ever appended to, and only once the first epoch ends: a run that fails
    at its start leaves the lines of the runs before it as they were. Every line carries a
    ``"run"`` id (``raymod plot`` draws the newest run, or the one ``--run`` names).

    Parameters
    ----------
    path : str
        The file (parent directories are created at the first line).
    batch_size : int
        Samples per batch (the global batch on workers).
    has_validation : bool, default True
        Whether ``fit`` gets ``eval_data`` (the line then waits for :meth:`eval_end`).
    mode : {'w', 'a'}, default 'w'
        'w': a new run, with a new run id, after the lines already there (it no longer
        overwrites them); 'a': continue the file's newest run id (``--resume``, or a second
        model of the same job), or start one if the file has none.
    fields : dict, optional
        Constant fields added to every line (e.g. ``{"method": "sgd"}``).
    tensorboard : str, optional
        Also write the metrics as TensorBoard scalars in this folder
        (``rm.callback.TensorBoard``: the ``--tensorboard DIR`` flag).
    disp_batches : int, optional
        Also log a Speedometer line (samples/s and the metric) every this many batches
        (the ``--disp-batches N`` flag).
    mlflow : str, optional
        Also record the fit as an MLflow run at this tracking URI or local folder
        (``rm.callback.MLflowLogger``); default: the job's ``--mlflow`` flag, off when it was
        not given. Its parameters (and TensorBoard's hparams) are the job's flags as
        ``job.<flag>``, ``num_epoch`` (``--epochs``) and ``fields``; its epoch metrics are
        this class's lines. The run ends at :meth:`close` (``FAILED`` if ``fit`` raised),
        after the final checkpoint of ``fit(checkpoint=...)`` is logged.

    A loss-like training or validation metric (cross-entropy, MSE, ...) is also written as
    ``train_loss`` / ``val_loss``.
    """

    def __init__(self, path: str, batch_size: int, has_validation: bool = True,
                 mode: str = "w", fields: dict | None = None, tensorboard: str | None = None,
                 disp_batches: int | None = None, mlflow: Any = _FROM_FLAGS):
        if mode not in ("w", "a"):
            raise ValueError(f"EpochMetrics(mode=...) must be 'w' or 'a', got {mode!r}")
        # appended, never truncated: the lines of earlier runs are history to keep
        run_id = (rm.callback.MetricsLogger.last_run_id(path) if mode == "a" else None) or \
            rm.callback.new_run_id()
        self.run_id = run_id
        self.log = rm.callback.MetricsLogger(path, mode="a", run_id=run_id)
        params = {**_flag_params(), **(fields or {})}
        self.tensorboard = None if tensorboard is None else \
            rm.callback.TensorBoard(tensorboard, hparams=params)
        uri = _JOB_FLAGS.get("mlflow") if mlflow is _FROM_FLAGS else mlflow
        job = os.path.splitext(os.path.basename(sys.argv[0]))[0] or "job"
        self.mlflow = None if uri is None else rm.callback.MLflowLogger(
            uri, run_name="-".join([job] + ([str(fields["method"])] if fields and
                                           "method" in fields else [])),
            tags={"raymod.metrics": os.path.abspath(path), "raymod.metrics_run": run_id},
            params=params)
        # MXNet's example scripts log a Speedometer line every --disp-batches batches
        self.speedometer = (rm.callback.Speedometer(batch_size, disp_batches)
                            if disp_batches else None)
        self.batch_size = batch_size
        self.has_validation = has_validation
        self.fields = dict(fields or {})
        self._notes: dict = {}
        self.records: list[dict] = []
        self._tic = time.time()
        self._pending: dict | None = None
        self._metric: Any = None
        self._batches = 0

    def timed(self, data_iter: Any) -> Any:
        """``data_iter`` wrapped so that each pass ``fit`` starts over it starts the clock."""
        return _TimedIter(data_iter, self)

    def start(self) -> None:
        """Start the epoch's clock now."""
        self._tic = time.time()

    def batch_end(self, param: Any) -> None:
        """Batch-end callback: counts batches and keeps the training metric."""
        self._batches = param.nbatch + 1  # a padded last batch counts whole
        self._metric = param.eval_metric
        if self.tensorboard is not None:
            self.tensorboard(param)
        if self.mlflow is not None:
            self.mlflow(param)
        if self.speedometer is not None:
            self.speedometer(param)

    def epoch_end(self, epoch: int, *_: Any) -> None:
        """Epoch-end callback: closes the epoch's training time."""
        elapsed = time.time() - self._tic
        metric = self._metric
        train = metric.get_global_name_value() if metric is not None else []
        record = {f"train_{name}": value for name, value in train}
        record.update(_loss("train", train))
        record.update(time_cost=elapsed,
                      samples_per_sec=self._batches * self.batch_size / max(elapsed, 1e-9))
        self._pending = {"epoch": epoch, **record}
        if self.tensorboard is not None:
            self.tensorboard.epoch_end(epoch)
        if not self.has_validation:
            self._flush()

    def eval_end(self, param: Any) -> None:
        """Eval-end callback: adds the validation metric and writes the epoch's line."""
        if self._pending is None:
            return
        if self.tensorboard is not None:
            self.tensorboard.eval_end(param)
        if param.eval_metric is not None:
            pairs = param.eval_metric.get_name_value()
            self._pending.update({f"val_{n}": v for n, v in pairs})
            self._pending.update(_loss("val", pairs))
        self._flush()

    def note(self, **fields: Any) -> None:
        """Add fields to the current epoch's line (call before it is written, e.g. from an
        epoch-end callback listed before :meth:`epoch_end`)."""
        self._notes.update(fields)

    def _flush(self) -> None:
        record, self._pending = self._pending, None
        epoch = record.pop("epoch")
        record.update(self.fields)
        record.update(self._notes)
        self._notes = {}
        self.log.log_epoch(epoch, None, **record)
        self.records.append({"epoch": epoch, **record})
        if self.mlflow is not None:
            self.mlflow.on_epoch_record({"epoch": epoch, **record})
        self._tic = time.time()

    def close(self) -> None:
        """Close the file (and the TensorBoard event file; end the MLflow run)."""
        self.log.close()
        if self.tensorboard is not None:
            self.tensorboard.close()
        if self.mlflow is not None:
            self.mlflow.close()


def _flag_params() -> dict:
    """The job's parsed flags as run parameters: ``job.<flag>`` (numbers, text, switches;
    ``--workers`` as 'N' / 'MIN:MAX', 0 in process) and ``num_epoch`` (``--epochs``)."""
    params: dict = {}
    for name, value in _JOB_FLAGS.items():
        if name == "workers" and (value is None or hasattr(value, "min_workers")):
            value = "0" if value is None else (
                str(value.min_workers) if value.min_workers == value.max_workers
                else f"{value.min_workers}:{value.max_workers}")
        if isinstance(value, (str, bool, int, float)):
            params[f"job.{name}"] = value
    if isinstance(_JOB_FLAGS.get("epochs"), int):
        params["num_epoch"] = _JOB_FLAGS["epochs"]
    return params


def _loss(split: str, pairs: list) -> dict:
    """``{'<split>_loss': value}`` for the first loss-like metric of ``pairs`` (none: {})."""
    loss = rm.mlflow_logger.loss_of(pairs)
    return {} if loss is None or any(n == "loss" for n, _ in pairs) else {f"{split}_loss": loss}


class _TimedIter:
    """A data iterator proxy calling ``metrics.start()`` whenever iteration over it begins."""

    def __init__(self, data_iter: Any, metrics: EpochMetrics):
        self._data_iter = data_iter
        self._metrics = metrics

    def __getattr__(self, name: str) -> Any:
        return getattr(self._data_iter, name)

    def __iter__(self) -> Any:
        self._metrics.start()
        return iter(self._data_iter)


# ---- plots ----------------------------------------------------------------------------------
def add_plot_arg(parser: argparse.ArgumentParser) -> None:
    """Add ``--plot PATH``: a PNG of the training curves (default: next to ``--metrics``)."""
    parser.add_argument("--plot", default=None, metavar="PATH", type=plot_location,
                        help="PNG of the training curves (default: the --metrics path with "
                             "suffix .png; 'none': no plot); needs matplotlib "
                             "(pip install 'raymod[plot]'), skipped with a note otherwise")


def plot_path(args: argparse.Namespace) -> str | None:
    """Where ``--plot`` puts the PNG: as given, else ``--metrics`` with ``.png``; None: off."""
    if args.plot is None:
        return os.path.splitext(args.metrics)[0] + ".png"
    return None if args.plot.strip().lower() in ("", "none") else args.plot


def save_curves_png(path: str | None, curves: dict, title: str, ylabel: str,
                    xlabel: str = "epoch", log_y: bool = False) -> bool:
    """Plot ``{label: (xs, ys)}`` as lines on one axes and write the PNG ``path``.

    Returns False, after a one-line note in the log, when matplotlib is not installed (or
    when ``path`` is None); the job goes on either way.
    """
    if path is None:
        return False
    try:
        # no pyplot: no GUI backend, no global state
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
    except ImportError:
        _LOG.warning("matplotlib is not installed: no plot written "
                     "(pip install 'raymod[plot]')")
        return False
    fig = Figure(figsize=(6.4, 4.2), dpi=100, layout="constrained")
    ax = fig.subplots()
    for label, (xs, ys) in curves.items():
        ax.plot(list(xs), list(ys), marker="o", markersize=3, label=label)
    if log_y:
        ax.set_yscale("log")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    fig.savefig(path)
    return True

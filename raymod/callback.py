"""Training callbacks, as MXNet 1.x's ``mx.callback``, plus a tqdm bar and a JSON-lines log.

Batch-end callbacks receive a :class:`BatchEndParam`; epoch-end callbacks are called as
``callback(epoch, symbol, arg_params, aux_params)``. Messages go to the ``raymod.callback``
logger at INFO level; configure logging as for MXNet, e.g.
``logging.basicConfig(level=logging.INFO)``.
"""
from __future__ import annotations

import copy
import datetime
import json
import logging
import math
import os
import tempfile
import time
import uuid
from collections import namedtuple
from typing import Any, Callable, Iterable

_log = logging.getLogger(__name__)

#: what a batch-end callback gets; ``completed_at`` (``time.time()`` when the step completed,
#: which on Ray workers running ahead is earlier than the call) is raymod's, None when unknown
BatchEndParam = namedtuple("BatchEndParams", ["epoch", "nbatch", "eval_metric", "locals",
                                              "completed_at"], defaults=(None,))
BatchEndParam.__doc__ = """What a batch-end callback receives.

Fields: ``epoch`` (int, from 0), ``nbatch`` (int, batch index within the epoch, from 0),
``eval_metric`` (the training EvalMetric or None) and ``locals`` (the fit loop's locals, or
None)."""


def _period(period: int) -> int:
    return int(max(1, period))


def module_checkpoint(mod: Any, prefix: str, period: int = 1,
                      save_optimizer_states: bool = False) -> Callable:
    """Epoch-end callback saving a module's checkpoint every ``period`` epochs.

    Parameters
    ----------
    mod : BaseModule
        Module whose ``save_checkpoint(prefix, epoch, save_optimizer_states)`` is called.
    prefix : str
        Path prefix of the checkpoint files.
    period : int, default 1
        Save after every ``period``-th epoch (values below 1 mean 1).
    save_optimizer_states : bool, default False
        Also save the optimizer states.

    Returns
    -------
    callable
        ``callback(epoch, symbol=None, arg_params=None, aux_params=None)``; epoch ``e``
        (0-based) is saved as checkpoint number ``e + 1``.
    """
    period = _period(period)

    def _callback(iter_no: int, sym: Any = None, arg: Any = None, aux: Any = None) -> None:
        if (iter_no + 1) % period == 0:
            mod.save_checkpoint(prefix, iter_no + 1, save_optimizer_states)
    return _callback


def do_checkpoint(prefix: str, period: int = 1) -> Callable:
    """Epoch-end callback writing ``prefix-symbol.json`` and ``prefix-%04d.params``.

    Parameters
    ----------
    prefix : str
        Path prefix of the checkpoint files.
    period : int, default 1
        Save after every ``period``-th epoch (values below 1 mean 1).

    Returns
    -------
    callable
        ``callback(epoch, symbol, arg_params, aux_params)`` calling
        ``raymod.checkpoint.save_checkpoint(prefix, epoch + 1, symbol, arg_params,
        aux_params)``.
    """
    period = _period(period)

    def _callback(iter_no: int, sym: Any, arg: dict, aux: dict) -> None:
        if (iter_no + 1) % period == 0:
            from .checkpoint import save_checkpoint  # a higher layer; imported when used
            save_checkpoint(prefix, iter_no + 1, sym, arg, aux)
    return _callback


def log_train_metric(period: int, auto_reset: bool = False) -> Callable:
    """Batch-end callback logging the training metric every ``period`` batches.

    Parameters
    ----------
    period : int
        Log when ``nbatch % period == 0``.
    auto_reset : bool, default False
        Call ``reset_local()`` on the metric after logging it.

    Returns
    -------
    callable
        ``callback(param: BatchEndParam)``.
    """
    def _callback(param: BatchEndParam) -> None:
        if param.nbatch % period != 0 or param.eval_metric is None:
            return
        for name, value in param.eval_metric.get_name_value():
            _log.info("Iter[%d] Batch[%d] Train-%s=%f", param.epoch, param.nbatch, name, value)
        if auto_reset:
            param.eval_metric.reset_local()
    return _callback


class Speedometer:
    """Batch-end callback logging throughput and the training metric every ``frequent`` batches.

    Lines look like ``Epoch[0] Batch [50-100]\\tSpeed: 1234.56 samples/sec\\taccuracy=0.900000``.
    The first call of each epoch only starts the clock.

    Parameters
    ----------
    batch_size : int
        Samples per batch, to turn batches per second into samples per second.
    frequent : int, default 50
        Log every ``frequent`` batches.
    auto_reset : bool, default True
        Reset the metric's local statistics after each log line, so each line shows the
        value over the last ``frequent`` batches (``Batch [a-b]``) rather than since the
        start of the epoch (``Batch [0-b]``).

    Notes
    -----
    The clock is the steps' completion times (``param.completed_at``) when fit gives them:
    on Ray workers running ahead, batch-end callbacks run up to two windows after their
    steps completed, so the time between calls would measure the callbacks, not training.
    """

    def __init__(self, batch_size: int, frequent: int = 50, auto_reset: bool = True):
        self.batch_size = batch_size
        self.frequent = frequent
        self.auto_reset = auto_reset
        self.init = False
        self.tic = 0.0
        self.last_count = 0

    def __call__(self, param: BatchEndParam) -> None:
        count = param.nbatch
        if count < self.last_count:  # the batch index went back: a new epoch began
            self.init = False
        self.last_count = count
        now = _completed_at(param)
        if not self.init:
            self.init, self.tic = True, now
            return
        if count % self.frequent != 0:
            return
        elapsed = now - self.tic
        speed = self.frequent * self.batch_size / elapsed if elapsed > 0 else float("inf")
        metric = param.eval_metric
        if metric is None:
            _log.info("Iter[%d] Batch [%d]\tSpeed: %.2f samples/sec", param.epoch, count, speed)
        else:
            name_value = metric.get_name_value()
            if self.auto_reset:
                metric.reset_local()
                head = "Epoch[%d] Batch [%d-%d]\tSpeed: %.2f samples/sec"
                args = [param.epoch, count - self.frequent, count, speed]
            else:
                head = "Epoch[%d] Batch [0-%d]\tSpeed: %.2f samples/sec"
                args = [param.epoch, count, speed]
            for name, value in name_value:
                args += [name, value]
            _log.info(head + "\t%s=%f" * len(name_value), *args)
        self.tic = now


class ProgressBar:
    """Batch-end callback logging a text progress bar ``[====----] 50%``.

    Parameters
    ----------
    total : int
        Number of batches in an epoch.
    length : int, default 80
        Width of the bar in characters.
    """

    def __init__(self, total: int, length: int = 80):
        self.bar_len = length
        self.total = total

    def __call__(self, param: BatchEndParam) -> None:
        fraction = param.nbatch / float(self.total)
        filled = int(round(self.bar_len * fraction))
        bar = "=" * filled + "-" * (self.bar_len - filled)
        _log.info("[%s] %s%s\r", bar, math.ceil(100.0 * fraction), "%")


class LogValidationMetricsCallback:
    """Callback logging each validation metric as ``Epoch[e] Validation-name=value``."""

    def __call__(self, param: BatchEndParam) -> None:
        if not param.eval_metric:
            return
        for name, value in param.eval_metric.get_name_value():
            _log.info("Epoch[%d] Validation-%s=%f", param.epoch, name, value)


def _is_batch_param(args: tuple) -> bool:
    return len(args) == 1 and hasattr(args[0], "nbatch") and hasattr(args[0], "eval_metric")


class TqdmProgress:
    """Batch-end callback drawing a tqdm progress bar per epoch, metrics in its postfix.

    A new bar opens when the epoch changes (or the batch index goes back). When ``total`` is
    not given, the first epoch's bar has no total and later ones use the number of batches
    the first epoch had. Passing the object as an epoch-end callback too closes each bar
    at the end of its epoch; :meth:`close` closes the current one.

    Parameters
    ----------
    total : int, optional
        Batches per epoch.
    desc : str, default 'Epoch'
        Bar label; the epoch number is appended.
    frequent : int, default 1
        Refresh the metric postfix every ``frequent`` batches.
    **tqdm_kwargs
        Passed to ``tqdm.tqdm`` (e.g. ``file``, ``leave``, ``disable``, ``mininterval``).
    """

    def __init__(self, total: int | None = None, desc: str = "Epoch", frequent: int = 1,
                 **tqdm_kwargs: Any):
        self.total = total
        self.desc = desc
        self.frequent = _period(frequent)
        self.tqdm_kwargs = tqdm_kwargs
        self.bar = None
        self._epoch: int | None = None
        self._last = -1

    def _open(self, epoch: int) -> None:
        from tqdm import tqdm

        self.close()
        self.bar = tqdm(total=self.total, desc=f"{self.desc} {epoch}", **self.tqdm_kwargs)
        self._epoch, self._last = epoch, -1

    def __call__(self, *args: Any) -> None:
        if not _is_batch_param(args):  # used as an epoch-end callback
            self.close()
            return
        param = args[0]
        if self.bar is None or param.epoch != self._epoch or param.nbatch < self._last:
            self._open(param.epoch)
        self.bar.update(param.nbatch + 1 - self.bar.n)
        self._last = param.nbatch
        if param.eval_metric is not None and param.nbatch % self.frequent == 0:
            postfix = {str(n): f"{v:.4f}" for n, v in param.eval_metric.get_name_value()}
            self.bar.set_postfix(postfix, refresh=False)

    def close(self) -> None:
        """Close the current bar, if any."""
        if self.bar is not None:
            if self.total is None:
                self.total = self._last + 1  # learnt from the finished epoch
            self.bar.close()
            self.bar = None


def _json_value(value: Any) -> Any:
    """A JSON-safe value: numpy scalars as Python numbers, NaN and infinities as null."""
    if hasattr(value, "item") and getattr(value, "size", 1) == 1:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


_RESERVED = frozenset(("event", "epoch", "nbatch", "time", "run"))


def new_run_id() -> str:
    """A fresh run id: the UTC start time and 6 random hex digits (``20250101-120000-1a2b3c``);
    ids sort by start time."""
    now = datetime.datetime.now(datetime.timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"


def location_problem(path: str | os.PathLike, folder: bool = False) -> str | None:
    """Why ``path`` cannot be written, or None when it can.

    For a file (``folder=False``): it is not a folder, and either it exists and opens for
    appending, or a file can be made in its nearest existing ancestor folder. For a folder:
    it is not a file, and a file can be made in it or in its nearest existing ancestor.

    Nothing is created, truncated or left behind: the test is a temporary file, made and
    removed at once (``os.access`` says yes to root on read-only or virtual filesystems).

    Parameters
    ----------
    path : str or os.PathLike
        The file or folder to be written.
    folder : bool, default False
        Whether ``path`` names a folder.

    Returns
    -------
    str or None
        One line saying what is wrong, or None.
    """
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path) and not folder:
        return f"{path} is a folder, not a file"
    if os.path.exists(path) and not os.path.isdir(path):
        if folder:
            return f"{path} is a file, not a folder"
        try:
            with open(path, "a", encoding="utf-8"):
                pass  # opening to append changes nothing
        except OSError as err:
            return f"cannot write {path}: {err.strerror or _one_line(err)}"
        return None
    target = path if folder else os.path.dirname(path)
    while not os.path.exists(target) and os.path.dirname(target) != target:
        target = os.path.dirname(target)
    if not os.path.isdir(target):
        return f"{target} is a file, not a folder"
    try:
        fd, probe = tempfile.mkstemp(prefix=".raymod-probe-", dir=target)
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        return f"cannot create files in {target}: {err.strerror or _one_line(err)}"
    return None


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split()) or type(err).__name__


class MetricsLogger:
    """Writes training progress as JSON lines, one object per event, flushed on each write.

    Batch lines: ``{"event": "batch", "epoch", "nbatch", "time", "<metric>": value, ...}``;
    epoch lines: ``{"event": "epoch", "epoch", "time", "<metric>": value, ..., **extra}``;
    for a module on Ray workers, membership lines ``{"event": "membership", "kind": "join" |
    "lost" | "leave" | "start_failed" | "recovered" | "kvserver_recovered", "rank" (not for
    recoveries), "workers", ...}`` with their timings.
    ``time`` is seconds since the epoch (``time.time()``); NaN / infinite values are written
    as ``null`` so that strict JSON parsers accept every line. A metric named like a reserved
    key (event, epoch, nbatch, time, run) is written as ``metric_<name>``.

    With ``run_id``, every line also carries ``"run": run_id``: several runs appended to one
    file stay apart (``raymod plot --run``); :func:`new_run_id` makes one and
    :meth:`last_run_id` finds a file's newest (to continue it when resuming).

    The file is opened, and its folder made, at the first line, so that a run failing before
    it logs anything leaves an existing file as it was; the location is checked when the
    logger is made (:func:`location_problem`).

    Use the object as a ``batch_end_callback`` (called with a :class:`BatchEndParam`) and as
    an ``epoch_end_callback`` (called as ``(epoch, symbol, arg_params, aux_params)``, which
    writes an epoch line without metrics), or call :meth:`log_epoch` with metric values.

    Parameters
    ----------
    path : str or os.PathLike
        File to write; parent directories are created.
    mode : {'a', 'w'}, default 'a'
        Append to an existing file, or replace it (at the first line written).
    frequent : int, default 1
        Write a batch line every ``frequent`` batches.
    run_id : str, optional
        Written into every line as ``"run"``.

    Raises
    ------
    ValueError
        When ``mode`` is not 'a' or 'w', or ``path`` cannot be written (one line naming it).
    """

    def __init__(self, path: str | os.PathLike, mode: str = "a", frequent: int = 1,
                 run_id: str | None = None):
        if mode not in ("a", "w"):
            raise ValueError(f"MetricsLogger(mode=...) must be 'a' or 'w', got {mode!r}")
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise ValueError(f"MetricsLogger(run_id=...) must be None or a non-empty str, "
                             f"got {run_id!r}")
        self.path = os.fspath(path)
        problem = location_problem(self.path)
        if problem is not None:
            raise ValueError(f"MetricsLogger(path={self.path!r}): {problem}")
        self.mode = mode
        self.run_id = run_id
        self.frequent = _period(frequent)
        self._file: Any = None  # opened at the first line
        self._closed = False
        self._events_seen: dict[int, int] = {}

    @staticmethod
    def last_run_id(path: str | os.PathLike) -> str | None:
        """The ``"run"`` of the last line of ``path`` that has one (None: no such line or
        no readable file)."""
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.readlines()
        except (OSError, UnicodeDecodeError):
            return None
        for line in reversed(lines):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and isinstance(record.get("run"), str):
                return record["run"]
        return None

    def write(self, record: dict) -> None:
        """Write one JSON object as a line and flush it (``"run"`` added with ``run_id``)."""
        if self._file is None:
            if self._closed:
                raise ValueError(f"MetricsLogger({self.path!r}) is closed")
            parent = os.path.dirname(self.path)
            if parent:
                os.makedirs(parent, exist_ok=True)
            self._file = open(self.path, self.mode, encoding="utf-8")
        if self.run_id is not None and "run" not in record:
            record = {"event": record["event"], "run": self.run_id, **record} \
                if "event" in record else {"run": self.run_id, **record}
        self._file.write(json.dumps(record, allow_nan=False) + "\n")
        self._file.flush()

    @staticmethod
    def _metrics(name_values: Iterable | dict | None) -> dict:
        if name_values is None:
            return {}
        items = name_values.items() if isinstance(name_values, dict) else name_values
        return {(f"metric_{n}" if n in _RESERVED else str(n)): _json_value(v) for n, v in items}

    def __call__(self, *args: Any) -> None:
        if not _is_batch_param(args):  # epoch-end callback signature
            self.log_epoch(args[0], None)
            return
        param = args[0]
        self._write_membership(param)
        if param.nbatch % self.frequent != 0:
            return
        metric = param.eval_metric
        record = {"event": "batch", "epoch": int(param.epoch), "nbatch": int(param.nbatch),
                  "time": time.time()}
        record.update(self._metrics(metric.get_name_value() if metric is not None else None))
        self.write(record)

    def _write_membership(self, param: Any) -> None:
        """Write the worker pool's new events (joins, losses, leaves, KVServer recoveries)
        of a module on Ray workers as ``{"event": "membership", ...}`` lines."""
        module = (getattr(param, "locals", None) or {}).get("self")
        module = getattr(module, "_curr_module", module)  # a BucketingModule's current bucket
        pool = getattr(module, "_pool", None)
        if pool is None:
            return
        seen = self._events_seen.get(id(pool), 0)
        for event in pool.events[seen:]:
            self.write({"event": "membership", "epoch": int(param.epoch),
                        "nbatch": int(param.nbatch), "kind": event["event"],
                        **{k: _json_value(v) for k, v in event.items() if k != "event"}})
        self._events_seen[id(pool)] = len(pool.events)

    def log_epoch(self, epoch: int, name_values: Iterable | dict | None, **extra: Any) -> None:
        """Write an epoch line.

        Parameters
        ----------
        epoch : int
            Epoch number.
        name_values : list of (str, float), dict or None
            Metric values, e.g. ``eval_metric.get_name_value()``.
        **extra
            More fields, e.g. ``split='val'`` or ``time_cost=12.3``.
        """
        record = {"event": "epoch", "epoch": int(epoch), "time": time.time()}
        record.update(self._metrics(name_values))
        record.update({k: _json_value(v) for k, v in extra.items()})
        self.write(record)

    def close(self) -> None:
        """Close the file (a logger that wrote nothing never opened it)."""
        self._closed = True
        if self._file is not None and not self._file.closed:
            self._file.close()

    def __enter__(self) -> "MetricsLogger":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: metric names whose value is a loss (``TensorBoard`` writes it again as ``loss``)
_LOSS_NAMES = ("cross-entropy", "nll-loss", "loss", "mse", "rmse", "mae")


def _completed_at(param: BatchEndParam) -> float:
    """When the batch's step completed: fit's stamp (on workers running ahead the call comes
    later), else now."""
    return time.time() if param.completed_at is None else param.completed_at


def _module_of(param: Any) -> Any:
    """The module whose fit called a batch-end callback (a bucketing module's current one)."""
    module = (getattr(param, "locals", None) or {}).get("self")
    return getattr(module, "_curr_module", module)


class TensorBoard:
    """Writes training and validation metrics and membership events as TensorBoard scalars.

    Needs ``tensorboardX`` (``pip install raymod[tensorboard]``). One object serves as:

    - ``batch_end_callback``: every ``frequent`` batches, the training metric so far in the
      epoch as ``train_batch/<name>`` at the global batch count; for a module on Ray workers
      also the pool's new membership events (``membership/workers``: live workers after
      each event, ``membership/<kind>``: how many joins, losses, leaves, recoveries so far);
    - ``epoch_end_callback``: the epoch's training metric as ``train/<name>`` at step =
      epoch (what ``Epoch[e] Train-<name>`` logs);
    - ``eval_end_callback``: the validation metric as ``val/<name>`` at step = epoch
      (what ``Epoch[e] Validation-<name>`` logs), its loss-like value again as ``val/loss``.

    With every batch scalar also ``learning_rate`` (the optimizer's schedule at that update),
    ``loss`` (the value of the first loss-like metric: cross-entropy, NLL, a ``Loss`` metric,
    MSE, RMSE or MAE, when the metric has one), ``samples_per_s`` and ``step_time_s`` (over
    the batches since the last write), under ``train_batch/``; at each epoch's end the same
    under ``train/``, over the epoch. On Ray workers batch-end callbacks may run up to two
    run-ahead windows late; the speeds use the steps' completion times
    (``BatchEndParam.completed_at``), so they measure training, not the callbacks.

    Hyperparameters (TensorBoard's HPARAMS tab): at the first batch, the module's
    (:func:`raymod.mlflow_logger.module_params`: ``optimizer``, ``optimizer.learning_rate``
    and its other settings, ``batch_size``, ``workers``, ``module``, ...) and ``hparams``,
    as one session of this event file, with ``train/<name>``, ``val/<name>``,
    ``train/loss``, ``val/loss`` and ``train/samples_per_s`` as its metrics; :meth:`close`
    ends the session. Several runs side by side: one ``logdir`` each under a common parent.

    Parameters
    ----------
    logdir : str or os.PathLike
        Folder of the event file (created if needed); point ``tensorboard --logdir`` at it
        or at a parent.
    frequent : int, default 1
        Write batch scalars every ``frequent`` batches.
    hparams : dict, optional
        More hyperparameters (str, bool, int or float; others as their str), e.g.
        ``{"num_epoch": 10, "seed": 42}``; they win over the module's.

    Raises
    ------
    ImportError
        Without tensorboardX.
    ValueError
        When ``logdir`` cannot be written (a file in the way, a read-only place): one line
        naming it, checked before anything is created.
    """

    def __init__(self, logdir: str | os.PathLike, frequent: int = 1,
                 hparams: dict | None = None):
        try:
            from tensorboardX import SummaryWriter
        except ImportError as err:
            raise ImportError("rm.callback.TensorBoard needs tensorboardX: "
                              "pip install 'raymod[tensorboard]'") from err
        self.logdir = os.fspath(logdir)
        self.frequent = _period(frequent)
        problem = location_problem(self.logdir, folder=True)
        if problem is not None:
            raise ValueError(f"rm.callback.TensorBoard(logdir={self.logdir!r}): {problem}")
        try:
            self.writer = SummaryWriter(self.logdir)
        except OSError as err:  # raised inside tensorboardX's own handler: one line, no chain
            raise ValueError(f"rm.callback.TensorBoard(logdir={self.logdir!r}): cannot write "
                             f"there: {_one_line(err)}") from None
        self._step = 0                      # training batches seen
        self._train_metric = None
        self._events_seen: dict[int, int] = {}
        self._kinds: dict[str, int] = {}
        self._mark: tuple[float, int] | None = None    # (time, batches) at the last write
        self._epoch_mark: tuple[float, int] | None = None  # ... at the epoch's first batch
        self._last: tuple[float, int, Any] | None = None  # (time, batches, module) now
        self._schedule: Any = None  # a copy of the optimizer's lr scheduler, queried here
        self.hparams = dict(hparams or {})
        self._hparams_end: Any = None  # the session's end summary, written by close()
        self._hparams_written = False

    def __call__(self, *args: Any) -> None:
        if not _is_batch_param(args):  # epoch-end callback: (epoch, symbol, args, aux)
            self.epoch_end(args[0])
            return
        param = args[0]
        if "score_end_callback" in (param.locals or {}):  # the end of Module.score
            self.eval_end(param)
            return
        self._step += 1
        self._train_metric = param.eval_metric
        self._write_membership(param)
        now, module = _completed_at(param), _module_of(param)
        self._last = (now, self._step, module)
        if not self._hparams_written:  # the optimizer and batch are known from here on
            self._write_hparams((param.locals or {}).get("self"), param.eval_metric)
        if param.nbatch == 0 or self._epoch_mark is None:
            self._epoch_mark = (now, self._step)
        if param.nbatch % self.frequent == 0:
            if param.eval_metric is not None:
                pairs = param.eval_metric.get_name_value()
                self._write_train("train_batch", pairs, self._step)
            self._write_speed("train_batch", self._mark, self._step)
            self._mark = (now, self._step)

    def epoch_end(self, epoch: int) -> None:
        """Write the training metric of epoch ``epoch`` (as seen by the last batch), its
        learning rate, loss, samples/s and step time."""
        if self._train_metric is not None:
            self._write_train("train", self._train_metric.get_global_name_value(), int(epoch))
        self._write_speed("train", self._epoch_mark, int(epoch))
        self._epoch_mark = None
        self.writer.flush()

    def _write_hparams(self, module: Any, metric: Any) -> None:
        """Start the hparams session: the module's settings and ``hparams``, and the epoch
        scalars it is judged by."""
        from tensorboardX.summary import hparams as hparams_summaries

        from .mlflow_logger import loss_of, module_params
        self._hparams_written = True
        values = {**(module_params(module) if module is not None else {}), **self.hparams}
        values = {str(k): v if isinstance(v, (str, bool, int, float)) else str(v)
                  for k, v in values.items() if v is not None}
        pairs = metric.get_name_value() if metric is not None else []
        tags = [f"{split}/{name}" for split in ("train", "val") for name, _ in pairs]
        if loss_of(pairs) is not None:
            tags += ["train/loss", "val/loss"]
        experiment, start, self._hparams_end = hparams_summaries(
            values, dict.fromkeys(tags + ["train/samples_per_s"], 0.0))
        self.writer.file_writer.add_summary(experiment)
        self.writer.file_writer.add_summary(start)

    def _write_train(self, prefix: str, pairs: list, step: int) -> None:
        """The metric's values, its loss-like one again as ``loss``, and the learning rate."""
        from .mlflow_logger import loss_of
        for name, value in pairs:
            self.writer.add_scalar(f"{prefix}/{name}", value, step)
        loss = loss_of(pairs)
        if loss is not None:
            self.writer.add_scalar(f"{prefix}/loss", loss, step)
        lr = self._learning_rate()
        if lr is not None:
            self.writer.add_scalar(f"{prefix}/learning_rate", lr, step)

    def _write_speed(self, prefix: str, since: tuple[float, int] | None, step: int) -> None:
        """``step_time_s`` and ``samples_per_s`` over the batches from ``since`` to now."""
        if since is None or self._last is None:
            return
        now, batches, module = self._last
        steps, seconds = batches - since[1], now - since[0]
        if steps <= 0 or seconds <= 0:
            return
        self.writer.add_scalar(f"{prefix}/step_time_s", seconds / steps, step)
        batch_size = getattr(getattr(module, "_exec_group", None), "batch_size", None)
        if batch_size:
            self.writer.add_scalar(f"{prefix}/samples_per_s", batch_size * steps / seconds, step)

    def _learning_rate(self) -> float | None:
        """The learning rate of the latest update: the optimizer's schedule (a copy, so that
        asking never moves the one training uses) at the updates so far."""
        optimizer = getattr(self._last[2], "_optimizer", None) if self._last else None
        if optimizer is None:
            return None
        if optimizer.lr_scheduler is None:
            return float(optimizer.lr)
        if self._schedule is None:
            self._schedule = copy.deepcopy(optimizer.lr_scheduler)
        return float(self._schedule(optimizer.begin_num_update + self._step))

    def eval_end(self, param: Any) -> None:
        """Write the validation metric of ``param.epoch`` (its loss-like value again as
        ``val/loss``)."""
        from .mlflow_logger import loss_of
        if param.eval_metric is not None:
            pairs = param.eval_metric.get_name_value()
            for name, value in pairs:
                self.writer.add_scalar(f"val/{name}", value, int(param.epoch))
            loss = loss_of(pairs)
            if loss is not None:
                self.writer.add_scalar("val/loss", loss, int(param.epoch))
        self.writer.flush()

    def _write_membership(self, param: Any) -> None:
        pool = getattr(_module_of(param), "_pool", None)
        if pool is None:
            return
        seen = self._events_seen.get(id(pool), 0)
        for event in pool.events[seen:]:
            kind = event["event"]
            self._kinds[kind] = self._kinds.get(kind, 0) + 1
            self.writer.add_scalar(f"membership/{kind}", self._kinds[kind], self._step)
            if "workers" in event:
                self.writer.add_scalar("membership/workers", event["workers"], self._step)
        self._events_seen[id(pool)] = len(pool.events)

    def close(self) -> None:
        """End the hparams session, flush and close the event file."""
        if self._hparams_end is not None:
            self.writer.file_writer.add_summary(self._hparams_end)
            self._hparams_end = None
        self.writer.close()

    def __enter__(self) -> "TensorBoard":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---- early stopping -------------------------------------------------------------------------
#: words that make a metric "lower is better" when no mode is given (cross-entropy, val_loss,
#: perplexity, mse, ...); every other metric is "higher is better"
LOWER_IS_BETTER = ("loss", "mse", "mae", "rmse", "entropy", "perplexity", "nll")


def score_mode(key: str, mode: str | None, what: str = "mode") -> str:
    """``mode`` checked ('min' or 'max'), or inferred from ``key`` when None: 'min' for a
    loss-like name (:data:`LOWER_IS_BETTER`), else 'max'.

    Raises
    ------
    ValueError
        For any other ``mode``; the message names ``what``.
    """
    if mode is None:
        return "min" if any(word in key for word in LOWER_IS_BETTER) else "max"
    if mode not in ("min", "max"):
        raise ValueError(f"{what} must be 'min', 'max' or None (inferred from the metric's "
                         f"name), got {mode!r}")
    return mode


def score_value(record: dict, key: str) -> float | None:
    """``record[key]`` as a float; None when missing, not a number, or NaN."""
    value = record.get(key)
    if hasattr(value, "item") and getattr(value, "size", 1) == 1:
        value = value.item()  # a numpy scalar
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        return None
    return float(value)


class EarlyStopping:
    """Stop ``fit`` at an epoch's end once a metric of the epoch stops improving.

    Pass it as an ``epoch_end_callback`` (alone or in the list; its MXNet-style call does
    nothing). ``fit`` finds it there and, once per epoch, after validation, hands it the
    epoch's record (``train_<metric>``, ``val_<metric>``, ...: the keys of
    ``FitResult.epochs``). When it says stop, ``fit`` writes the epoch's checkpoint (if one
    is due; it records the reason) and ends there, in process and on Ray workers alike (the
    loop runs on the driver, with no step in flight at an epoch's end), returning its
    :class:`~raymod.module.FitResult` with ``stop_reason`` saying why.
    ``fit(resume=True)`` replays the checkpoint's epoch history into it first, so patience
    carries over a restart.

    As Lightning's and Keras' ``EarlyStopping``: an epoch improves when its value beats the
    best so far by more than ``min_delta``; after ``patience`` epochs in a row without
    improvement (0 and 1: the first), training stops. A NaN or infinite value stops at once.

    Parameters
    ----------
    monitor : str
        The record key to watch, e.g. ``'val_accuracy'`` or ``'val_cross-entropy'``; checked
        against the keys ``fit`` will write before it trains.
    patience : int, default 3
        Epochs without improvement to allow.
    min_delta : float, default 0.0
        How much a value must beat the best by to count as an improvement (>= 0).
    mode : {'min', 'max'}, optional
        Whether lower or higher is better; default: 'min' for a loss-like name (loss,
        entropy, perplexity, mse, mae, rmse, nll), else 'max'.

    Attributes
    ----------
    best, best_epoch : float, int
        The best value so far and its epoch (None before the first epoch).
    wait : int
        Epochs since the last improvement.
    stopped_epoch : int or None
        The epoch after which it stopped ``fit``.

    Examples
    --------
    >>> stop = rm.callback.EarlyStopping("val_accuracy", patience=2)
    >>> result = mod.fit(train, eval_data=val, num_epoch=50, epoch_end_callback=stop)
    >>> result.stop_reason
    'EarlyStopping: val_accuracy did not improve on 0.9417 (epoch 6) for 2 epochs'
    """

    #: its MXNet-style call ignores the parameters: fit need not read them for it
    needs_params = False

    def __init__(self, monitor: str, patience: int = 3, min_delta: float = 0.0,
                 mode: str | None = None):
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"EarlyStopping(monitor=...) must be a record key such as "
                             f"'val_accuracy', got {monitor!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise ValueError(f"EarlyStopping(patience=...) must be an int >= 0, got "
                             f"{patience!r}")
        if isinstance(min_delta, bool) or not isinstance(min_delta, (int, float)) or \
                not math.isfinite(min_delta) or min_delta < 0:
            raise ValueError(f"EarlyStopping(min_delta=...) must be a finite number >= 0, got "
                             f"{min_delta!r}")
        self.monitor = monitor
        self.patience = patience
        self.min_delta = float(min_delta)
        self.mode = score_mode(monitor, mode, "EarlyStopping(mode=...)")
        self.reset()

    def reset(self) -> None:
        """Forget every epoch seen (``fit`` calls it when it starts)."""
        self.best: float | None = None
        self.best_epoch: int | None = None
        self.wait = 0
        self.stopped_epoch: int | None = None

    def __call__(self, *args: Any) -> None:
        """As an epoch-end callback: nothing (``fit`` calls :meth:`on_epoch_record`)."""

    def on_fit_start(self, keys: Iterable[str] | None) -> None:
        """Reset, and check that ``fit`` writes the monitored key (``keys``: the record's
        keys, None when fit cannot tell)."""
        self.reset()
        if keys is not None and self.monitor not in keys:
            raise ValueError(f"EarlyStopping(monitor={self.monitor!r}): fit's epoch records "
                             f"have no such key; they have {', '.join(sorted(keys))}")

    def on_epoch_record(self, record: dict, replay: bool = False) -> str | None:
        """Take one epoch's record; the reason to stop, or None to go on.

        Parameters
        ----------
        record : dict
            The epoch's ``FitResult`` record.
        replay : bool, default False
            True for the records of a resumed run's history (no log lines).
        """
        if self.monitor not in record:
            raise ValueError(f"EarlyStopping(monitor={self.monitor!r}): the epoch record has "
                             f"no such key; it has {', '.join(sorted(record))}")
        epoch = int(record.get("epoch", -1))
        value = record[self.monitor]
        value = value.item() if hasattr(value, "item") else value
        if value is None or (isinstance(value, float) and not math.isfinite(value)):
            self.stopped_epoch = epoch
            return f"EarlyStopping: {self.monitor} is {value} at epoch {epoch}"
        value = float(value)
        better = self.best is None or (value < self.best - self.min_delta if self.mode == "min"
                                       else value > self.best + self.min_delta)
        if better:
            self.best, self.best_epoch, self.wait = value, epoch, 0
            return None
        self.wait += 1
        if self.wait < max(self.patience, 1):
            return None
        self.stopped_epoch = epoch
        delta = f" by more than {self.min_delta:g}" if self.min_delta else ""
        reason = (f"EarlyStopping: {self.monitor} did not improve{delta} on {self.best:.6g} "
                  f"(epoch {self.best_epoch}) for {self.wait} epoch"
                  f"{'s' if self.wait > 1 else ''}")
        if not replay:
            _log.info("Epoch[%d] %s: stopping", epoch, reason)
        return reason


def fit_hooks(*callbacks: Any) -> list:
    """The objects among ``fit``'s callback arguments (each None, one callable or a list)
    that take epoch records (an ``on_epoch_record`` method, e.g. :class:`EarlyStopping`),
    each once, in order."""
    found: list = []
    for group in callbacks:
        for cb in group if isinstance(group, (list, tuple)) else [group]:
            if callable(getattr(cb, "on_epoch_record", None)) and \
                    not any(cb is f for f in found):
                found.append(cb)
    return found


# re-exported here, imported last (it builds on the names above); MLflow itself loads lazily
from .mlflow_logger import MLflowLogger  # noqa: E402,F401

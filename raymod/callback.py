"""Training callbacks, as MXNet 1.x's ``mx.callback``, plus a tqdm bar and a JSON-lines log.

Batch-end callbacks receive a :class:`BatchEndParam`; epoch-end callbacks are called as
``callback(epoch, symbol, arg_params, aux_params)``. Messages go to the ``raymod.callback``
logger at INFO level; configure logging as for MXNet, e.g.
``logging.basicConfig(level=logging.INFO)``.
"""
from __future__ import annotations

import copy
import json
import logging
import math
import os
import time
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


_RESERVED = frozenset(("event", "epoch", "nbatch", "time"))


class MetricsLogger:
    """Writes training progress as JSON lines, one object per event, flushed on each write.

    Batch lines: ``{"event": "batch", "epoch", "nbatch", "time", "<metric>": value, ...}``;
    epoch lines: ``{"event": "epoch", "epoch", "time", "<metric>": value, ..., **extra}``;
    for a module on Ray workers, membership lines ``{"event": "membership", "kind": "join" |
    "lost" | "leave" | "start_failed" | "recovered" | "kvserver_recovered", "rank" (not for
    recoveries), "workers", ...}`` with their timings.
    ``time`` is seconds since the epoch (``time.time()``); NaN / infinite values are written
    as ``null`` so that strict JSON parsers accept every line. A metric named like a reserved
    key (event, epoch, nbatch, time) is written as ``metric_<name>``.

    Use the object as a ``batch_end_callback`` (called with a :class:`BatchEndParam`) and as
    an ``epoch_end_callback`` (called as ``(epoch, symbol, arg_params, aux_params)``, which
    writes an epoch line without metrics), or call :meth:`log_epoch` with metric values.

    Parameters
    ----------
    path : str or os.PathLike
        File to write; parent directories are created.
    mode : {'a', 'w'}, default 'a'
        Append to or overwrite an existing file.
    frequent : int, default 1
        Write a batch line every ``frequent`` batches.
    """

    def __init__(self, path: str | os.PathLike, mode: str = "a", frequent: int = 1):
        self.path = os.fspath(path)
        self.frequent = _period(frequent)
        parent = os.path.dirname(self.path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        self._file = open(self.path, mode, encoding="utf-8")
        self._events_seen: dict[int, int] = {}

    def write(self, record: dict) -> None:
        """Write one JSON object as a line and flush it."""
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
        """Close the file."""
        if not self._file.closed:
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
      (what ``Epoch[e] Validation-<name>`` logs).

    With every batch scalar also ``learning_rate`` (the optimizer's schedule at that update),
    ``loss`` (the value of the first loss-like metric: cross-entropy, NLL, a ``Loss`` metric,
    MSE, RMSE or MAE, when the metric has one), ``samples_per_s`` and ``step_time_s`` (over
    the batches since the last write), under ``train_batch/``; at each epoch's end the same
    under ``train/``, over the epoch. On Ray workers batch-end callbacks may run up to two
    run-ahead windows late; the speeds use the steps' completion times
    (``BatchEndParam.completed_at``), so they measure training, not the callbacks.

    Parameters
    ----------
    logdir : str or os.PathLike
        Folder of the event file (created if needed); point ``tensorboard --logdir`` at it
        or at a parent.
    frequent : int, default 1
        Write batch scalars every ``frequent`` batches.
    """

    def __init__(self, logdir: str | os.PathLike, frequent: int = 1):
        try:
            from tensorboardX import SummaryWriter
        except ImportError as err:
            raise ImportError("rm.callback.TensorBoard needs tensorboardX: "
                              "pip install 'raymod[tensorboard]'") from err
        self.logdir = os.fspath(logdir)
        self.frequent = _period(frequent)
        self.writer = SummaryWriter(self.logdir)
        self._step = 0                      # training batches seen
        self._train_metric = None
        self._events_seen: dict[int, int] = {}
        self._kinds: dict[str, int] = {}
        self._mark: tuple[float, int] | None = None    # (time, batches) at the last write
        self._epoch_mark: tuple[float, int] | None = None  # ... at the epoch's first batch
        self._last: tuple[float, int, Any] | None = None  # (time, batches, module) now
        self._schedule: Any = None  # a copy of the optimizer's lr scheduler, queried here

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

    def _write_train(self, prefix: str, pairs: list, step: int) -> None:
        """The metric's values, its loss-like one again as ``loss``, and the learning rate."""
        for name, value in pairs:
            self.writer.add_scalar(f"{prefix}/{name}", value, step)
        loss = next((v for n, v in pairs if n in _LOSS_NAMES or "loss" in n), None)
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
        """Write the validation metric of ``param.epoch``."""
        if param.eval_metric is not None:
            for name, value in param.eval_metric.get_name_value():
                self.writer.add_scalar(f"val/{name}", value, int(param.epoch))
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
        """Flush and close the event file."""
        self.writer.close()

    def __enter__(self) -> "TensorBoard":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

"""``rm.callback.MLflowLogger``: a fit's parameters, metrics, worker membership and checkpoints
as an MLflow run (``pip install 'raymod[mlflow]'``, which installs ``mlflow-skinny``).

MLflow itself is imported when a logger is made, never when raymod is, so that raymod works
without it. :func:`module_params` (what a fit's module says about its training: optimizer,
batch, workers) also gives ``rm.callback.TensorBoard`` its hparams.
"""
from __future__ import annotations

import atexit
import copy
import functools
import json
import logging
import math
import os
import posixpath
import re
import time
import urllib.error
import urllib.parse
import urllib.request
import weakref
from typing import Any, Iterable

from .callback import (_LOSS_NAMES, _is_batch_param, _json_value, _module_of, _one_line,
                       location_problem)

__all__ = ["MLflowLogger", "DEFAULT_STORE", "GIVE_UP_AFTER", "loss_of", "module_params",
           "resolve_tracking_uri", "tracking_problem"]

_log = logging.getLogger(__name__)

#: the local folder a logger writes to when neither ``tracking_uri`` nor
#: ``$MLFLOW_TRACKING_URI`` names a store (MLflow's own default location)
DEFAULT_STORE = "mlruns"

#: optimizer attributes that are counters or tables, not settings
_NOT_SETTINGS = frozenset(("num_update", "begin_num_update", "aggregate_num", "idx2name",
                           "sym_info", "param_dict", "lr_mult", "wd_mult"))
#: what MLflow accepts in a metric or parameter name (the rest becomes ``_``)
_UNSAFE = re.compile(r"[^\w\-. /]")
#: MLflow's limit on a parameter value's length
_PARAM_CHARS = 6000
#: failed calls in a row after which a run logs nothing more (but its end)
GIVE_UP_AFTER = 5


def _import_mlflow() -> Any:
    """The ``mlflow`` package, or an ImportError saying how to install it."""
    try:
        import mlflow
        import mlflow.tracking  # noqa: F401 - MlflowClient
    except ImportError as err:
        raise ImportError("rm.callback.MLflowLogger needs MLflow: pip install "
                          "'raymod[mlflow]' (mlflow-skinny)") from err
    return mlflow


def resolve_tracking_uri(tracking_uri: str | os.PathLike | None = None) -> str:
    """The tracking URI a logger uses: ``tracking_uri`` as given when it is a URI
    (``http://host:5000``, ``file:///abs/mlruns``, ``databricks``, ``sqlite:///x.db``, ...);
    a local folder (a plain path) as a ``file://`` URI; None: ``$MLFLOW_TRACKING_URI`` if
    set, else :data:`DEFAULT_STORE` in the current folder."""
    if tracking_uri is None:
        tracking_uri = os.environ.get("MLFLOW_TRACKING_URI") or DEFAULT_STORE
    text = os.fspath(tracking_uri)
    if "://" in text or text == "databricks" or re.match(r"^[a-z][a-z0-9+.-]+:", text):
        return text
    return "file://" + urllib.parse.quote(os.path.abspath(text))


def _local_folder(uri: str) -> str | None:
    """The folder of a ``file:`` tracking URI (MLflow's file store); None for other stores."""
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme != "file":
        return None
    return urllib.parse.unquote(parsed.path)


def tracking_problem(tracking_uri: str, timeout: float = 5.0) -> str | None:
    """Why ``tracking_uri`` (as :func:`resolve_tracking_uri` gives it) cannot be used, or None.

    A local store (``file:``) must be a folder that can be written or created (nothing is
    created). An ``http(s)`` server must answer within ``timeout`` seconds (any HTTP status
    counts: it was reached; ``/health`` is asked, which MLflow's server answers). Other
    schemes are not checked here: MLflow's own first call reports them.
    """
    folder = _local_folder(tracking_uri)
    if folder is not None:
        return location_problem(folder, folder=True)
    scheme = urllib.parse.urlparse(tracking_uri).scheme
    if scheme not in ("http", "https"):
        return None
    try:
        with urllib.request.urlopen(f"{tracking_uri.rstrip('/')}/health", timeout=timeout):
            return None
    except urllib.error.HTTPError:
        return None  # it answered: reached, whatever it thinks of /health
    except (urllib.error.URLError, OSError, ValueError) as err:
        reason = getattr(err, "reason", err)  # URLError wraps the socket's error
        text = _one_line(reason) if isinstance(reason, BaseException) else str(reason)
        if isinstance(reason, TimeoutError) or "timed out" in text:
            return f"no answer from {tracking_uri} within {timeout:g} s"
        return f"cannot connect to {tracking_uri}: {text}"


def _key(name: Any) -> str:
    """A metric or parameter name MLflow accepts."""
    return _UNSAFE.sub("_", str(name)) or "_"


def loss_of(pairs: Iterable[tuple[str, Any]]) -> Any:
    """The value of the first loss-like metric among ``(name, value)`` pairs (cross-entropy,
    NLL, a ``Loss`` metric, MSE, RMSE, MAE: what ``rm.callback.TensorBoard`` writes again as
    ``loss``), or None."""
    return next((v for n, v in pairs if n in _LOSS_NAMES or "loss" in n), None)


def module_params(module: Any) -> dict:
    """What a fit's module says about its training, as flat ``name: value`` pairs.

    ``module`` (its class), ``optimizer`` (the registered name) and ``optimizer.<setting>``
    for each of its settings (``optimizer.learning_rate``, ``optimizer.momentum``,
    ``optimizer.wd``, ``optimizer.lr_scheduler`` as its class, ...), ``batch_size`` (the
    global batch), ``kvstore``, and ``workers``: ``'0'`` in process, else ``'N'`` or
    ``'MIN:MAX'`` with ``workers.cpus_per_worker`` / ``workers.gpus_per_worker`` /
    ``workers.spares``. What the module does not have yet (before ``init_optimizer``) is
    left out. Values are str, int, float or bool.
    """
    inner = getattr(module, "_curr_module", module)  # a bucketing module's current one
    params: dict = {"module": type(module).__name__}
    optimizer = getattr(inner, "_optimizer", None)
    if optimizer is not None:
        params["optimizer"] = type(optimizer).__name__.lower()
        for name, value in sorted(vars(optimizer).items()):
            if name.startswith("_") or name in _NOT_SETTINGS or value is None:
                continue
            name = "learning_rate" if name == "lr" else name
            if name == "lr_scheduler":
                value = type(value).__name__
            if isinstance(value, (str, bool, int, float)) and \
                    not (isinstance(value, float) and math.isinf(value)):
                params[f"optimizer.{name}"] = value
    batch = getattr(getattr(inner, "_exec_group", None), "batch_size", None)
    if isinstance(batch, int):
        params["batch_size"] = batch
    kvstore = getattr(getattr(inner, "_kvstore", None), "type", None)
    if isinstance(kvstore, str):
        params["kvstore"] = kvstore
    workers = getattr(module, "_workers", None)
    if workers is None:
        params["workers"] = "0"  # a str as on workers: one type across runs (TensorBoard)
    elif hasattr(workers, "min_workers"):
        low, high = workers.min_workers, workers.max_workers
        params["workers"] = str(low) if low == high else f"{low}:{high}"
        for name in ("cpus_per_worker", "gpus_per_worker", "spares"):
            params[f"workers.{name}"] = getattr(workers, name)
    return params


def _number(value: Any) -> float | None:
    """A record value as a float when it is a number (not a bool), else None; NaN stays NaN
    (MLflow keeps it: a diverged loss is worth seeing)."""
    if hasattr(value, "item") and getattr(value, "size", 1) == 1:
        value = value.item()  # a numpy scalar
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _end_at_exit(ref: weakref.ref) -> None:
    """End a logger's run still open when the interpreter exits."""
    logger = ref()
    if logger is not None:
        logger.on_fit_end()


class MLflowLogger:
    """Records each ``fit`` as an MLflow run: parameters, metrics, membership, checkpoints.

    Pass it as a ``batch_end_callback`` (alone or in the list); ``fit`` then also hands it
    each epoch's record (its ``on_fit_start`` / ``on_epoch_record`` hooks, as for
    :class:`~raymod.callback.EarlyStopping`). It runs on the driver, in process and for a
    module on Ray workers alike. Per ``fit``:

    - **run**: one run in ``experiment`` (created if missing), started when ``fit`` starts
      (before it binds or starts workers: a store that cannot be reached fails it there)
      and ended when ``fit`` ends (its ``on_fit_end`` hook): ``FINISHED``, or ``FAILED``
      when ``fit`` raised (``KILLED`` for an interrupt). A run a ``fit`` started without
      reaching its end (it failed while binding) ends at :meth:`close` / the ``with``
      block's end, the next ``fit``, or the interpreter's exit. The final checkpoint is
      logged at the end.
    - **parameters**, once: ``params`` given here, then :func:`module_params` at the first
      batch (``module``, ``optimizer``, ``optimizer.learning_rate``, ...,
      ``batch_size``, ``kvstore``, ``workers``).
    - **per batch** (every ``frequent``, step = the global step, 1 after the first batch):
      ``batch/<metric>`` (the training metric so far in the epoch), ``batch/loss`` (its
      loss-like value, :func:`loss_of`), ``batch/learning_rate``.
    - **per epoch** (step = the epoch): every number of the epoch's record under its key,
      ``train_<metric>``, ``val_<metric>``, ``steps``, ``samples``, ``seconds``,
      ``samples_per_s``; ``train_loss`` / ``val_loss`` for a loss-like metric;
      ``learning_rate``.
    - **membership** (on Ray workers): ``workers`` (live workers after each event) and
      ``membership/<kind>`` (joins, losses, leaves, recoveries so far) at the global step,
      and the events as a ``membership.jsonl`` artifact (one JSON object a line: ``kind``,
      ``epoch``, ``nbatch``, ``step`` and the pool's fields).
    - **checkpoints** (``fit(checkpoint=...)``): the files of each epoch's checkpoint folder
      as artifacts under ``checkpoints/<folder name>``, logged once written (at the next
      batch or epoch record; the last one when the run ends) and tagged
      ``checkpoint.last``; a checkpoint in an object store (``s3://...``) is tagged
      ``checkpoint.<folder name>`` with its URI instead of being copied.
    - **tags**: ``tags`` given here, MLflow's source and user tags, ``raymod.version``;
      ``stop_reason`` (an early stop) and ``error`` (the exception's first line) at the end.

    Errors: a store that cannot be reached or written fails when the logger is made (a
    local folder) or when ``fit`` starts (a server), with one ``ValueError`` line naming
    ``MLflowLogger(tracking_uri=...)``, what was expected and what happened. Once training
    runs, a failing call to the store does not stop it: each kind of failure is logged as a
    warning (the first time, and a count at the end), so gaps in the run are never silent;
    after :data:`GIVE_UP_AFTER` failures in a row the run logs nothing more but its end, so
    that a server gone for good does not hold every step for MLflow's HTTP retries.

    Parameters
    ----------
    tracking_uri : str or os.PathLike, optional
        Where runs go: a local folder (a plain path or ``file://`` URI: MLflow's file store;
        read it back with ``MlflowClient(tracking_uri)`` or ``mlflow ui
        --backend-store-uri ...``), or any MLflow tracking URI (``http://host:5000``,
        ``databricks``, ``sqlite:///mlflow.db`` with the full ``mlflow``). Default:
        ``$MLFLOW_TRACKING_URI``, else ``./mlruns`` (:data:`DEFAULT_STORE`). MLflow 3.x
        refuses its file store unless ``MLFLOW_ALLOW_FILE_STORE`` is true: for a local
        folder the logger sets it for this process when it is unset (set it to false to
        refuse).
    experiment : str, default 'raymod'
        The experiment's name.
    run_name : str, optional
        The run's name (MLflow makes one up when None).
    tags : dict, optional
        More run tags.
    params : dict, optional
        More run parameters (e.g. a job's flags, ``num_epoch``); they win over the module's.
    frequent : int, default 1
        Log batch metrics every ``frequent`` batches.
    log_checkpoints : bool or 'last', default True
        Log every epoch's checkpoint as artifacts, only the last one, or none.

    Raises
    ------
    ImportError
        Without MLflow.
    ValueError
        For a bad argument, or a local store that cannot be written (one line).

    Examples
    --------
    >>> with rm.callback.MLflowLogger("runs/mlruns", params={"num_epoch": 10}) as mlf:
    ...     mod.fit(train, eval_data=val, num_epoch=10, batch_end_callback=mlf,
    ...             checkpoint="runs/fit")
    >>> MlflowClient("runs/mlruns").get_metric_history(mlf.run_id, "val_accuracy")
    """

    #: as an epoch-end callback it ignores the parameters (the epoch's record comes to the
    #: hook): fit need not read them from the workers for it
    needs_params = False

    def __init__(self, tracking_uri: str | os.PathLike | None = None,
                 experiment: str = "raymod", run_name: str | None = None,
                 tags: dict | None = None, params: dict | None = None, frequent: int = 1,
                 log_checkpoints: bool | str = True):
        if not isinstance(experiment, str) or not experiment.strip():
            raise ValueError(f"MLflowLogger(experiment=...) must be a non-empty str, got "
                             f"{experiment!r}")
        if log_checkpoints not in (True, False, "last"):
            raise ValueError(f"MLflowLogger(log_checkpoints=...) must be True, False or "
                             f"'last', got {log_checkpoints!r}")
        if isinstance(frequent, bool) or not isinstance(frequent, int) or frequent < 1:
            raise ValueError(f"MLflowLogger(frequent=...) must be an int >= 1, got "
                             f"{frequent!r}")
        self._mlflow = _import_mlflow()
        self.tracking_uri = resolve_tracking_uri(tracking_uri)
        folder = _local_folder(self.tracking_uri)
        if folder is not None:  # a local store: checked now, as the other loggers' files
            problem = tracking_problem(self.tracking_uri)
            if problem is not None:
                raise ValueError(f"MLflowLogger(tracking_uri={self.tracking_uri!r}): expected "
                                 f"a folder it can write, got: {problem}")
            # MLflow 3.x keeps its file store (the one a skinny install can write locally)
            # behind this switch; the user asked for a local folder, so opt in
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        self.experiment = experiment
        self.run_name = run_name
        self.tags = {str(k): str(v) for k, v in (tags or {}).items()}
        self.params = dict(params or {})
        self.frequent = frequent
        self.log_checkpoints = log_checkpoints
        #: the current (or last) run's id; None before the first fit
        self.run_id: str | None = None
        self._client: Any = None
        self._open = False
        self._events_seen: dict[int, int] = {}  # pool id -> events logged (across fits)
        self._reset_run()

    def _reset_run(self) -> None:
        """Forget what belongs to one run."""
        self._module: Any = None
        self._fit_result: Any = None
        self._params_logged = False
        self._batches = 0
        self._kinds: dict[str, int] = {}
        self._membership: list[dict] = []
        self._checkpoints: set[str] = set()
        self._failures: dict[str, int] = {}
        self._failed_in_row = 0
        self._at_exit: Any = None

    # ---- the run's life -------------------------------------------------------------------
    def _where(self) -> str:
        return f"MLflowLogger(tracking_uri={self.tracking_uri!r}, experiment={self.experiment!r})"

    def _start(self) -> None:
        """Start a run (ending one still open); raises ValueError, one line, when the store
        cannot be reached or refuses."""
        if self._open:
            self.on_fit_end()
        self._reset_run()
        problem = tracking_problem(self.tracking_uri)
        if problem is not None:
            raise ValueError(f"{self._where()}: expected a reachable MLflow tracking store, "
                             f"got: {problem}")
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient
        try:
            client = MlflowClient(self.tracking_uri)
            experiment = client.get_experiment_by_name(self.experiment)
            if experiment is None:
                try:
                    experiment_id = client.create_experiment(self.experiment)
                except self._mlflow.exceptions.MlflowException:  # made meanwhile elsewhere
                    experiment_id = client.get_experiment_by_name(self.experiment).experiment_id
            elif experiment.lifecycle_stage != "active":
                raise ValueError(f"experiment {self.experiment!r} is deleted (restore it, or "
                                 f"name another)")
            else:
                experiment_id = experiment.experiment_id
            run = client.create_run(experiment_id, run_name=self.run_name,
                                    tags=self._run_tags())
            params = [Param(_key(k), str(v)[:_PARAM_CHARS]) for k, v in self.params.items()
                      if v is not None]
            for first in range(0, len(params), 100):  # MLflow takes 100 a call
                client.log_batch(run.info.run_id, params=params[first:first + 100])
        except Exception as err:  # noqa: BLE001 - the store's own errors: one line, no chain
            raise ValueError(f"{self._where()}: expected a tracking store that takes a new "
                             f"run, got: {_one_line(err)[:500]}") from None
        self._client, self.run_id, self._open = client, run.info.run_id, True
        self._at_exit = functools.partial(_end_at_exit, weakref.ref(self))
        atexit.register(self._at_exit)
        _log.info("MLflow run %s (%s) in experiment %r at %s", self.run_id,
                  run.info.run_name, self.experiment, self.tracking_uri)

    def _run_tags(self) -> dict:
        """MLflow's context tags (user, source), raymod's version and the given tags."""
        from . import __version__
        tags = {"raymod.version": __version__, **self.tags}
        try:  # what mlflow.start_run adds: mlflow.user, mlflow.source.name/type, git commit
            from mlflow.tracking.context.registry import resolve_tags
            return resolve_tags(tags)
        except Exception:  # noqa: BLE001 - an internal module moved: the plain tags still do
            return tags

    def on_fit_start(self, keys: Iterable[str] | None = None) -> None:
        """``fit`` starts: start a run (``keys``, the epoch records' keys, are not needed).

        Raises
        ------
        ValueError
            When the store cannot be reached or takes no run (one line).
        """
        self._start()

    def on_fit_end(self, result: Any = None, error: BaseException | None = None) -> None:
        """End the run: log the checkpoints not logged yet (the final one among them), the
        stop reason, and mark it ``FINISHED``, or ``FAILED`` / ``KILLED`` when the fit (or
        ``error``) failed. ``result``: what ``fit`` returned (default: the result the fit
        was building, as the logger saw it). Nothing happens when no run is open."""
        if not self._open:
            return
        result = result if result is not None else self._fit_result
        error = error if error is not None else getattr(result, "error", None)
        if result is not None:
            self._fit_result = result
            self._log_new_checkpoints(final=True)
            if getattr(result, "stop_reason", None):
                self._safely("tag", self._client.set_tag, self.run_id, "stop_reason",
                             str(result.stop_reason)[:5000])
        if error is not None:
            self._safely("tag", self._client.set_tag, self.run_id, "error",
                         f"{type(error).__name__}: {_one_line(error)}"[:5000])
        status = "FINISHED" if error is None else \
            "KILLED" if isinstance(error, (KeyboardInterrupt, SystemExit)) else "FAILED"
        self._safely("end", self._client.set_terminated, self.run_id, status)
        if self._failures:
            lost = ", ".join(f"{n} call{'s' if n > 1 else ''} to {what}"
                             for what, n in sorted(self._failures.items()))
            _log.warning("MLflowLogger: run %s at %s is incomplete: %s lost (failed or "
                         "skipped)", self.run_id, self.tracking_uri, lost)
        if self._at_exit is not None:
            atexit.unregister(self._at_exit)
        self._open = False
        self._reset_run()

    def close(self) -> None:
        """End the open run, if any (:meth:`on_fit_end`)."""
        self.on_fit_end()

    def __enter__(self) -> "MLflowLogger":
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self.on_fit_end(error=exc)

    def _safely(self, what: str, call: Any, *args: Any, **kwargs: Any) -> Any:
        """``call(*args)``; a failure is a warning (the first of each kind), not an error:
        training goes on. After :data:`GIVE_UP_AFTER` failures in a row the run's calls
        are skipped (counted as failed) but for its end: a server gone for good would
        otherwise hold every step for MLflow's retries."""
        if self._failed_in_row >= GIVE_UP_AFTER and what != "end":
            self._failures[what] = self._failures.get(what, 0) + 1
            return None
        try:
            result = call(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - the store failing mid-run: say so, go on
            if what not in self._failures:
                _log.warning("MLflowLogger: logging %s to %s failed, training goes on: %s",
                             what, self.tracking_uri, _one_line(err)[:500])
            self._failures[what] = self._failures.get(what, 0) + 1
            self._failed_in_row += 1
            if self._failed_in_row == GIVE_UP_AFTER:
                _log.warning("MLflowLogger: %d calls in a row to %s failed: run %s logs "
                             "nothing more", GIVE_UP_AFTER, self.tracking_uri, self.run_id)
            return None
        self._failed_in_row = 0
        return result

    def _log(self, what: str, metrics: dict, step: int, when: float | None = None) -> None:
        """Log ``{name: value}`` at ``step`` in one call (values that are not numbers are
        left out)."""
        from mlflow.entities import Metric
        stamp = int((time.time() if when is None else when) * 1000)
        batch = [Metric(_key(k), v, stamp, int(step)) for k, v in
                 ((k, _number(v)) for k, v in metrics.items()) if v is not None]
        if batch and self._open:
            self._safely(what, self._client.log_batch, self.run_id, metrics=batch)

    # ---- callbacks and hooks --------------------------------------------------------------
    def __call__(self, *args: Any) -> None:
        if not _is_batch_param(args):  # epoch-end callback: the record comes to the hook
            return
        param = args[0]
        if "score_end_callback" in (param.locals or {}):  # validation: in the record
            return
        self._batch_end(param)

    def on_epoch_record(self, record: dict, replay: bool = False) -> None:
        """Log an epoch's record at step = its epoch (a resumed fit's earlier epochs too, so
        that the new run's curves start at epoch 0); never stops ``fit``."""
        if not self._open:
            self._start()  # a record without fit's start hook (e.g. handed on by a wrapper)
        epoch = int(record.get("epoch", 0))
        metrics = {k: v for k, v in record.items() if k not in ("epoch", "checkpoint")}
        for split in ("train", "val"):
            loss = loss_of((k[len(split) + 1:], v) for k, v in record.items()
                           if k.startswith(f"{split}_"))
            if loss is not None and f"{split}_loss" not in record:
                metrics[f"{split}_loss"] = loss
        if not replay:
            lr = self._learning_rate()
            if lr is not None:
                metrics["learning_rate"] = lr
        self._log("epoch metrics", metrics, epoch)
        if not replay:
            self._log_new_checkpoints()
        return None

    def _batch_end(self, param: Any) -> None:
        module = (param.locals or {}).get("self")
        fit_result = getattr(module, "_fit_result", None)
        if self._open and fit_result is not None and self._fit_result is not None and \
                fit_result is not self._fit_result:
            self._start()  # another fit, without the start hook: its own run
        if not self._open:
            self._start()
        if self._fit_result is None:
            self._module, self._fit_result = module, fit_result
        if not self._params_logged:
            self._params_logged = True
            self._log_params(module)
        self._batches += 1
        step = getattr(module, "_global_step", None)
        step = step if isinstance(step, int) and step > 0 else self._batches
        self._log_membership(param, step)
        if param.nbatch % self.frequent == 0 and param.eval_metric is not None:
            pairs = param.eval_metric.get_name_value()
            metrics = {f"batch/{name}": value for name, value in pairs}
            loss = loss_of(pairs)
            if loss is not None:
                metrics["batch/loss"] = loss
            lr = self._learning_rate(step)
            if lr is not None:
                metrics["batch/learning_rate"] = lr
            self._log("batch metrics", metrics, step, param.completed_at)
        self._log_new_checkpoints()

    def _log_params(self, module: Any) -> None:
        from mlflow.entities import Param
        given = {_key(k) for k in self.params}
        params = [Param(_key(k), str(v)[:_PARAM_CHARS])
                  for k, v in module_params(module).items() if _key(k) not in given]
        for first in range(0, len(params), 100):
            self._safely("parameters", self._client.log_batch, self.run_id,
                         params=params[first:first + 100])

    def _learning_rate(self, step: int | None = None) -> float | None:
        """The learning rate at update ``step`` (default: the module's global step): a copy
        of the optimizer's schedule is asked, so that the one training uses never moves."""
        module = getattr(self._module, "_curr_module", self._module)
        optimizer = getattr(module, "_optimizer", None)
        if optimizer is None:
            return None
        if optimizer.lr_scheduler is None:
            return float(optimizer.lr)
        step = step if step is not None else getattr(self._module, "_global_step", 0)
        return float(copy.deepcopy(optimizer.lr_scheduler)(max(int(step), 1)))

    def _log_membership(self, param: Any, step: int) -> None:
        """The worker pool's new events: ``workers``, ``membership/<kind>``, and the
        ``membership.jsonl`` artifact rewritten with every event of the run."""
        pool = getattr(_module_of(param), "_pool", None)
        if pool is None:
            return
        seen = self._events_seen.get(id(pool), 0)
        new = pool.events[seen:]
        self._events_seen[id(pool)] = seen + len(new)
        if not new:
            return
        for event in new:
            kind = str(event.get("event"))
            self._kinds[kind] = self._kinds.get(kind, 0) + 1
            metrics = {f"membership/{kind}": self._kinds[kind]}
            if "workers" in event:
                metrics["workers"] = event["workers"]
            self._log("membership", metrics, step, event.get("time"))
            self._membership.append({"kind": kind, "epoch": int(param.epoch),
                                     "nbatch": int(param.nbatch), "step": step,
                                     **{k: _json_value(v) for k, v in event.items()
                                        if k != "event"}})
        text = "".join(json.dumps(e, default=str) + "\n" for e in self._membership)
        self._safely("membership", self._client.log_text, self.run_id, text,
                     "membership.jsonl")

    def _log_new_checkpoints(self, final: bool = False) -> None:
        """Log the checkpoint folders the fit's epoch records name (and, ``final``, its last
        checkpoint) that are not logged yet."""
        if self.log_checkpoints is False or self._fit_result is None or not self._open:
            return
        if self.log_checkpoints == "last" and not final:
            return
        result = self._fit_result
        folders = [str(r["checkpoint"]) for r in result.epochs if r.get("checkpoint")]
        if final and result.last_checkpoint:
            folders.append(str(result.last_checkpoint))
        if self.log_checkpoints == "last":
            folders = folders[-1:]
        for folder in folders:
            if folder not in self._checkpoints:
                self._checkpoints.add(folder)
                self._log_checkpoint(folder)

    def _log_checkpoint(self, folder: str) -> None:
        """One checkpoint folder: its files as artifacts when local, else its URI as a tag."""
        name = posixpath.basename(folder.rstrip("/"))
        checkpointer = getattr(self._module, "_checkpointer", None)
        fs = getattr(checkpointer, "fs", None)
        local = os.path.isdir(folder) if fs is None else type(fs).__name__ == "LocalFileSystem"
        if local:
            if not os.path.isdir(folder):
                _log.warning("MLflowLogger: checkpoint %s was deleted (CheckpointConfig(keep="
                             "...)) before it could be logged", folder)
                return
            self._safely("checkpoints", self._client.log_artifacts, self.run_id, folder,
                         f"checkpoints/{name}")
            where = folder
        else:  # an object store: pointing at it beats copying it through this process
            base = str(getattr(checkpointer.config, "path", "")).partition("?")[0]
            where = f"{base.rstrip('/')}/{name}" if "://" in base else folder
            self._safely("tag", self._client.set_tag, self.run_id, f"checkpoint.{name}", where)
        self._safely("tag", self._client.set_tag, self.run_id, "checkpoint.last", where)


"""``BaseModule``: the training API every module shares (``fit``, ``score``, ``predict``).

The loops here call only a module's primitives (``bind``, ``init_params``,
``init_optimizer``, ``forward``, ``backward``, ``update``, ``update_metric``, ``prepare``).
``fit`` is a short table of contents over named hooks (``_fit_setup``,
``_fit_begin_epoch``, ``_fit_epoch``, ``_fit_batch``, ``_fit_end_epoch``,
``_fit_evaluate``) that variants such as BucketingModule and SVRGModule override.
"""
from __future__ import annotations

import functools
import inspect
import logging
import time
import warnings
from typing import Any, Callable, Iterator

import numpy as np

from .. import metric as _metric
from ..array_view import show
from ..base import as_logger, bytes_via_file, check_int, file_from_bytes
from ..callback import BatchEndParam, fit_hooks
from ..checkpoint import params_dict, split_params
from ..cluster import moments
from ..initializer import Uniform
from ..io import DataBatch, DataDesc, DataIter
from ..model import _check_kvstore_arg
from .. import ndarray_io
from ..optimizer import Optimizer, get_array_module
from ..optimizer.optimizer import _REGISTRY as _OPT_REGISTRY
from ..symbol import Symbol
from .fit_checkpoint import CheckpointConfig, FitCheckpointer, json_record, restore_random
from .fit_result import FitResult
from .lifecycle import Stage
from .placement import note_own_executors

__all__ = ["BaseModule"]


def _as_list(obj: Any) -> list:
    """``obj`` as a list: None -> [], a list stays, anything else is wrapped."""
    if obj is None:
        return []
    return list(obj) if isinstance(obj, (list, tuple)) else [obj]


def _check_optimizer_arg(optimizer: Any) -> None:
    """TypeError/ValueError for an optimizer argument no optimizer can be made from."""
    if isinstance(optimizer, Optimizer):
        return
    if not isinstance(optimizer, str):
        raise TypeError(f"optimizer must be an Optimizer or a registered name, got "
                        f"{type(optimizer).__name__}")
    if optimizer not in _OPT_REGISTRY:
        raise ValueError(f"unknown optimizer {optimizer!r}; known optimizers: "
                         f"{', '.join(_OPT_REGISTRY.names())}")


def _check_epochs(begin_epoch: Any, num_epoch: Any) -> None:
    """``fit``'s epoch range: ints with ``0 <= begin_epoch <= num_epoch`` (MXNet asserts only
    that num_epoch is given; a negative or reversed range would silently train nothing)."""
    if num_epoch is None:
        raise ValueError("fit needs num_epoch: the epoch to stop before")
    check_int("fit", "num_epoch", num_epoch, 0)
    check_int("fit", "begin_epoch", begin_epoch, 0)
    if begin_epoch > num_epoch:
        raise ValueError(f"fit: begin_epoch must be <= num_epoch (the epoch to stop before), "
                         f"got begin_epoch={begin_epoch} and num_epoch={num_epoch}")


def _concat(arrays: list) -> Any:
    """Concatenate along axis 0 with the arrays' own module (numpy or cupy)."""
    return get_array_module(arrays[0]).concatenate(arrays, axis=0)


def _strip_pad(outputs: list, pad: int | None, copy: bool) -> list:
    """Outputs without their last ``pad`` rows (the iterator's filler)."""
    pad = pad or 0
    stripped = [out[0:out.shape[0] - pad] for out in outputs]
    return [s.copy() for s in stripped] if copy else stripped


#: a fit cursor's sampler state once an epoch's steps are done: the next epoch's, after reset
_NEXT_EPOCH = "next epoch"
_NOT_INPUT_SUFFIXES = ("_weight", "_bias", "_gamma", "_beta")


def _check_input_names(symbol: Symbol, names: list, typename: str, throw: bool) -> None:
    """ValueError (or a warning) for names that are not arguments of ``symbol``."""
    args = symbol.list_arguments()
    for name in names:
        if name in args:
            continue
        candidates = [a for a in args if not a.endswith(_NOT_INPUT_SUFFIXES)]
        msg = (f"Module(..., {typename}_names={names}): {name!r} is not an argument of the "
               f"symbol; inputs it has: {', '.join(candidates) or '(none)'}")
        if throw:
            raise ValueError(msg)
        warnings.warn(msg, stacklevel=3)


def _as_desc(item: Any, kind: str) -> DataDesc:
    """A DataDesc from a DataDesc or a ``(name, shape[, dtype[, layout]])`` sequence."""
    if isinstance(item, (str, bytes)) or not hasattr(item, "__len__") or \
            not 2 <= len(item) <= 4:
        raise TypeError(f"{kind}_shapes entries must be DataDesc or (name, shape) pairs, "
                        f"got {item!r}")
    shape = item[1]
    if not isinstance(shape, (tuple, list)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
        raise TypeError(f"{kind}_shapes: the shape of {item[0]!r} must be a tuple of ints, "
                        f"got {type(shape).__name__} {shape!r}")
    return item if isinstance(item, DataDesc) else DataDesc(*item)


def _parse_data_desc(data_names: list, label_names: list, data_shapes: Any,
                     label_shapes: Any) -> tuple[list, list | None]:
    """Validated DataDesc lists; data names must match ``data_names`` exactly."""
    if data_shapes is None or isinstance(data_shapes, (str, DataDesc)):
        raise TypeError(f"data_shapes must be a list of DataDesc or (name, shape) pairs, "
                        f"got {data_shapes!r}")
    data = [_as_desc(d, "data") for d in data_shapes]
    if sorted(d.name for d in data) != sorted(data_names):
        raise ValueError(f"data_shapes provide {[d.name for d in data]} but the module's "
                         f"data_names are {list(data_names)}")
    labels = None if label_shapes is None else [_as_desc(d, "label") for d in label_shapes]
    provided = [d.name for d in labels or []]
    if sorted(provided) != sorted(label_names):
        warnings.warn(f"label_shapes provide {provided} but the module's label_names are "
                      f"{list(label_names)}", stacklevel=3)
    return data, labels


class BaseModule:
    """The interface of a module: a network plus everything needed to train and run it.

    A module moves through four stages (see :class:`~raymod.module.lifecycle.Stage`):
    created, bound (executors allocated: ``bind``), parameters initialized
    (``init_params``/``set_params``), optimizer installed (``init_optimizer``). Methods
    that need a later stage raise an error naming the missing call. The MXNet flags
    ``binded``, ``params_initialized`` and ``optimizer_initialized`` read the stage.

    Parameters
    ----------
    logger : Logger, default logging
        Where ``fit`` writes its progress lines.
    """

    def __init__(self, logger: Any = logging):
        self.logger = as_logger(logger)
        self._stage = Stage.CREATED
        self._optimizer_unbound = False  # an optimizer kept while unbound (MXNet's _reset_bind)
        self.for_training = False
        self.inputs_need_grad = False
        self._symbol = None
        self._total_exec_bytes = 0
        self._checkpointer: FitCheckpointer | None = None
        self._fit_cursor: tuple | None = None  # (epoch, nbatch, sampler state) of this batch
        self._global_step = 0
        self._fit_result: FitResult | None = None  # the running fit's, for its checkpoints
        self._fit_history: list[dict] = []  # epoch records of a resumed run, before this fit
        self._fit_stop_reason: str | None = None
        # under rm.mod.default_workers: a user class on BaseModule itself cannot follow it
        note_own_executors(self)

    # ---- lifecycle --------------------------------------------------------------------------
    # MXNet's three flags read the stage. Subclasses written against MXNet (their own
    # ``bind``, ``init_params``, ``_reset_bind``) also assign them; each assignment moves the
    # stage the way the flag's meaning says, so raymod's stage checks follow.
    @property
    def binded(self) -> bool:
        """Whether ``bind`` has made the executors (MXNet's flag)."""
        return self._stage.binded

    @binded.setter
    def binded(self, value: bool) -> None:
        if value:
            self._stage = self._stage.after_bind()
            if self._optimizer_unbound and self._stage is Stage.PARAMS_READY:
                self._stage = Stage.OPTIMIZER_READY  # MXNet keeps the optimizer over a rebind
            self._optimizer_unbound = False
        elif self._stage.binded:
            self._optimizer_unbound = self._stage.optimizer_initialized
            self._stage = (Stage.PARAMS_LOADED if self._stage.params_initialized
                           else Stage.CREATED)

    @property
    def params_initialized(self) -> bool:
        """Whether parameter values exist (MXNet's flag)."""
        return self._stage.params_initialized

    @params_initialized.setter
    def params_initialized(self, value: bool) -> None:
        if value:
            self._stage = self._stage.after_params()
        elif self._stage.params_initialized:
            self._stage = Stage.BOUND if self._stage.binded else Stage.CREATED
            self._optimizer_unbound = False

    @property
    def optimizer_initialized(self) -> bool:
        """Whether an optimizer is installed (MXNet's flag)."""
        return self._stage.optimizer_initialized or self._optimizer_unbound

    @optimizer_initialized.setter
    def optimizer_initialized(self, value: bool) -> None:
        if not value:
            self._optimizer_unbound = False
            if self._stage is Stage.OPTIMIZER_READY:
                self._stage = Stage.PARAMS_READY
            return
        self._require(Stage.PARAMS_READY, "setting optimizer_initialized = True")
        self._stage = self._stage.after_optimizer()

    @property
    def stage(self) -> Stage:
        """The module's lifecycle stage."""
        return self._stage

    def _require(self, needed: Stage, action: str) -> None:
        """StageError naming the missing setup call unless the module has reached ``needed``."""
        self._stage.require(needed, action)

    # ---- high-level API ---------------------------------------------------------------------
    def forward_backward(self, data_batch: Any) -> None:
        """A forward pass in training mode followed by a backward pass.

        Parameters
        ----------
        data_batch : DataBatch
            The batch; its labels feed the loss heads.
        """
        self.forward(data_batch, is_train=True)
        self.backward()

    def score(self, eval_data: Any, eval_metric: Any, num_batch: int | None = None,
              batch_end_callback: Any = None, score_end_callback: Any = None,
              reset: bool = True, epoch: int = 0, sparse_row_id_fn: Any = None) -> list:
        """Run inference over an iterator and evaluate a metric.

        Parameters
        ----------
        eval_data : DataIter
            Batches to evaluate.
        eval_metric : EvalMetric or str
            The metric, or a name ``rm.metric.create`` understands. It is reset first.
        num_batch : int, optional
            Stop after this many batches (default: the whole iterator).
        batch_end_callback : callable or list of callable, optional
            Called with a :class:`BatchEndParam` after each batch.
        score_end_callback : callable or list of callable, optional
            Called with a :class:`BatchEndParam` (``nbatch`` = batches seen) at the end.
        reset : bool, default True
            Reset ``eval_data`` before starting.
        epoch : int, default 0
            Passed to the callbacks.
        sparse_row_id_fn : callable, optional
            Passed to :meth:`prepare`.

        Returns
        -------
        list of (str, float)
            The metric's ``get_name_value()``.

        Examples
        --------
        >>> mod.score(val_iter, 'acc')
        [('accuracy', 0.93)]
        """
        self._require(Stage.PARAMS_READY, "score")
        if reset:
            eval_data.reset()
        eval_metric = _metric.create(eval_metric)
        eval_metric.reset()
        seen = 0
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(batch, is_train=False)
            self._update_metric_from(eval_metric, batch)
            for callback in _as_list(batch_end_callback):
                callback(BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                                       locals=locals()))
            seen += 1
        for callback in _as_list(score_end_callback):
            callback(BatchEndParam(epoch=epoch, nbatch=seen, eval_metric=eval_metric,
                                   locals=locals()))
        return eval_metric.get_name_value()

    def iter_predict(self, eval_data: Any, num_batch: int | None = None, reset: bool = True,
                     sparse_row_id_fn: Any = None) -> Iterator[tuple]:
        """Yield ``(outputs, nbatch, batch)`` for each batch, padding rows removed.

        Parameters
        ----------
        eval_data : DataIter
            Batches to run.
        num_batch : int, optional
            Stop after this many batches.
        reset : bool, default True
            Reset ``eval_data`` first.
        sparse_row_id_fn : callable, optional
            Passed to :meth:`prepare`.

        Examples
        --------
        >>> for outputs, i, batch in mod.iter_predict(it):
        ...     probs = outputs[0]
        """
        self._require(Stage.PARAMS_READY, "iter_predict")
        if reset:
            eval_data.reset()
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(batch, is_train=False)
            outputs = _strip_pad(self.get_outputs(), getattr(batch, "pad", 0), copy=False)
            yield outputs, nbatch, batch

    def predict(self, eval_data: Any, num_batch: int | None = None, merge_batches: bool = True,
                reset: bool = True, always_output_list: bool = False,
                sparse_row_id_fn: Any = None) -> Any:
        """Run inference and collect the outputs.

        Parameters
        ----------
        eval_data : DataIter or array
            Batches to run. A bare (numpy or cupy) array is run as one batch of the first
            data input, and its first output is returned.
        num_batch : int, optional
            Stop after this many batches.
        merge_batches : bool, default True
            Concatenate the batches' outputs (padding rows removed) into one array per
            output; otherwise return one list of outputs per batch.
        reset : bool, default True
            Reset ``eval_data`` first.
        always_output_list : bool, default False
            With merged batches and a single output, return ``[out]`` instead of ``out``.
        sparse_row_id_fn : callable, optional
            Passed to :meth:`prepare`.

        Returns
        -------
        array, list of arrays, or list of lists of arrays
            As described above; an empty list when the iterator yields nothing.

        Examples
        --------
        >>> probs = mod.predict(val_iter)          # (num_rows, num_classes)
        >>> probs = mod.predict(np.ones((3, 20), np.float32))
        """
        self._require(Stage.PARAMS_READY, "predict")
        if hasattr(eval_data, "shape") and hasattr(eval_data, "dtype"):
            self.forward(DataBatch([eval_data]), is_train=False)
            return self.get_outputs()[0].copy()
        if not (isinstance(eval_data, DataIter) or
                (hasattr(eval_data, "reset") and hasattr(eval_data, "__iter__"))):
            raise ValueError("eval_data must be a DataIter or an array, got "
                             f"{type(eval_data).__name__}")
        if reset:
            eval_data.reset()
        per_batch = []
        for nbatch, batch in enumerate(eval_data):
            if num_batch is not None and nbatch == num_batch:
                break
            self.prepare(batch, sparse_row_id_fn=sparse_row_id_fn)
            self.forward(batch, is_train=False)
            per_batch.append(_strip_pad(self.get_outputs(), getattr(batch, "pad", 0), copy=True))
        if not per_batch or not merge_batches:
            return show(per_batch)
        num_outputs = len(per_batch[0])
        if any(len(outs) != num_outputs for outs in per_batch):
            raise ValueError("cannot merge batches: the number of outputs differs between "
                             "batches (bucketing?); use merge_batches=False")
        merged = show([_concat([outs[i] for outs in per_batch]) for i in range(num_outputs)])
        return merged[0] if num_outputs == 1 and not always_output_list else merged

    def fit(self, train_data: Any, eval_data: Any = None, eval_metric: Any = "acc",
            epoch_end_callback: Any = None, batch_end_callback: Any = None,
            kvstore: Any = "local", optimizer: Any = "sgd",
            optimizer_params: Any = (("learning_rate", 0.01),), eval_end_callback: Any = None,
            eval_batch_end_callback: Any = None, initializer: Any = Uniform(0.01),
            arg_params: dict | None = None, aux_params: dict | None = None,
            allow_missing: bool = False, force_rebind: bool = False, force_init: bool = False,
            begin_epoch: int = 0, num_epoch: int | None = None, validation_metric: Any = None,
            monitor: Any = None, sparse_row_id_fn: Any = None, checkpoint: Any = None,
            resume: bool = False) -> FitResult:
        """Train the module.

        Parameters
        ----------
        train_data : DataIter
            Training batches; ``provide_data``/``provide_label`` are used to bind.
        eval_data : DataIter, optional
            Validation batches, scored after every epoch.
        eval_metric : str or EvalMetric, default 'acc'
            Training metric, logged at the end of each epoch.
        epoch_end_callback : callable or list of callable, optional
            Called as ``cb(epoch, symbol, arg_params, aux_params)`` after each epoch. An
            object here (or among the other callbacks) with an ``on_epoch_record`` method,
            such as :class:`~raymod.callback.EarlyStopping`, also gets each epoch's record
            once it is complete and may stop ``fit`` there (raymod addition).
        batch_end_callback : callable or list of callable, optional
            Called with a :class:`BatchEndParam` after each training batch.
        kvstore : str or KVStore, default 'local'
            Where gradients are aggregated (see ``init_optimizer``).
        optimizer : str or Optimizer, default 'sgd'
            The optimizer, or its registered name.
        optimizer_params : dict or tuple of pairs, default (('learning_rate', 0.01),)
            Constructor arguments when ``optimizer`` is a name.
        eval_end_callback : callable or list of callable, optional
            Called at the end of each validation pass (``score_end_callback``).
        eval_batch_end_callback : callable or list of callable, optional
            Called after each validation batch.
        initializer : Initializer, default Uniform(0.01)
            Fills parameters not given in ``arg_params``/``aux_params``.
        arg_params, aux_params : dict of str to array, optional
            Starting values of the parameters and auxiliary states.
        allow_missing : bool, default False
            Let ``initializer`` fill names missing from ``arg_params``/``aux_params``.
        force_rebind : bool, default False
            Rebind even if already bound.
        force_init : bool, default False
            Re-initialize parameters even if already initialized.
        begin_epoch : int, default 0
            First epoch number (to resume training); at least 0.
        num_epoch : int
            Train until this epoch number (exclusive); at least ``begin_epoch``. Required.
        validation_metric : str or EvalMetric, optional
            Metric for ``eval_data``; defaults to ``eval_metric``.
        monitor : Monitor, optional
            Installed on the executors; ticks around every batch.
        sparse_row_id_fn : callable, optional
            Passed to :meth:`prepare`.
        checkpoint : CheckpointConfig or str, optional
            Write resumable checkpoints there (raymod addition): parameters in MXNet's
            layout, optimizer states, the iterator's position and the random state; which
            are kept: ``CheckpointConfig(keep=, score=, mode=)``.
        resume : bool, default False
            Continue from the newest checkpoint under ``checkpoint`` if there is one (its
            epoch and batch replace ``begin_epoch``); the run then follows the trajectory
            the interrupted run would have followed.

        Notes
        -----
        Per batch: ``forward_backward``, ``update``, ``update_metric`` with that batch's
        labels, then the next batch is fetched and ``prepare``-d, then the batch-end
        callbacks run. Each epoch logs ``Epoch[e] Train-<metric>=<value>`` and
        ``Epoch[e] Time cost=<seconds>``, syncs parameters, runs the epoch-end callbacks
        and, with ``eval_data``, logs ``Epoch[e] Validation-<metric>=<value>``; then the
        record hooks (``on_epoch_record``) see the epoch's record, the epoch's checkpoint is
        written, and ``fit`` ends there if a hook said stop.

        Returns
        -------
        FitResult
            Per-epoch metrics (``result.epochs``, ``result.table()``,
            ``result.metrics_dataframe``), the last and best checkpoint folders, why it
            stopped early (``result.stop_reason``), and the worker pool's membership
            events. MXNet's ``fit`` returns None; code that ignores the value is
            unaffected. Any exception that ends ``fit`` (too few workers left, a callback
            that raised) carries the result so far as ``err.fit_result``.

        Raises
        ------
        ValueError
            Before anything is bound or trained, for a bad epoch range, a
            ``CheckpointConfig(score=...)`` or ``EarlyStopping(monitor=...)`` naming a key
            the epoch records will not have, or ``resume=True`` without ``checkpoint``.

        Examples
        --------
        >>> mod = rm.mod.Module(net)
        >>> mod.fit(train_iter, eval_data=val_iter, optimizer='sgd',
        ...         optimizer_params={'learning_rate': 0.1}, num_epoch=10)
        """
        _check_epochs(begin_epoch, num_epoch)
        _check_kvstore_arg(kvstore)
        _check_optimizer_arg(optimizer)
        validation_metric = eval_metric if validation_metric is None else validation_metric
        eval_metric = _metric.create(eval_metric)
        if isinstance(checkpoint, str):
            checkpoint = CheckpointConfig(checkpoint)
        if resume and checkpoint is None:
            raise ValueError("fit(resume=True) needs checkpoint= (where to resume from)")
        hooks = fit_hooks(epoch_end_callback, eval_end_callback, batch_end_callback)
        keys = _record_keys(eval_metric, validation_metric if eval_data else None)
        if checkpoint is not None and checkpoint.score is not None and keys is not None \
                and checkpoint.score not in keys:
            raise ValueError(f"CheckpointConfig(score={checkpoint.score!r}): fit's epoch records "
                             f"have no such key; they have {', '.join(sorted(keys))}")
        for hook in hooks:  # resets it; raises for a key the records will not have
            if callable(getattr(hook, "on_fit_start", None)):
                hook.on_fit_start(keys)
        self._checkpointer = None if checkpoint is None else FitCheckpointer(checkpoint)
        started = time.time()  # membership events from here on belong to this fit
        self._fit_setup(train_data, kvstore, optimizer, optimizer_params, initializer,
                        arg_params, aux_params, allow_missing, force_rebind, force_init, monitor)
        start = self._fit_resume(train_data) if resume else None
        self._global_step = start["step"] if start else 0
        self._fit_cursor = None
        from ..cluster.pool import WorkersUnavailable
        result = FitResult()
        self._fit_result, self._fit_history = result, list((start or {}).get("history") or [])
        # a resumed run's hooks first see the epochs it trained before (patience carries over)
        reason = self._fit_stop_reason = _replay(hooks, self._fit_history)
        if reason:
            self.logger.info("the resumed run had stopped: %s", reason)
        first_epoch = begin_epoch if start is None else start["epoch"]
        try:
            for epoch in range(first_epoch, num_epoch if reason is None else first_epoch):
                tic, step0 = time.time(), self._global_step
                first = start["nbatch"] if start and epoch == start["epoch"] else 0
                if self._checkpointer is not None:  # a failure before the first batch
                    sampler = getattr(train_data, "sampler", None)
                    self._fit_cursor = (epoch, first,
                                        None if sampler is None else sampler.get_state())
                self._fit_begin_epoch(epoch, train_data, eval_metric)
                name_values = self._fit_epoch(epoch, train_data, eval_metric,
                                              batch_end_callback, monitor, sparse_row_id_fn,
                                              first)
                if self._checkpointer is not None:  # every step of the epoch has completed
                    self._fit_cursor = (epoch + 1, 0, _NEXT_EPOCH)
                record = self._epoch_record(epoch, name_values, tic, step0, train_data)
                self._fit_end_epoch(epoch, name_values, tic, epoch_end_callback)
                if eval_data:
                    for name, value in self._fit_evaluate(
                            epoch, eval_data, validation_metric, eval_end_callback,
                            eval_batch_end_callback):
                        record[f"val_{name}"] = _plain_value(value)
                result.epochs.append(record)
                train_data.reset()
                for hook in hooks:  # every hook sees every record; the first reason wins
                    said = hook.on_epoch_record(dict(record))
                    reason = reason or (str(said) if said else None)
                self._fit_stop_reason = reason  # written into the epoch's checkpoint
                every = checkpoint.every_n_epochs if checkpoint else None
                if every and (epoch + 1) % every == 0:
                    self._fit_save(epoch + 1, 0, train_data, record=record)
                if reason:
                    self.logger.info("Epoch[%d] stopping early: %s", epoch, reason)
                    break
        except WorkersUnavailable as err:
            stopped = self._fit_stopped(err, train_data)
            self._finish_result(result, started)
            result.error = stopped
            stopped.fit_result = result
            _end_hooks(hooks, result, stopped)
            raise stopped from err
        except BaseException as err:  # a callback raised, or an interrupt: hand back the result
            try:
                self._finish_result(result, started)
            except Exception:  # noqa: BLE001 - e.g. the store is failing too: raise the first
                pass
            result.error = err
            try:
                err.fit_result = result
            except (AttributeError, TypeError):  # an exception type without a __dict__
                pass
            _end_hooks(hooks, result, err)
            raise
        finally:
            self._fit_result = None
        result.stop_reason = reason
        self._finish_result(result, started)
        _end_hooks(hooks, result, None)
        return result

    def _epoch_record(self, epoch: int, name_values: list, tic: float, step0: int,
                      train_data: Any) -> dict:
        """The FitResult record of an epoch just trained (validation is added after)."""
        seconds = time.time() - tic
        steps = self._global_step - step0
        batch = getattr(train_data, "batch_size", None)
        samples = steps * batch if isinstance(batch, int) else None
        record = {"epoch": epoch, **{f"train_{n}": _plain_value(v) for n, v in name_values},
                  "steps": steps, "samples": samples, "seconds": seconds,
                  "samples_per_s": samples / seconds if samples and seconds > 0 else None,
                  "checkpoint": None}
        return record

    def _finish_result(self, result: FitResult, started: float) -> FitResult:
        """Fill in the checkpoints and the membership events of this fit."""
        if self._checkpointer is not None:
            result.checkpoints = [(str(f), m) for f, m in self._checkpointer.kept()]
            kept = [f for f, _ in result.checkpoints]
            result.last_checkpoint = kept[-1] if kept else None
            for record in result.epochs:
                if record.get("checkpoint") is not None and str(record["checkpoint"]) not in kept:
                    record["checkpoint"] = None  # pruned since (keep=)
                elif record.get("checkpoint") is not None:
                    record["checkpoint"] = str(record["checkpoint"])
            config = self._checkpointer.config
            result.set_best(config.score, config.score_mode)  # among the kept ones only
        pool = self.pool
        if pool is not None:
            result.events = [dict(e) for e in pool.events if e.get("time", 0) >= started]
        return result

    def _fit_stopped(self, err: Exception, train_data: Any) -> Exception:
        """Too few workers to go on: checkpoint the last completed step when ``fit`` was
        given ``checkpoint=``, and say where (the error to raise)."""
        if self._checkpointer is None or self._fit_cursor is None:
            hint = "" if self._fit_cursor is None else \
                "; fit(..., checkpoint=...) would have saved the progress"
            return type(err)(f"{err}{hint}")
        epoch, nbatch, sampler_state = self._fit_cursor
        if sampler_state is _NEXT_EPOCH:  # stopped after the epoch's last step
            train_data.reset()
            sampler = getattr(train_data, "sampler", None)
            sampler_state = None if sampler is None else sampler.get_state()
        pool = self.pool
        if pool is not None:
            pool.stopping = True  # read what the survivors hold, without waiting for more
        try:
            folder = self._fit_save(epoch, nbatch, train_data, sampler_state)
        except Exception as save_err:  # noqa: BLE001 - report both, raise the first
            # (e.g. a server lost with every worker: the last step cannot be rebuilt)
            try:
                older = self._checkpointer.list()
            except Exception:  # noqa: BLE001 - the store itself is failing
                older = []
            where = (f"fit(..., resume=True) continues from the newest complete checkpoint, "
                     f"{older[-1]}" if older else "no complete checkpoint exists: "
                     "fit(..., resume=True) starts afresh")
            return type(err)(f"{err}; writing a checkpoint of step {self._global_step} "
                             f"failed too ({str(save_err).splitlines()[0]}); {where}")
        finally:
            if pool is not None:
                pool.stopping = False
        return type(err)(f"{err}; stopped after step {self._global_step} and saved checkpoint "
                         f"{folder}: fit(..., resume=True) continues from there")

    # ---- fit hooks --------------------------------------------------------------------------
    def _fit_setup(self, train_data: Any, kvstore: Any, optimizer: Any, optimizer_params: Any,
                   initializer: Any, arg_params: Any, aux_params: Any, allow_missing: bool,
                   force_rebind: bool, force_init: bool, monitor: Any) -> None:
        """Bind to the training data, install the monitor, init parameters and optimizer."""
        self.bind(data_shapes=train_data.provide_data, label_shapes=train_data.provide_label,
                  for_training=True, force_rebind=force_rebind)
        if monitor is not None:
            self.install_monitor(monitor)
        self.init_params(initializer=initializer, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init)
        self.init_optimizer(kvstore=kvstore, optimizer=optimizer,
                            optimizer_params=optimizer_params)

    def _fit_resume(self, train_data: Any) -> dict | None:
        """Load the newest checkpoint into this module and the iterator; its position."""
        saved = self._checkpointer.load_latest()
        if saved is None:
            self.logger.info("no checkpoint under %s: starting afresh",
                             self._checkpointer.config.path)
            return None
        self.set_params(saved["arg_params"], saved["aux_params"])
        if saved["states"] is not None:
            self._set_optimizer_states(saved["states"])
        position = saved["position"]
        self._set_fit_state_arrays(saved["extra"] or {}, position)
        restore_random(position)
        sampler = getattr(train_data, "sampler", None)
        if sampler is not None and position.get("sampler"):
            sampler.set_state(position["sampler"])
        else:  # an iterator without a sampler: skip the batches already trained on
            for _ in range(position["nbatch"]):
                next(train_data)
        self.logger.info("resumed from %s: epoch %d, batch %d, step %d", saved["folder"],
                         position["epoch"], position["nbatch"], position["step"])
        return position

    def _fit_save(self, epoch: int, nbatch: int, train_data: Any,
                  sampler_state: dict | None = None, record: dict | None = None) -> str:
        """Write a checkpoint for resuming at batch ``nbatch`` of ``epoch`` (the sampler's
        position there, if not its current one); returns its folder. ``record``: the epoch
        just ended, whose ``checkpoint`` is set and which the manifest keeps for scores."""
        sampler = getattr(train_data, "sampler", None)
        pool = self.pool
        if sampler_state is None and sampler is not None:
            sampler_state = sampler.get_state()
        if record is not None:  # named before the save, so that the history holds it
            record["checkpoint"] = self._checkpointer.folder_for(self._global_step)
        done = self._fit_result.epochs if self._fit_result is not None else []
        position = {"epoch": epoch, "nbatch": nbatch, "step": self._global_step,
                    "sampler": sampler_state,
                    "bucket_keys": sorted(getattr(self, "_buckets", {}), key=str),
                    "membership": [] if pool is None else pool.events,
                    # the run's epochs so far, for FitResult.from_path and a resumed fit
                    "history": [json_record(r) for r in self._fit_history + done]}
        config = self._checkpointer.config
        if config.score is not None:
            position["score"] = {"score": config.score, "mode": config.score_mode}
        if self._fit_stop_reason:
            position["stop_reason"] = self._fit_stop_reason
        metrics = None if record is None else \
            {k: v for k, v in record.items() if k != "checkpoint"}
        moments.reached("checkpoint.save", pool=pool)
        folder = self._checkpointer.save(self, position, metrics)
        self.logger.info("checkpoint %s (epoch %d, batch %d)", folder, epoch, nbatch)
        return folder

    @property
    def pool(self) -> Any:
        """The Ray worker pool of a module made with ``workers=`` (None in process).

        ``pool.remove(n)`` / ``pool.add(n)`` let workers leave or join at the next step
        boundary (call them from a batch-end callback); ``pool.events`` is the membership log.
        """
        return getattr(self, "_pool", None)

    def _fit_state_arrays(self) -> dict:
        """Training state beyond parameters and optimizer for a checkpoint (name -> array);
        none here (SVRGModule keeps its snapshot and full gradient)."""
        return {}

    def _set_fit_state_arrays(self, arrays: dict, position: dict) -> None:
        """Load what :meth:`_fit_state_arrays` gave when resuming at ``position``."""

    def _optimizer_states(self) -> bytes:
        """The optimizer states as bytes (through :meth:`save_optimizer_states`)."""
        return bytes_via_file(self.save_optimizer_states)

    def _set_optimizer_states(self, blob: bytes) -> None:
        """Load optimizer states given as bytes (through :meth:`load_optimizer_states`)."""
        file_from_bytes(blob, self.load_optimizer_states)

    def _fit_begin_epoch(self, epoch: int, train_data: Any, eval_metric: Any) -> None:
        """Start an epoch: reset the training metric (SVRGModule adds its full-gradient pass)."""
        eval_metric.reset()

    def _fit_epoch(self, epoch: int, train_data: Any, eval_metric: Any, batch_end_callback: Any,
                   monitor: Any, sparse_row_id_fn: Any, first_nbatch: int = 0) -> list:
        """One pass over ``train_data`` (from batch ``first_nbatch`` when resuming); returns
        the metric's global (name, value) pairs."""
        # where each batch starts, for a checkpoint written if its step cannot complete
        sampler = getattr(train_data, "sampler", None) if self._checkpointer else None
        batches = iter(train_data)
        before = sampler.get_state() if sampler is not None else None
        batch = next(batches, None)
        if batch is None:
            raise ValueError(f"train_data yielded no batches in epoch {epoch}")
        nbatch, name_values = first_nbatch, []
        every = self._checkpointer.config.every_n_steps if self._checkpointer else None
        deferred = self._fit_defers_steps()
        planned = self._global_step
        while batch is not None:
            if monitor is not None:
                monitor.tic()
            if self._checkpointer is not None and not deferred:
                self._fit_cursor = (epoch, nbatch, before)
            if deferred:  # the step completes later: its batch end runs then, in order
                end = {"epoch": epoch, "nbatch": nbatch, "batch": batch, "last": False}
                self._fit_batch(batch, eval_metric, on_done=functools.partial(
                    self._fit_step_done, end, eval_metric, batch_end_callback, name_values))
                planned += 1
                if every and planned % every == 0:
                    self._fit_drain()
                    self._fit_save(epoch, nbatch + 1, train_data)
            else:
                self._fit_batch(batch, eval_metric)
                self._global_step += 1
                if every and self._global_step % every == 0:  # before the next batch is read
                    self._fit_save(epoch, nbatch + 1, train_data)
            before = sampler.get_state() if sampler is not None else None
            next_batch = next(batches, None)  # fetched only after this batch's labels are used
            if next_batch is not None:
                self.prepare(next_batch, sparse_row_id_fn=sparse_row_id_fn)
            if monitor is not None:
                monitor.toc_print()
            if deferred:
                end.update(last=next_batch is None, cursor=(epoch, nbatch + 1, before))
            else:
                if next_batch is None:
                    name_values = eval_metric.get_global_name_value()
                self._fit_batch_end(epoch, nbatch, batch, eval_metric, batch_end_callback)
            batch, nbatch = next_batch, nbatch + 1
        if deferred:
            self._fit_drain()
        return name_values

    def _fit_defers_steps(self) -> bool:
        """Whether ``_fit_batch`` only plans the step (workers running ahead): its batch-end
        callbacks then run when it completes, in order."""
        return False

    def _fit_drain(self) -> None:
        """Wait until every planned step has completed (deferred steps only)."""

    def _fit_step_done(self, end: dict, eval_metric: Any, batch_end_callback: Any,
                       name_values: list) -> None:
        """A deferred step completed: count it, note the resume position after it, and call
        the batch-end callbacks (the metric now includes it and every step before)."""
        self._global_step += 1
        if self._checkpointer is not None and "cursor" in end:
            self._fit_cursor = end["cursor"]
        if end["last"]:
            name_values[:] = eval_metric.get_global_name_value()
        self._fit_batch_end(end["epoch"], end["nbatch"], end["batch"], eval_metric,
                            batch_end_callback)

    def _fit_batch(self, data_batch: Any, eval_metric: Any,
                   on_done: Callable[[], None] | None = None) -> None:
        """Train on one batch: forward_backward, update, update_metric (then ``on_done``)."""
        self.forward_backward(data_batch)
        self.update()
        self._update_metric_from(eval_metric, data_batch)
        if on_done is not None:
            on_done()

    def _fit_batch_end(self, epoch: int, nbatch: int, data_batch: Any, eval_metric: Any,
                       batch_end_callback: Any) -> None:
        """Call the batch-end callbacks (on Ray workers, also export the fit's figures as
        Ray metrics: :class:`raymod.cluster.metrics.RayMetrics`)."""
        callbacks = _as_list(batch_end_callback)
        if self.pool is not None:
            if getattr(self, "_ray_metrics", None) is None:
                from ..cluster.metrics import RayMetrics
                self._ray_metrics = RayMetrics()
            callbacks.append(self._ray_metrics)
        if not callbacks:
            return
        done = getattr(getattr(self, "_exec_group", None), "step_completed_at", None)
        param = BatchEndParam(epoch=epoch, nbatch=nbatch, eval_metric=eval_metric,
                              locals={"self": self, "epoch": epoch, "nbatch": nbatch,
                                      "data_batch": data_batch, "eval_metric": eval_metric},
                              completed_at=time.time() if done is None else done)
        for callback in callbacks:
            callback(param)

    def _params_agree(self) -> bool:
        """Whether every copy of the parameters already holds what ``get_params`` returns
        (then the epoch's end skips the sync); a module that cannot tell says False."""
        return False

    def _fit_end_epoch(self, epoch: int, name_values: list, tic: float,
                       epoch_end_callback: Any) -> None:
        """Log the epoch, sync parameters across devices, call the epoch-end callbacks."""
        for name, value in name_values:
            self.logger.info("Epoch[%d] Train-%s=%f", epoch, name, value)
        self.logger.info("Epoch[%d] Time cost=%.3f", epoch, time.time() - tic)
        callbacks = _as_list(epoch_end_callback)
        agree = self._params_agree()
        arg_params = aux_params = None
        # read only when something uses them: on workers a table would come to the driver
        if not agree or any(getattr(cb, "needs_params", True) for cb in callbacks):
            arg_params, aux_params = self.get_params()
        if not agree:  # MXNet's sync of the devices' copies
            self.set_params(arg_params, aux_params)
        for callback in callbacks:
            callback(epoch, self.symbol, arg_params, aux_params)

    def _fit_evaluate(self, epoch: int, eval_data: Any, validation_metric: Any,
                      eval_end_callback: Any, eval_batch_end_callback: Any) -> list:
        """Score ``eval_data`` and log ``Epoch[e] Validation-<name>=<value>``."""
        results = self.score(eval_data, validation_metric, score_end_callback=eval_end_callback,
                             batch_end_callback=eval_batch_end_callback, epoch=epoch)
        for name, value in results:
            self.logger.info("Epoch[%d] Validation-%s=%f", epoch, name, value)
        return results

    def _update_metric_from(self, eval_metric: Any, data_batch: Any) -> None:
        """update_metric with the labels of ``data_batch`` (a list of batches: pre-sliced)."""
        if isinstance(data_batch, list):
            self.update_metric(eval_metric, [b.label for b in data_batch], pre_sliced=True)
        else:
            self.update_metric(eval_metric, data_batch.label)

    # ---- symbol and I/O descriptions --------------------------------------------------------
    @property
    def symbol(self) -> Any:
        """The network this module runs."""
        return self._symbol

    @property
    def data_names(self) -> list:
        """Names of the data inputs."""
        raise NotImplementedError()

    @property
    def output_names(self) -> list:
        """Names of the outputs."""
        raise NotImplementedError()

    @property
    def data_shapes(self) -> list:
        """DataDesc of each data input (needs bind)."""
        raise NotImplementedError()

    @property
    def label_shapes(self) -> list | None:
        """DataDesc of each label input, or None (needs bind)."""
        raise NotImplementedError()

    @property
    def output_shapes(self) -> list:
        """``(name, shape)`` of each output (needs bind)."""
        raise NotImplementedError()

    # ---- parameters -------------------------------------------------------------------------
    def get_params(self) -> tuple[dict, dict]:
        """``(arg_params, aux_params)``: the current values, as host arrays."""
        raise NotImplementedError()

    def init_params(self, initializer: Any = Uniform(0.01), arg_params: dict | None = None,
                    aux_params: dict | None = None, allow_missing: bool = False,
                    force_init: bool = False, allow_extra: bool = False) -> None:
        """Initialize parameters and auxiliary states (see :meth:`Module.init_params`)."""
        raise NotImplementedError()

    def set_params(self, arg_params: dict, aux_params: dict, allow_missing: bool = False,
                   force_init: bool = True, allow_extra: bool = False) -> None:
        """Assign parameter and auxiliary-state values.

        Parameters
        ----------
        arg_params : dict of str to array
            Parameter values by name.
        aux_params : dict of str to array
            Auxiliary-state values by name.
        allow_missing : bool, default False
            Tolerate names missing from the dicts (they keep their values).
        force_init : bool, default True
            Assign even if parameters are already initialized.
        allow_extra : bool, default False
            Tolerate names the network does not have.

        Examples
        --------
        >>> sym, arg_params, aux_params = rm.model.load_checkpoint('mlp', 3)
        >>> mod.set_params(arg_params, aux_params)
        """
        self.init_params(initializer=None, arg_params=arg_params, aux_params=aux_params,
                         allow_missing=allow_missing, force_init=force_init,
                         allow_extra=allow_extra)

    def save_params(self, fname: str) -> None:
        """Save parameters and auxiliary states to a ``.params`` file (``arg:``/``aux:`` names).

        Parameters
        ----------
        fname : str
            Output path (written atomically).
        """
        arg_params, aux_params = self.get_params()
        ndarray_io.save(fname, params_dict(arg_params, aux_params,
                                           getattr(self, "_symbol", None)))

    def load_params(self, fname: str) -> None:
        """Load parameters from a ``.params`` file written by :meth:`save_params` or MXNet.

        Parameters
        ----------
        fname : str
            Path of the file.
        """
        arg_params, aux_params = split_params(ndarray_io.load(fname), repr(fname))
        self.set_params(arg_params, aux_params)

    def get_states(self, merge_multi_context: bool = True) -> list:
        """Values of the state inputs (``state_names``); empty for modules without states."""
        self._require(Stage.PARAMS_READY, "get_states")
        return []

    def set_states(self, states: Any = None, value: Any = None) -> None:
        """Set the state inputs; a no-op for modules without states."""
        self._require(Stage.PARAMS_READY, "set_states")

    def install_monitor(self, mon: Any) -> None:
        """Install a monitor on every executor."""
        raise NotImplementedError()

    # ---- computation ------------------------------------------------------------------------
    def prepare(self, data_batch: Any, sparse_row_id_fn: Any = None) -> None:
        """Get ready for ``data_batch`` (switch bucket, pull rows); nothing by default."""
        if sparse_row_id_fn is not None:
            warnings.warn(UserWarning("sparse_row_id_fn is not used by "
                                      f"{type(self).__name__}"))

    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Forward pass (``is_train`` None means: as bound)."""
        raise NotImplementedError()

    def backward(self, out_grads: Any = None) -> None:
        """Backward pass; ``out_grads`` are needed for outputs that are not loss heads."""
        raise NotImplementedError()

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        """Outputs of the last forward pass."""
        raise NotImplementedError()

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """Gradients of the data inputs (needs ``bind(inputs_need_grad=True)``)."""
        raise NotImplementedError()

    def update(self) -> None:
        """Apply the optimizer to the gradients of the last backward pass."""
        raise NotImplementedError()

    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        """Accumulate ``eval_metric`` over the outputs of the last forward pass."""
        raise NotImplementedError()

    # ---- setup ------------------------------------------------------------------------------
    def bind(self, data_shapes: Any, label_shapes: Any = None, for_training: bool = True,
             inputs_need_grad: bool = False, force_rebind: bool = False,
             shared_module: Any = None, grad_req: Any = "write") -> None:
        """Allocate executors for these input shapes (see :meth:`Module.bind`)."""
        raise NotImplementedError()

    def init_optimizer(self, kvstore: Any = "local", optimizer: Any = "sgd",
                       optimizer_params: Any = (("learning_rate", 0.01),),
                       force_init: bool = False) -> None:
        """Install an optimizer (see :meth:`Module.init_optimizer`)."""
        raise NotImplementedError()


def _end_hooks(hooks: list, result: FitResult, error: BaseException | None) -> None:
    """Tell the record hooks that fit ended (``on_fit_end(result, error)``): a tracker ends
    its run there. A hook failing here is logged, not raised over fit's own outcome."""
    for hook in hooks:
        end = getattr(hook, "on_fit_end", None)
        if callable(end):
            try:
                end(result=result, error=error)
            except Exception:  # noqa: BLE001 - fit's result or error matters more
                logging.getLogger(__name__).exception("on_fit_end of %r failed", hook)


def _record_keys(eval_metric: Any, validation_metric: Any) -> set | None:
    """The keys of fit's epoch records (:meth:`BaseModule._epoch_record` plus ``val_<name>``
    with validation); None when a metric cannot name its values before it has any."""
    try:
        keys = {f"train_{name}" for name, _ in eval_metric.get_name_value()}
        if validation_metric is not None:
            keys |= {f"val_{name}" for name, _ in
                     _metric.create(validation_metric).get_name_value()}
    except Exception:  # noqa: BLE001 - a user metric: the hooks check the first record
        return None
    return keys | {"epoch", "steps", "samples", "seconds", "samples_per_s"}


def _takes(function: Callable, name: str) -> bool:
    """Whether ``function`` accepts the keyword argument ``name``."""
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _replay(hooks: list, history: list[dict]) -> str | None:
    """Hand a resumed run's earlier epoch records to the record hooks; the first reason to
    stop one gives (the run had stopped there), else None."""
    takes_replay = [_takes(hook.on_epoch_record, "replay") for hook in hooks]
    for record in history:
        reasons = [hook.on_epoch_record(dict(record), replay=True) if replay
                   else hook.on_epoch_record(dict(record))
                   for hook, replay in zip(hooks, takes_replay)]
        reason = next((str(r) for r in reasons if r), None)
        if reason:
            return reason
    return None


def _plain_value(value: Any) -> Any:
    """A metric value as a Python number where it is one (numpy scalars included)."""
    return value.item() if hasattr(value, "item") and getattr(value, "size", 1) == 1 else value

"""MXNet's legacy executor manager (``mx.executor_manager``), for code written before Module.

``DataParallelExecutorManager`` trains one network over several devices of this process the
way MXNet's ``FeedForward`` model did: load a batch, forward, backward, then the caller
updates ``param_arrays`` from ``grad_arrays`` (``rm.model._update_params`` or a kvstore).
It is a thin layer over :class:`raymod.parallel.DataParallelExecutorGroup`, which does the
binding, the batch split and the parameter sharing between buckets.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import numpy as np

from .array_view import show
from .base import as_logger
from .context import Context, as_numpy
from .io import DataDesc
from .parallel import DataParallelExecutorGroup as _Group
from .parallel import split_input_slice
from .symbol import Symbol

__all__ = ["DataParallelExecutorGroup", "DataParallelExecutorManager"]


def _split_input_slice(batch_size: int, work_load_list: Sequence[float]) -> list[slice]:
    """One slice of the batch per device, proportional to ``work_load_list``.

    Parameters
    ----------
    batch_size : int
        Rows in a batch.
    work_load_list : list of number
        Relative share per device.

    Returns
    -------
    list of slice

    Raises
    ------
    ValueError
        Some device would get no rows ("Too many slices").
    """
    return split_input_slice(batch_size, work_load_list)


def _check_arguments(symbol: Symbol) -> None:
    """ValueError when an argument or auxiliary-state name occurs twice in ``symbol``.

    Parameters
    ----------
    symbol : Symbol
        The network.
    """
    for kind, names in (("argument", symbol.list_arguments()),
                        ("auxiliary state", symbol.list_auxiliary_states())):
        seen = set()
        for name in names:
            if name in seen:
                raise ValueError(f"duplicated {kind} name {name!r}: give the layers distinct "
                                 f"names (name=...); {kind}s are {names}")
            seen.add(name)


def _load_general(data: Sequence[Any], targets: Sequence[Any]) -> None:
    """Copy each source array into its target: a whole array, or ``[(slice, array), ...]``
    (one part per device, cut along axis 0)."""
    for index, (src, dst) in enumerate(zip(data, targets)):
        if hasattr(dst, "shape"):
            if tuple(dst.shape) != tuple(src.shape):
                raise ValueError(f"input {index}: shape {tuple(src.shape)} does not match the "
                                 f"bound shape {tuple(dst.shape)}")
            dst[...] = _like(dst, src)
            continue
        rows = dst[-1][0].stop
        if src.shape[0] != rows:
            raise ValueError(f"input {index}: batch size mismatch, expected {rows} rows, got "
                             f"{src.shape[0]}")
        for part, device_array in dst:
            device_array[...] = _like(device_array, src[part])


def _load_data(batch: Any, targets: Sequence[Any]) -> None:
    """Copy ``batch.data`` into the devices' data arrays."""
    _load_general(batch.data, targets)


def _load_label(batch: Any, targets: Sequence[Any]) -> None:
    """Copy ``batch.label`` into the devices' label arrays."""
    _load_general(batch.label, targets)


def _like(target: Any, array: Any) -> Any:
    """``array`` on the array module of ``target`` (numpy or cupy)."""
    if isinstance(target, np.ndarray):
        return as_numpy(array)
    import cupy  # only reached with GPU arrays
    return cupy.asarray(array)


class DataParallelExecutorGroup:
    """The manager's executors for one network: one per device, each on its slice.

    Every parameter gets a gradient (``grad_req='write'``); data and labels do not.

    Parameters
    ----------
    sym : Symbol
        The network.
    arg_names : list of str
        ``sym.list_arguments()``.
    param_names : list of str
        The trainable parameters.
    ctx : list of Context
        One executor per device.
    slices : list of slice
        The rows of a batch each device takes (``_split_input_slice``).
    train_data : DataIter or DataBatch
        Anything with ``provide_data`` and ``provide_label``; only the shapes are read.
    shared_group : DataParallelExecutorGroup, optional
        Share parameters, gradients and input memory with this group (bucketing).
    """

    def __init__(self, sym: Symbol, arg_names: Sequence[str], param_names: Sequence[str],
                 ctx: Sequence[Context], slices: Sequence[slice], train_data: Any,
                 shared_group: "DataParallelExecutorGroup | None" = None):
        _check_arguments(sym)
        if len(slices) != len(ctx):
            raise ValueError(f"slices has {len(slices)} entries for {len(ctx)} contexts")
        descs = [DataDesc(d[0], tuple(d[1]), getattr(d, "dtype", np.float32), "N")
                 for d in list(train_data.provide_data) + list(train_data.provide_label or [])]
        batch = slices[-1].stop
        counts = [s.stop - s.start for s in slices]
        self.data_names = [d[0] for d in train_data.provide_data]
        self.label_names = [d[0] for d in (train_data.provide_label or [])]
        params = set(param_names)
        self.param_idx = [i for i, name in enumerate(arg_names) if name in params]
        self.param_names = [arg_names[i] for i in self.param_idx]
        self.aux_names = sym.list_auxiliary_states()
        self.group = _Group(sym, list(ctx), counts, descs[:len(self.data_names)],
                            descs[len(self.data_names):], self.param_names, for_training=True,
                            inputs_need_grad=False,
                            shared_group=None if shared_group is None else shared_group.group)
        if [(s.start, s.stop) for s in self.group.slices] != [(s.start, s.stop) for s in slices] \
                or self.group.batch_size != batch:
            raise ValueError(f"slices {list(slices)} do not cut the batch of "
                             f"{self.group.batch_size} rows into consecutive parts")
        self.slices = list(slices)

    @property
    def train_execs(self) -> list:
        """The executors, one per device."""
        return self.group.execs

    @property
    def shared_data_arrays(self) -> list:
        """Per device, the input arrays shared with the other buckets' groups."""
        return self.group.shared_data_arrays

    @property
    def data_arrays(self) -> list:
        """``[[(slice, array) per device] per data input]``."""
        return self.group.data_arrays

    @property
    def label_arrays(self) -> list:
        """``[[(slice, array) per device] per label input]``."""
        return self.group.label_arrays

    @property
    def param_arrays(self) -> list:
        """``[[array per device] per parameter]``."""
        return self.group.param_arrays

    @property
    def grad_arrays(self) -> list:
        """``[[gradient per device] per parameter]``."""
        return self.group.grad_arrays

    @property
    def aux_arrays(self) -> list:
        """``[[array per device] per auxiliary state]``."""
        return self.group.aux_arrays

    def load_data_batch(self, data_batch: Any) -> None:
        """Copy the batch's data and labels into the devices' slices."""
        _load_data(data_batch, self.data_arrays)
        _load_label(data_batch, self.label_arrays)

    def forward(self, is_train: bool = False) -> None:
        """Forward on every device."""
        for executor in self.train_execs:
            executor.forward(is_train=is_train)

    def backward(self) -> None:
        """Backward on every device."""
        for executor in self.train_execs:
            executor.backward()

    def update_metric(self, metric: Any, labels: Sequence[Any], pre_sliced: bool = False) -> None:
        """Update ``metric`` with each device's outputs and its part of ``labels``.

        Parameters
        ----------
        metric : EvalMetric
        labels : list of arrays
            Whole-batch labels, or (``pre_sliced``) one list of labels per device.
        pre_sliced : bool, default False
        """
        for i, (executor, part) in enumerate(zip(self.train_execs, self.slices)):
            device_labels = labels[i] if pre_sliced else [label[part] for label in labels]
            metric.update(show(device_labels), executor.outputs)


class DataParallelExecutorManager:
    """Executors of one network (or of its buckets) over several devices of this process.

    Parameters
    ----------
    symbol : Symbol
        The network (the default bucket's, with ``sym_gen``).
    ctx : list of Context
        Devices; each batch is split over them.
    train_data : DataIter
        Gives ``batch_size``, ``provide_data``, ``provide_label`` (and, with ``sym_gen``,
        ``default_bucket_key``).
    arg_names, param_names, aux_names : list of str
        The network's arguments, trainable parameters and auxiliary states.
    work_load_list : list of number, optional
        Relative share of the batch per device (equal by default).
    logger : Logger, optional
        Default: ``logging``.
    sym_gen : callable, optional
        ``sym_gen(bucket_key) -> Symbol`` for bucketing: a batch whose ``bucket_key`` is new
        gets its own executors, sharing the parameters of the default bucket's.

    Examples
    --------
    >>> mgr = DataParallelExecutorManager(net, [rm.cpu(0), rm.cpu(1)], it,
    ...                                   net.list_arguments(), params, net.list_auxiliary_states())
    >>> mgr.set_params(arg_params, aux_params)
    >>> for batch in it:
    ...     mgr.load_data_batch(batch); mgr.forward(is_train=True); mgr.backward()
    ...     rm.model._update_params(mgr.param_arrays, mgr.grad_arrays, updater, len(ctx))
    """

    def __init__(self, symbol: Symbol, ctx: Sequence[Context], train_data: Any,
                 arg_names: Sequence[str], param_names: Sequence[str],
                 aux_names: Sequence[str], work_load_list: Sequence[float] | None = None,
                 logger: Any = None, sym_gen: Callable | None = None):
        logger = as_logger(logging if logger is None else logger)
        ctx = [ctx] if isinstance(ctx, Context) else list(ctx)
        if work_load_list is None:
            work_load_list = [1] * len(ctx)
        if not isinstance(work_load_list, list) or len(work_load_list) != len(ctx):
            raise ValueError(f"work_load_list must be a list with one entry per context "
                             f"({len(ctx)}), got {work_load_list!r}")
        if sym_gen is not None and not callable(sym_gen):
            raise TypeError(f"sym_gen must be callable, got {type(sym_gen).__name__}")
        logger.info("Start training with %s", str(ctx))
        self.slices = _split_input_slice(train_data.batch_size, work_load_list)
        self.arg_names = list(arg_names)
        self.param_names = list(param_names)
        self.aux_names = list(aux_names)
        self.ctx = ctx
        self.execgrp = DataParallelExecutorGroup(symbol, self.arg_names, self.param_names,
                                                 self.ctx, self.slices, train_data)
        self.symbol = symbol
        self.sym_gen = sym_gen
        self.curr_execgrp: DataParallelExecutorGroup | None = None  # set by load_data_batch
        if sym_gen is not None:
            self.execgrp_bucket = {train_data.default_bucket_key: self.execgrp}

    def install_monitor(self, monitor: Any) -> None:
        """Install a monitor on every executor (not with ``sym_gen``, as in MXNet)."""
        if self.sym_gen is not None:
            raise NotImplementedError("install_monitor is not supported with sym_gen "
                                      "(bucketing), as in MXNet")
        for executor in self.execgrp.train_execs:
            monitor.install(executor)

    def set_params(self, arg_params: dict, aux_params: dict) -> None:
        """Copy parameter and auxiliary-state values into every executor."""
        for executor in self.execgrp.train_execs:
            executor.copy_params_from(arg_params, aux_params)

    def copy_to(self, arg_params: dict, aux_params: dict) -> None:
        """Write the device average of each parameter and auxiliary state into the
        given arrays, in place, in their own dtypes."""
        for names, blocks, target in ((self.param_names, self.param_arrays, arg_params),
                                      (self.aux_names, self.aux_arrays, aux_params)):
            for name, block in zip(names, blocks):
                mean = sum(as_numpy(a).astype(np.float64) for a in block) / len(block)
                target[name][...] = mean.astype(target[name].dtype)

    @property
    def param_arrays(self) -> list:
        """``[[array per device] per parameter]``, shared by every bucket."""
        return self.execgrp.param_arrays

    @property
    def grad_arrays(self) -> list:
        """``[[gradient per device] per parameter]``, shared by every bucket."""
        return self.execgrp.grad_arrays

    @property
    def aux_arrays(self) -> list:
        """``[[array per device] per auxiliary state]``, shared by every bucket."""
        return self.execgrp.aux_arrays

    def load_data_batch(self, data_batch: Any) -> None:
        """Pick the batch's bucket (making its executors on first sight) and load it."""
        if self.sym_gen is not None:
            key = data_batch.bucket_key
            if key not in self.execgrp_bucket:
                self.execgrp_bucket[key] = DataParallelExecutorGroup(
                    self.sym_gen(key), self.arg_names, self.param_names, self.ctx, self.slices,
                    data_batch, shared_group=self.execgrp)
            self.curr_execgrp = self.execgrp_bucket[key]
        else:
            self.curr_execgrp = self.execgrp
        self.curr_execgrp.load_data_batch(data_batch)

    def _current(self, what: str) -> DataParallelExecutorGroup:
        if self.curr_execgrp is None:
            raise RuntimeError(f"{what} needs load_data_batch first")
        return self.curr_execgrp

    def forward(self, is_train: bool = False) -> None:
        """Forward on the current batch's executors."""
        self._current("forward").forward(is_train=is_train)

    def backward(self) -> None:
        """Backward on the current batch's executors."""
        self._current("backward").backward()

    def update_metric(self, metric: Any, labels: Sequence[Any], pre_sliced: bool = False) -> None:
        """Update ``metric`` from the current batch's outputs."""
        self._current("update_metric").update_metric(metric, labels, pre_sliced)

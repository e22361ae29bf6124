"""``RayExecutorGroup``: the executor-group interface of a Module, run on Ray worker actors.

It offers what :class:`~raymod.parallel.DataParallelExecutorGroup` offers a Module (bind
shapes, parameters, forward, backward, outputs, metrics), plus the step protocol:

- a step's global batch is cut into a fixed number of slices (``Workers.num_slices``), not
  one per live worker, so the gradient sum and therefore the trajectory do not depend on
  membership; slices are handed out to the live workers in contiguous runs;
- :meth:`train_step` is the whole step in one call per worker (forward, backward, push to
  the KVServers, metric); the driver then closes the step on the servers and keeps the refs
  of the new weights, which it hands to the workers with their next step.

This file is the facade. What happens to steps and failures lives in one module per idea,
mixed in here, following the controller's table (:mod:`raymod.cluster.controller`):

==================================== ===================================================
:mod:`raymod.cluster.steps`          the shared step state; one step at a time
:mod:`raymod.cluster.windows`        run-ahead windows: plan, dispatch, collect in order
:mod:`raymod.cluster.recovery`       one module per failure type (worker lost or hung,
                                     server lost, node drained)
:mod:`raymod.cluster.snapshots`      what a lost server is restored from
:mod:`raymod.cluster.full_gradient`  SVRG's snapshot and full-gradient pass
==================================== ===================================================

Data from a row source (``NDArrayIter``, ``ArrowIter``) goes to the object store once and
workers receive row ids; other batches are sliced and sent by value.
"""
from __future__ import annotations

import functools
import itertools
import logging
from typing import Any, Callable

import numpy as np

from ..array_view import plain, show
from ..base import MXNetError
from ..context import as_numpy
from ..io import DataDesc
from ..io.base import contiguous_range
from ..operator import pack_props
from ..parallel.executor_group import _desc
from ..parallel.slicing import batch_axis, split_input_slice, take_slice
from ..sparse import RowSparseArray, is_sparse
from ..sparse.table_init import TableInit
from ..symbol.storage import variable_stype
from ..symbol import Symbol
from . import moments, snapshots
from .controller import RestoreServers
from .full_gradient import FullGradient
from .plan import SliceTasks, cuts
from .pool import WorkerPool, WorkersUnavailable
from .recovery.server_lost import ServerRecovery
from .recovery.worker_hung import HungWorkers
from .recovery.worker_lost import WorkerLossRecovery
from .snapshots import Snapshots
from .steps import Planned, StepRunner, StepState, merge_metric
from .windows import WindowRunner, settled

__all__ = ["RayExecutorGroup"]

_GROUP_IDS = itertools.count(1)


class RayExecutorGroup(WindowRunner, StepRunner, WorkerLossRecovery, HungWorkers,
                       ServerRecovery, Snapshots, FullGradient):
    """A network bound on every worker of a :class:`WorkerPool`.

    Parameters
    ----------
    symbol : Symbol
        The network.
    pool : WorkerPool
        The worker actors.
    data_shapes, label_shapes : list of DataDesc or (name, shape)
        Shapes of the whole (global) batch.
    param_names : list of str
        Trainable arguments.
    for_training, inputs_need_grad : bool
        As for DataParallelExecutorGroup.
    shared_group : RayExecutorGroup, optional
        Share parameters (and step state) with this group: bucketing.
    fixed_param_names, grad_req, state_names
        As for DataParallelExecutorGroup.
    work_load_list : list of float, optional
        The module's share of the batch per context it was given (default: one context).
        Results asked for per device (``merge_multi_context=False``) come back in that many
        parts, cut as MXNet cuts a batch over its contexts, whatever the number of workers:
        a script sees the devices it asked for.
    """

    #: row_sparse tables live on the KVServers, never whole on the driver (``Module``
    #: hands their initial values over as TableInit recipes)
    tables_on_servers = True

    def __init__(self, symbol: Symbol, pool: WorkerPool, data_shapes: Any, label_shapes: Any,
                 param_names: list, for_training: bool, inputs_need_grad: bool,
                 shared_group: "RayExecutorGroup | None" = None, logger: Any = logging,
                 fixed_param_names: list | None = None, grad_req: Any = "write",
                 state_names: list | None = None, work_load_list: list | None = None):
        self.symbol, self.pool, self.logger = symbol, pool, logger
        self.workload = list(work_load_list) if work_load_list else [1]
        self.param_names = list(param_names)
        self.aux_names = symbol.list_auxiliary_states()
        self.output_names = symbol.list_outputs()
        self.output_layouts = [batch_axis(symbol[n].attr("__layout__")) for n in self.output_names]
        self.for_training, self.inputs_need_grad = for_training, inputs_need_grad
        self.fixed_param_names = list(fixed_param_names or [])
        self.state_names = list(state_names or [])
        self.grad_req = grad_req
        self.state = shared_group.state if shared_group is not None else StepState()
        if shared_group is None:  # the servers' recovery, for the pool's controller
            pool.controller.register(RestoreServers, self._restore)
        self.group_id = next(_GROUP_IDS)
        self.num_device = max(1, pool.spec.gpus_per_worker)
        self.execs: list = []  # no executors in this process
        self._fetched: list | None = None  # (summed, as fetched) gradients: see grad_arrays
        self._last: list | None = None
        #: ranks that completed a step of this bucket: the others get a first step's
        #: deadline (they bind and warm up first)
        self._seasoned: set = set()
        self._bind(data_shapes, label_shapes)

    # ---- binding ------------------------------------------------------------------------------
    def _bind(self, data_shapes: Any, label_shapes: Any) -> None:
        data = [DataDesc(n, s, t, l) for n, s, t, l in map(_desc, data_shapes)]
        label = [DataDesc(n, s, t, l) for n, s, t, l in map(_desc, label_shapes or [])]
        args = self.symbol.list_arguments()
        missing = [d.name for d in data + label if d.name not in args]
        if missing:
            raise MXNetError(f"inputs {missing} are not arguments of the symbol; "
                             f"arguments: {', '.join(args)}")
        # what one device would report (MXNet's 1/batch_size), before the states move the cut
        given = data[0].shape[batch_axis(data[0].layout)] if data else 0
        data, label = self._follow_states(data, label)
        sizes = {d.shape[batch_axis(d.layout)] for d in data if batch_axis(d.layout) >= 0}
        if len(sizes) != 1:
            raise MXNetError(f"data inputs disagree on the batch size: {sorted(sizes)}")
        self.batch_size = sizes.pop()
        #: the batch size as the inputs were bound (MXNet's ``rescale_grad = 1/batch_size``);
        #: ``batch_size`` is the length of the axis the batch is cut along
        self.bound_batch_size = given or self.batch_size
        shapes = {d.name: d.shape for d in data + label}
        types = {d.name: d.dtype for d in data + label}
        arg_shapes, out_shapes, aux_shapes = self.symbol.infer_shape(**shapes)
        arg_types, _, aux_types = self.symbol.infer_type(**types)
        if arg_shapes is None:
            raise MXNetError(f"cannot infer the network's shapes from {shapes}")
        by_name = dict(zip(args, zip(arg_shapes, arg_types)))
        # a row_sparse table lives on the servers (by row range) and, a batch's rows at a
        # time, on the workers: the driver holds an empty stand-in, never the table
        tables = {n.name for n in self.symbol.topo()
                  if n.is_variable and variable_stype(n) == "row_sparse"}
        self.param_arrays = [[RowSparseArray.empty(by_name[n][0], by_name[n][1]) if n in tables
                              else np.zeros(by_name[n][0], by_name[n][1])]
                             for n in self.param_names]
        self.aux_arrays = [[np.zeros(s, t)] for s, t in zip(aux_shapes, aux_types)]
        self.data_shapes, self.label_shapes = data, label or None
        self.data_names, self.label_names = [d.name for d in data], [d.name for d in label]
        self._out_shapes = list(zip(self.output_names, map(tuple, out_shapes)))
        self._total_exec_bytes = sum(a[0].nbytes for a in self.param_arrays + self.aux_arrays)
        first = self.slices(self.pool.spec.slices)[0]
        self._find_batch_axes(data + label, first, out_shapes, arg_shapes)
        self._states: list | None = None  # whole-batch states set, cut at each forward
        spec = {"symbol": self.symbol.tojson(), "param_names": self.param_names,
                "data": [self._sliced(d, first) for d in data],
                "label": [self._sliced(d, first) for d in label],
                "for_training": self.for_training, "inputs_need_grad": self.inputs_need_grad,
                "fixed_param_names": self.fixed_param_names, "grad_req": self.grad_req,
                "state_names": self.state_names,
                # the custom ops' classes, by value: workers register them before loading
                "custom_ops": pack_props(self.symbol)}
        self.pool.broadcast("define", self.group_id, spec, key=("define", self.group_id))
        moments.reached("bind", pool=self.pool)

    def _follow_states(self, data: list, label: list) -> tuple[list, list]:
        """The inputs, cut where the states say the batch runs.

        A module with states (an RNN's, shaped (layers, batch, hidden)) whose one data input
        has MXNet's default layout, batch first, while the states do not depend on that axis
        (a language model binds ``(time, batch)`` with no layout, as MXNet's word_lm does):
        on one device nothing is cut, but slices along time would break the states' carry
        from one slice to the next. The data (and each label that agrees with it up to that
        axis, e.g. ``(time, batch)`` beside ``(time, batch, features)``) then get a layout
        with the batch on the axis that the states follow. When no other axis can be cut (the
        states' variables pin the batch size, as word_lm's do), the batch is not cut at all:
        one worker computes each step, as one device would (:attr:`whole_batch_only`)."""
        self.whole_batch_only = False
        if not self.state_names or len(data) != 1:
            return data, label
        desc, args = data[0], self.symbol.list_arguments()

        def states_when_halved(axis: int) -> list | None:
            shape = tuple(n // 2 if k == axis else n for k, n in enumerate(desc.shape))
            try:
                arg_shapes, _, _ = self.symbol.infer_shape_partial(**{desc.name: shape})
            except MXNetError:
                return None
            by_name = dict(zip(args, arg_shapes or []))
            return [by_name.get(n) for n in self.state_names]

        axis, whole = batch_axis(desc.layout), states_when_halved(-1)
        if whole is None or axis < 0 or desc.shape[axis] < 2 \
                or states_when_halved(axis) != whole:
            return data, label
        for k, n in enumerate(desc.shape):
            if k != axis and n >= 2 and states_when_halved(k) not in (None, whole):
                return ([_with_batch_at(desc, k)],
                        [_with_batch_at(d, k) if d.shape[:k + 1] == desc.shape[:k + 1] else d
                         for d in label])
        self.whole_batch_only = True
        self.logger.info("the states of this network pin its batch size: each step runs "
                         "whole on one worker, as on one device")
        return data, label

    def _find_batch_axes(self, descs: list, first: slice, out_shapes: list,
                         arg_shapes: list) -> None:
        """Where the batch runs in each output and state: the axis whose length differs
        between the whole batch's shapes and a slice's (for an output where none does, or
        one slice is the whole batch: its layout's; for a state: -1). Per-slice results are
        joined, and set states cut, along it, so that an output shaped ``(layers, batch,
        hidden)`` comes back whole, as from one device."""
        sliced = {d.name: self._sliced(d, first).shape for d in descs}
        try:
            part_args, part_outs, _ = self.symbol.infer_shape(**sliced)
        except MXNetError:  # e.g. a Reshape that names the whole batch: no axis is known
            part_args = part_outs = None
        args = self.symbol.list_arguments()
        whole_args = dict(zip(args, arg_shapes))
        part_args = dict(zip(args, part_args or [None] * len(args)))
        found = [_differing_axis(w, p)
                 for w, p in zip(out_shapes, part_outs or [None] * len(out_shapes))]
        self._out_axes = [axis if axis >= 0 else layout
                          for axis, layout in zip(found, self.output_layouts)]
        self._state_axes = [_differing_axis(whole_args.get(n), part_args.get(n))
                            for n in self.state_names]

    @staticmethod
    def _sliced(desc: DataDesc, s: slice) -> DataDesc:
        axis = batch_axis(desc.layout)
        shape = tuple(s.stop - s.start if k == axis else n for k, n in enumerate(desc.shape))
        return DataDesc(desc.name, shape, desc.dtype, desc.layout)

    def slices(self, count: int) -> list[slice]:
        """The batch cut into ``count`` slices (fewer if the batch is smaller, one when it
        cannot be cut): the same list each time (a window of steps pickles it once); not
        to be changed."""
        if self.whole_batch_only:
            count = 1
        return _even_slices(self.batch_size, max(1, min(count, self.batch_size)))

    def reshape(self, data_shapes: Any, label_shapes: Any) -> None:
        """New whole-batch shapes; workers bind the matching slice shapes on first use."""
        self._bind(data_shapes, label_shapes)

    def get_output_shapes(self) -> list[tuple[str, tuple]]:
        """(name, whole-batch shape) of each output."""
        return list(self._out_shapes)

    # ---- parameters ---------------------------------------------------------------------------
    @settled
    def set_params(self, arg_params: dict, aux_params: dict, allow_extra: bool = False) -> None:
        """Send values to every worker (one object-store copy) and to the kvstore servers."""
        tables = self._tables()
        # a table's value may be a TableInit: the servers make its rows
        args = {n: arg_params[n] if n in tables else as_numpy(arg_params[n])
                for n in self.param_names if n in arg_params}
        aux = {n: as_numpy(aux_params[n]) for n in self.aux_names if n in aux_params}
        ref = self.pool._ray.put(({n: v for n, v in args.items() if n not in tables}, aux))
        self.pool.broadcast("set_params_ref", [ref], key="set_params")
        st = self.state
        if st.kv is not None and st.update_on_kvstore and args:
            values = [_table_value(v) if n in tables else v for n, v in args.items()]
            self._with_servers("set_params", lambda: st.kv.init(list(args), values))
            st.weights = None  # workers now hold these values already

    def _tables(self) -> set:
        """Names of the parameters stored as row_sparse tables."""
        return {n for n, a in zip(self.param_names, self.param_arrays)
                if isinstance(a[0], RowSparseArray)}

    @settled
    def get_params(self, arg_params: dict, aux_params: dict) -> None:
        """Parameters from the servers (or a worker), auxiliary states averaged over workers."""
        self._with_servers("get_params", lambda: self._read_params(arg_params, aux_params))

    def _read_params(self, arg_params: dict, aux_params: dict) -> None:
        st = self.state
        moments.reached("get_params", pool=self.pool)
        if st.weights is not None and not st.update_on_kvstore:
            self.pool.call_all("refresh", st.weights)
        on_servers = st.kv is not None and st.update_on_kvstore
        if on_servers and not self.aux_names:  # the workers hold nothing more
            self.pool.call_all("ping")  # but a dead one is noticed here, as at every call
            per_worker = {}
        else:
            per_worker = self.pool.call_all("get_params")
            if not per_worker:
                raise WorkersUnavailable("no live worker holds the parameters")
        args = st.kv.read_all() if on_servers else per_worker[min(per_worker)][0]
        for name in self.param_names:
            if name in args:  # workers hold no table: before a kvstore, the driver has it
                _store(arg_params, name, args[name])
        for name in self.aux_names:
            values = [w[1][name] for w in per_worker.values()]
            _store(aux_params, name, np.mean(values, axis=0).astype(values[0].dtype)
                   if len(values) > 1 else values[0])

    # ---- kvstore ------------------------------------------------------------------------------
    @settled
    def attach_kvstore(self, kv: Any, update_on_kvstore: bool, local_optimizer: Any) -> None:
        """Connect every worker to ``kv``'s servers (after its keys are initialised).

        With ``update_on_kvstore`` the servers run the optimizer and publish weights;
        otherwise they publish summed gradients and each worker applies
        ``local_optimizer`` itself.
        """
        st = self.state
        if self._tables() and not update_on_kvstore:
            raise MXNetError(f"row_sparse tables ({', '.join(sorted(self._tables()))}) are "
                             "updated on the kvstore servers only; unset "
                             "MXNET_UPDATE_ON_KVSTORE=0")
        st.kv, st.update_on_kvstore, st.weights = kv, update_on_kvstore, None
        kv.num_workers_attached = len(self.pool)
        self.pool.broadcast("connect", kv.layout, kv.servers, kv.compression_threshold,
                            None if update_on_kvstore else local_optimizer, key="connect")

    @settled
    def get_updater_states(self) -> bytes:
        """The workers' local optimizer states (identical on every worker): the first's."""
        self.pool.call_all("refresh", self.state.weights)
        states = self.pool.call_all("updater_states")
        return states[min(states)]

    @settled
    def set_updater_states(self, blob: bytes) -> None:
        """Load local optimizer states on every worker."""
        self.pool.broadcast("set_updater_states", blob, key="updater_states")

    # ---- the fused step -----------------------------------------------------------------------
    def train_step(self, batch: Any, metric: Any = None, svrg: bool = False,
                   on_done: Callable[[], None] | None = None) -> None:
        """One training step on the workers: forward, backward, push, update, metric.

        With ``svrg`` the workers push ``g(w) - g(w~)`` (see :meth:`full_gradient`). If a
        KVServer dies, the servers go back to the driver's last snapshot and the steps since
        are replayed before this one runs again: no completed step is lost.

        With run-ahead (``Workers.run_ahead`` > 1, a sync kvstore that runs the optimizer)
        the step is only planned here: every window of steps the workers get one call
        each for all of them and run them back to back, waiting on the servers between
        steps, while the driver plans the next window. ``metric`` is then updated, and
        ``on_done()`` called, when the step has completed, in step order; every other
        method of this group first waits for the steps in flight (:meth:`drain`).
        """
        st = self.state
        if st.kv is None:
            raise MXNetError("train_step needs init_optimizer first (no kvstore attached)")
        if not self._runs_ahead():
            self.drain()
            self._train_step_now(batch, metric, svrg)
            if on_done is not None:
                on_done()
            return
        if metric is not st.metric:
            self.drain()
            st.metric = metric
            st.kv.set_metric(metric)
        if st.snapshot is None or st.snapshot_writes != st.kv.writes:
            self.drain()
            self._snapshot_now()
        tasks = self._step_tasks(batch)
        st.planned.append(Planned(st.step, tasks, svrg, on_done))
        st.replay.append((st.step, tasks, svrg))
        st.step += 1
        if st.step % snapshots.SNAPSHOT_EVERY == 0 and not self._snapshot_when_done(st.step - 1):
            self.drain()
            self._snapshot_now()
        elif len(st.planned) >= self._window():
            self._launch()

























    @property
    def step_completed_at(self) -> float | None:
        """``time.time()`` when the step whose batch-end callbacks run now completed on the
        servers (None outside such a call: the step completed just now)."""
        return self.state.completed_at

    def _call_one(self, method: str, *args: Any) -> Any:
        """``method`` on one live worker (the next one if it dies meanwhile)."""
        while True:
            if not len(self.pool):
                self.pool.short_of_workers(method)
            rank = self.pool.ranks[0]
            out = self.pool.gather({rank: getattr(self.pool.workers[rank], method).remote(*args)})
            if rank in out:
                return out[rank]

    def _assign(self, tasks: list[dict]) -> dict[int, list[dict]]:
        """Contiguous runs of slices per live worker, as even as possible."""
        ranks = self.pool.ranks
        if not ranks:
            raise MXNetError("no live workers")
        edges = cuts(len(tasks), len(ranks))
        return {r: tasks[a:b] for r, a, b in zip(ranks, edges[:-1], edges[1:]) if b > a}

    def _tasks(self, batch: Any, slices: list[slice], labels: bool,
               copy: bool = False) -> list[dict]:
        """One task per slice: row ids of a known source, or the arrays themselves (views
        of the batch's, or of one copy of them with ``copy``)."""
        known = self._source_rows(batch, copy)
        if known is not None:
            return list(SliceTasks(self.group_id, *known, slices))
        data = [_on_host(a, copy) for a in batch.data]
        label = [_on_host(a, copy) for a in (batch.label or [])] if labels else []
        d_axes = [batch_axis(d.layout) for d in self.data_shapes]
        l_axes = [batch_axis(d.layout) for d in self.label_shapes or []]
        return [dict(group=self.group_id, slice=i,
                     data=[take_slice(a, ax, s) for a, ax in zip(data, d_axes)],
                     label=[take_slice(a, ax, s) for a, ax in zip(label, l_axes)])
                for i, s in enumerate(slices)]

    def _step_tasks(self, batch: Any) -> list[dict] | SliceTasks:
        """A planned training step's tasks (with their own copies of anything the
        iterator may reuse), compact when its rows come from a known source."""
        slices = self.slices(self.pool.spec.slices)
        known = self._source_rows(batch, copy=True)
        if known is not None:
            return SliceTasks(self.group_id, *known, slices)
        tasks = self._tasks(batch, slices, labels=True, copy=True)
        for t in tasks:
            t["num_slices"] = len(tasks)
        return tasks

    def _source_rows(self, batch: Any, copy: bool) -> tuple[tuple, Any] | None:
        """``(source entry, rows)`` when the batch's rows come from a known row source
        (a ``range`` when they are contiguous: it pickles to a few bytes), else None."""
        source, rows = getattr(batch, "source", None), getattr(batch, "index", None)
        if source is None or rows is None or len(rows) != self.batch_size:
            return None
        if any(batch_axis(d.layout) != 0 for d in self.data_shapes + (self.label_shapes or [])):
            return None
        rows = np.asarray(rows)
        span = contiguous_range(rows)
        if span is not None:
            rows = range(span.start, span.stop)
        elif copy:
            rows = np.array(rows)
        return self.pool.source(source), rows

    # ---- the step in separate calls -------------------------------------------------------
    @settled
    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Forward on the workers, one slice each; outputs stay there until asked for.

        A worker lost meanwhile (score, predict) has been forgotten by the controller: the
        live workers run the whole forward again; a lost server is restored first."""
        is_train = self.for_training if is_train is None else is_train
        self._with_servers("forward", lambda: self._forward(data_batch, is_train))

    def _forward(self, data_batch: Any, is_train: bool) -> None:
        self._last, self._fetched = None, None
        moments.reached("forward", pool=self.pool)
        while self._last is None:  # the controller gives up on endless losses
            self.pool.poll()
            slices = self.slices(len(self.pool))
            tasks = self._tasks(data_batch, slices, labels=True)
            for t in tasks:
                t["num_slices"] = len(tasks)
                if self._states is not None:
                    t["states"] = [take_slice(s, axis, slices[t["slice"]]) if axis >= 0 else s
                                   for s, axis in zip(self._states, self._state_axes)]
            plan = self._assign(tasks)
            weights = self.state.weights
            refs = {r: self.pool.workers[r].forward.remote(ts, weights, is_train)
                    for r, ts in plan.items()}
            if len(self.pool.gather(refs)) == len(refs):
                self._last = [(r, plan[r]) for r in sorted(plan)]

    def _require_last(self, what: str) -> list:
        if self._last is None:
            raise MXNetError(f"{what} needs a forward pass first")
        return self._last

    def _per_worker(self, method: str, per_slice: Callable | None = None) -> dict:
        refs = {}
        for rank, tasks in self._require_last(method):
            args = () if per_slice is None else per_slice(tasks)
            args = args if isinstance(args, tuple) else (args,)
            refs[rank] = getattr(self.pool.workers[rank], method).remote(*args)
        out = self.pool.gather(refs)
        if len(out) != len(refs):
            raise MXNetError(f"a worker died during {method}; run the step again")
        return out

    @settled
    def backward(self, out_grads: list | None = None) -> None:
        """Backward on the workers; whole-batch ``out_grads`` are sliced for each."""
        if not self.for_training:
            raise MXNetError("backward needs a group bound with for_training=True")
        slices = self.slices(len(self._require_last("backward")))
        self._fetched = None
        if out_grads is None:
            self._per_worker("backward", lambda ts: None)
            return
        grads = [as_numpy(g) for g in out_grads]
        self._per_worker("backward", lambda ts: [
            [take_slice(g, ax, slices[t["slice"]]) if ax >= 0 else g
             for g, ax in zip(grads, self._out_axes)] for t in ts])

    @property
    def grad_arrays(self) -> list:
        """Per trainable parameter, ``[gradient]``: the last backward's gradient of the
        whole batch (its slices' gradients summed), fetched from the workers on first use;
        None for a parameter without one. As from one device: what a script does to these
        arrays in place (MXNet's clipping by the global norm) is what :meth:`update` then
        applies. Empty before a backward."""
        if self._last is None or not self.for_training:
            return []
        if self._fetched is None:
            totals: dict = {}
            for part in self._per_worker("grads").values():
                for name, g in part.items():  # (the object store's arrays are read-only)
                    totals[name] = np.array(g) if name not in totals else totals[name] + g
            summed = [[show(totals.get(n))] for n in self.param_names]
            self._fetched = [summed, {n: g.copy() for n, g in totals.items()}]
        return self._fetched[0]

    def _changes(self) -> dict | None:
        """``{name: changed - as fetched}`` of the gradients a script changed in place."""
        if self._fetched is None:
            return None
        summed, original = self._fetched
        changes = {n: as_numpy(g) - original[n] for n, (g,) in zip(self.param_names, summed)
                   if g is not None and not np.array_equal(as_numpy(g), original[n])}
        return changes or None

    @settled
    def update(self) -> None:
        """Push the last backward's gradients and close the step on the servers."""
        st = self.state
        if st.kv is None:
            raise MXNetError("update needs init_optimizer first (no kvstore attached)")
        step = st.step
        published = {}
        # gradients changed in the driver: the slice-0 push carries the difference, so the
        # servers' sum over slices is the changed whole-batch gradient
        changes, first = self._changes(), min(t["slice"] for _, ts in self._last for t in ts)
        for out in self._per_worker("push", lambda ts: (step, changes if any(
                t["slice"] == first for t in ts) else None)).values():
            published.update(out)
        self._fetched = None
        self._finish(step, [t["slice"] for _, ts in self._last for t in ts], published)

    def _ordered(self, method: str) -> list:
        out = self._per_worker(method)
        parts = []
        for rank, tasks in self._last:
            parts.extend(out[rank])
        return parts

    @settled
    def get_outputs(self, merge_multi_context: bool = True, begin: int = 0,
                    end: int | None = None) -> list:
        """Outputs of the last forward, fetched from the workers now."""
        parts = self._ordered("outputs")
        end = len(self.output_names) if end is None else end
        per = [[p[k] for p in parts] for k in range(begin, end)]
        return self._per_context(per, self._out_axes[begin:end], merge_multi_context)

    @settled
    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """Input gradients of the last backward, fetched from the workers."""
        if not self.inputs_need_grad:
            raise MXNetError("get_input_grads needs bind(inputs_need_grad=True)")
        parts = self._ordered("input_grads")
        per = [[p[k] for p in parts] for k in range(len(self.data_names))]
        return self._per_context(per, [batch_axis(d.layout) for d in self.data_shapes],
                                 merge_multi_context)

    @settled
    def get_states(self, merge_multi_context: bool = True) -> list:
        """State inputs of the last forward, per slice."""
        parts = self._ordered("get_states")
        per = [[p[k] for p in parts] for k in range(len(self.state_names))]
        return self._per_context(per, self._state_axes, merge_multi_context)

    def _per_context(self, per: list[list], layouts: list[int], merge: bool) -> list:
        """Per-slice ``per`` as one array each (``merge``), or as one part per context of
        the module (MXNet's cut of the batch by ``work_load_list``)."""
        merged = _gather(per, layouts, True)
        if merge:
            return merged
        return [[take_slice(m, axis, s) for s in split_input_slice(m.shape[axis], self.workload)]
                if axis >= 0 else [m] * len(self.workload) for m, axis in zip(merged, layouts)]

    @settled
    def set_states(self, states: Any = None, value: Any = None) -> None:
        """Set the state inputs on every worker (``value``, or one array per state)."""
        if (states is None) == (value is None):
            raise ValueError("set_states takes exactly one of states and value")
        flat = None if states is None else [as_numpy(s[0] if isinstance(s, list) else s)
                                            for s in states]
        if flat is not None and any(axis >= 0 for axis in self._state_axes):
            # whole-batch states: each worker gets its slice's rows with its next forward
            self._states = flat
            return
        self._states = None
        self.pool.call_all("set_states", flat, value)

    @settled
    def update_metric(self, eval_metric: Any, labels: Any, pre_sliced: bool = False) -> None:
        """Metric of the last forward, computed on the workers and merged here."""
        last = self._require_last("update_metric")
        if labels is None:
            per_slice = None
        else:
            slices = self.slices(len(last))
            label_axes = [batch_axis(d.layout) for d in self.label_shapes or []] or \
                [0] * len(labels)
            per_slice = [[take_slice(as_numpy(lab), ax, slices[t["slice"]])
                          for lab, ax in zip(labels, label_axes)]
                         for _, ts in last for t in ts]
        refs, cursor = {}, 0
        for rank, tasks in last:
            part = None if per_slice is None else per_slice[cursor:cursor + len(tasks)]
            cursor += len(tasks)
            refs[rank] = self.pool.workers[rank].metric_states.remote(eval_metric, part)
        states = {}
        for out in self.pool.gather(refs).values():
            states.update(out)
        merge_metric(eval_metric, [states[k] for k in sorted(states)])

    @settled
    def install_monitor(self, monitor: Any) -> None:
        """Install ``monitor`` on every worker's executors (it prints in the worker's log)."""
        self.pool.broadcast("install_monitor", monitor, key="monitor")

    def setup_kvstore(self, kv: Any, optimizer: Any, update_on_kvstore: bool, arg_params: dict,
                      compression_params: dict | None = None,
                      corrections: dict | None = None) -> None:
        """``init_optimizer``'s kvstore set-up, as one call: compression, the servers'
        optimizer, the initial values, correction keys (SVRG's full gradient, see
        ``DistKVStore.add_correction_keys``), the workers' connections. A server lost during
        it is replaced and the whole set-up (idempotent) runs again; then the first recovery
        snapshot is taken."""
        from ..model import _initialize_kvstore
        st = self.state
        self.drain()
        st.kv, st.snapshot, st.replay = kv, None, []  # a loss now means: set up again

        def setup() -> None:
            moments.reached("init_optimizer", pool=self.pool)
            if compression_params:
                kv.set_gradient_compression(compression_params)
            if update_on_kvstore:
                kv.set_optimizer(optimizer)
            _initialize_kvstore(kv, self.param_arrays, arg_params, self.param_names,
                                update_on_kvstore)
            if corrections:
                kv.add_correction_keys(corrections)
            self.attach_kvstore(kv, update_on_kvstore, optimizer)

        self._with_servers("init_optimizer", setup)
        if kv.mode == "sync":
            self._snapshot_now()
            self._tend_standbys()


@functools.lru_cache(maxsize=64)
def _even_slices(batch_size: int, count: int) -> list[slice]:
    return split_input_slice(batch_size, [1] * count)




def _table_value(value: Any) -> Any:
    """A table's init value for the kvstore: a TableInit as is, an array as a row_sparse
    array holding every row."""
    return value if isinstance(value, TableInit) else RowSparseArray.full(as_numpy(value))


def _on_host(array: Any, copy: bool) -> Any:
    """A batch's array as a host array (a csr one stays csr), copied with ``copy``."""
    array = plain(array)
    if is_sparse(array):
        return array.on_host(copy)
    return np.array(as_numpy(array)) if copy else as_numpy(array)


def _store(target: dict, name: str, value: np.ndarray) -> None:
    if name in target and target[name].shape == value.shape:
        target[name][...] = value
    else:
        target[name] = np.array(value)


def _with_batch_at(desc: DataDesc, axis: int) -> DataDesc:
    """``desc`` with a layout that puts the batch on ``axis`` (``'TN'``, ``'TNC'``, ...)."""
    layout = "".join("N" if i == axis else "T" if i < axis else "C"
                     for i in range(len(desc.shape)))
    return DataDesc(desc.name, desc.shape, desc.dtype, layout)


def _differing_axis(whole: Any, part: Any) -> int:
    """The first axis where two shapes differ (-1: none, or either unknown)."""
    if not whole or not part or len(whole) != len(part):
        return -1
    return next((k for k, (w, p) in enumerate(zip(whole, part)) if w != p), -1)


def _gather(per: list[list], layouts: list[int], merge: bool) -> list:
    if not merge:
        return per
    return [parts[0] if len(parts) == 1 or axis < 0 else np.concatenate(parts, axis=axis)
            for parts, axis in zip(per, layouts)]



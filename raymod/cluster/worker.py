"""``Worker``: the body of one Ray worker actor.

A worker owns a :class:`~raymod.parallel.DataParallelExecutorGroup` per (network, input
shapes) on its own devices (``rm.cpu(0)``, or ``rm.gpu(0..k-1)`` for k GPUs), all sharing one
set of parameter arrays: the first group bound (the "root", e.g. the default bucket) owns
them. One call runs a whole training step for the slices it is given: read the slice's rows,
forward, backward, push the packed gradient to every KVServer shard tagged
``(step, slice)``, update a metric, and return only small results.

On the machine of its KVServers a CPU worker copies no parameter or gradient bytes: its
executors compute with the parameters in place in the servers' published blocks (read-only
views) and write gradients straight into the block its push hands over (see
:mod:`raymod.kvstore.client`). Anything that writes parameters here (``set_params``, SVRG's
snapshot swap) first gives the executors private copies again.
"""
from __future__ import annotations

import os
import pickle
import time
from typing import Any, Callable

import numpy as np

from .. import actor_setup, array_view
from ..context import array_module, as_numpy, context_of, cpu, gpu
from ..io import DataBatch, DataDesc
from ..kvstore.client import ShardClient
from ..kvstore.server import ServerLost
from ..operator import unpack_props
from ..optimizer import Updater
from . import reaper
from ..parallel import DataParallelExecutorGroup
from ..profiling import profiled
from ..sparse import RowSparseArray, is_sparse
from ..sparse.row_sparse import sum_rows
from ..sparse.rows_needed import row_finders
from ..symbol import load_json
from .plan import expand_window

__all__ = ["Worker"]


#: RAYMOD_CPU_CLOCK=1 times the phases in this thread's CPU seconds (bench/profile_scale.py)
_now = time.thread_time if os.environ.get("RAYMOD_CPU_CLOCK") else time.perf_counter


class _Clock:
    """Seconds spent per phase of a call, for the driver's step timings."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._t = _now()

    def lap(self, phase: str) -> None:
        now = _now()
        self.laps[phase] = self.laps.get(phase, 0.0) + now - self._t
        self._t = now


class Worker:
    """One worker actor's state: executor groups, data sources, kvstore connection.

    Parameters
    ----------
    rank : int
        The pool's id for this worker (never reused).
    num_gpus : int
        GPUs Ray gave the actor; 0 runs on ``rm.cpu(0)``.
    setup : tuple
        The driver's :func:`raymod.actor_setup.steps`, run first (e.g. MXNet's compatibility
        layer under ``raymod run``).
    """

    def __init__(self, rank: int, num_gpus: int = 0, setup: tuple = ()):
        actor_setup.apply(setup)
        array_view.keep_bound_plain()  # rebinds go by identity; user code gets views still
        self.rank = rank
        self.contexts = [gpu(i) for i in range(num_gpus)] if num_gpus else [cpu(0)]
        self.specs: dict[int, dict] = {}          # group id -> how to bind it
        self.groups: dict[tuple, DataParallelExecutorGroup] = {}
        self.root: DataParallelExecutorGroup | None = None
        self.sources: dict[int, Any] = {}         # source id -> its RowReader
        self.layout = None
        self.client: ShardClient | None = None     # pushes to and reads from the KVServers
        self.local_updater: Updater | None = None  # servers aggregate, this worker updates
        self.version = -1
        self.finders: dict[int, dict] = {}  # group id -> {table: how to find a batch's rows}
        self.monitor = None
        self.snapshot: list | None = None          # SVRG's w~, per parameter and device
        self.last: list[tuple[dict, DataParallelExecutorGroup, DataBatch]] = []
        # id(flat block view) -> (that view, it in its parameter's shape): the client hands
        # out the same views for a block every step, so the executors see the same arrays
        self._shaped: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def ready(self) -> dict:
        """Who and where this worker is (the pool waits on this to know it started)."""
        return {"rank": self.rank, **reaper.identity(),
                "contexts": [str(c) for c in self.contexts]}

    def ping(self) -> int:
        """Nothing but an answer: the driver learns this worker is alive (its rank)."""
        return self.rank

    # ---- set-up -------------------------------------------------------------------------------
    def define(self, group_id: int, spec: dict) -> None:
        """Learn how to bind a network; bind it now for a representative slice.

        ``spec`` holds the symbol JSON, per-slice data/label descriptors and the bind
        options of the driver's group; ``spec['shared']`` names the group whose parameters
        it shares (bucketing), or None for the root.
        """
        unpack_props(spec.get("custom_ops"))  # the driver's custom ops, before the JSON
        spec = dict(spec, symbol=load_json(spec["symbol"]))
        self.specs[group_id] = spec
        self.finders[group_id] = row_finders(spec["symbol"])
        self._group(group_id, spec["data"], spec["label"])

    def _group(self, group_id: int, data: list, label: list | None) -> DataParallelExecutorGroup:
        key = (group_id, tuple((d.name, d.shape) for d in data),
               tuple((d.name, d.shape) for d in label or []))
        group = self.groups.get(key)
        if group is None:
            spec = self.specs[group_id]
            group = DataParallelExecutorGroup(
                spec["symbol"], self.contexts, None, data, label or None, spec["param_names"],
                spec["for_training"], spec["inputs_need_grad"], shared_group=self.root,
                fixed_param_names=spec["fixed_param_names"], grad_req=spec["grad_req"],
                state_names=spec["state_names"])
            if self.root is None:
                self.root = group
            if self.monitor is not None:
                group.install_monitor(self.monitor)
            self.groups[key] = group
        return group

    def set_params(self, arg_params: dict, aux_params: dict) -> None:
        """Copy parameter values into the shared parameter arrays (a row_sparse table's
        rows come from the servers at each step instead)."""
        self._own_params()
        tables = self._tables()
        self.root.set_params({n: v for n, v in arg_params.items() if n not in tables},
                             aux_params, allow_extra=True)

    def set_params_ref(self, ref: list) -> None:
        """:meth:`set_params` from ``[ref]`` to ``(arg_params, aux_params)`` put once."""
        import ray
        self.set_params(*ray.get(ref[0]))

    def get_params(self) -> tuple[dict, dict]:
        """Current parameters and auxiliary states (device average), as host arrays."""
        args, aux = {}, {}
        tables = self._tables()
        if tables:  # the servers hold them: never gather a table here
            names, root = self.root.param_names, self.root
            for name, arrays in zip(names, root.param_arrays):
                if name not in tables:
                    args[name] = as_numpy(arrays[0])
            root.get_params({}, aux)
            return args, aux
        self.root.get_params(args, aux)
        return args, aux

    def _tables(self) -> set:
        """Names of the parameters held as row_sparse tables (their rows pulled per step)."""
        if self.root is None:
            return set()
        return {n for n, a in zip(self.root.param_names, self.root.param_arrays)
                if isinstance(a[0], RowSparseArray)}

    def local_state(self) -> dict | None:
        """What a joining worker copies from this one: parameters, auxiliary states, the
        weights version they are at and the local optimizer's states (None before a bind)."""
        if self.root is None:
            return None
        return {"params": self.get_params(), "version": self.version,
                "updater": None if self.local_updater is None else
                self.local_updater.get_states()}

    def set_local_state(self, state: dict | None) -> None:
        """Take another worker's :meth:`local_state` (a joiner, before its first step)."""
        if state is None or self.root is None:
            return
        self.set_params(*state["params"])
        self.version = state["version"]
        if state["updater"] is not None and self.local_updater is not None:
            self.local_updater.set_states(state["updater"])

    def connect(self, layout: Any, servers: list, threshold: float | None,
                optimizer: Any = None) -> None:
        """Push gradients to these KVServer shards; with ``optimizer``, apply the servers'
        summed gradients locally instead of reading new weights."""
        if self.client is not None:
            self.client.close()
        self.layout, self.client = layout, ShardClient(layout, servers, threshold)
        self.local_updater = None if optimizer is None else Updater(optimizer)

    def set_servers(self, servers: list) -> None:
        """Push to these KVServer handles from now on (after a server was replaced)."""
        self.client.set_servers(servers)

    def close(self) -> None:
        """Release shared-memory blocks (before the actor is killed)."""
        if self.client is not None:
            self.client.close()

    def updater_states(self) -> bytes:
        """States of the local optimizer (when servers only aggregate)."""
        return self.local_updater.get_states()

    def set_updater_states(self, blob: bytes) -> None:
        """Load states from :meth:`updater_states`."""
        self.local_updater.set_states(blob)

    def install_monitor(self, monitor: Any) -> None:
        """Install a monitor on every executor, now and in groups bound later."""
        self.monitor = monitor
        for group in self.groups.values():
            group.install_monitor(monitor)

    # ---- one step -----------------------------------------------------------------------------
    def run_step(self, step: int, tasks: list[dict], weights: tuple | None,
                 metric: Any = None, svrg: bool = False) -> dict:
        """Forward, backward and push every slice in ``tasks``; returns metric states.

        With ``svrg`` the pushed gradient is ``g(w) - g(w~)`` on the slice, ``w~`` being the
        snapshot taken by :meth:`take_snapshot` (the servers add the full gradient).
        """
        clock = _Clock()
        self.refresh(weights, in_place=not svrg)
        clock.lap("refresh")
        states, published = self._slices(step, tasks, metric, svrg, clock, to_server=False)
        return {"rank": self.rank, "metrics": states, "published": published,
                "seconds": clock.laps}

    def run_planned_window(self, window: int, plan: bytes | list, place: tuple | None,
                           metric: bytes | None, generation: int, readers: dict,
                           weights: tuple | None) -> dict:
        """:meth:`run_window` as the driver's windows call it. ``plan`` and ``metric`` come
        pickled by the driver of this run (plain data; the metric as the user made it; a
        large plan as ``[ref]`` to its bytes). With ``place = (position, workers)`` the
        plan is every worker's (:func:`~raymod.cluster.plan.pack_window`) and this worker
        takes its own slices, else it is this worker's ``[(step, tasks, svrg), ...]``.
        Tasks name their row source by id; ``readers`` holds ``{id: [ref]}`` of the
        sources this worker was not sent before (it keeps every one)."""
        import ray
        for sid, ref in readers.items():
            if sid not in self.sources:
                self.sources[sid] = ray.get(ref[0])
        plan = pickle.loads(plan if isinstance(plan, bytes) else ray.get(plan[0]))
        if place is not None:
            plan = expand_window(plan, *place)
        return self.run_window(window, plan, weights,
                               None if metric is None else pickle.loads(metric),
                               generation=generation)

    def run_window(self, window: int, plan: list[tuple], weights: tuple | None,
                   metric: Any = None, timeout: float | None = None,
                   generation: int = 0) -> dict:
        """Run several steps back to back without the driver: ``plan`` is
        ``[(step, tasks, svrg), ...]`` in step order (``tasks`` may be empty).

        Before each step after the first (and before the first when ``weights`` is None)
        the worker waits on the servers until the step before it is finished, then reads
        its values. Each slice's metric state travels with its push (the servers keep it
        once per slice), so nothing of a step is lost with this worker. Returns the steps
        run and, when the driver aborted the window (a worker was lost) or a wait passed
        ``timeout`` seconds, the step it stopped before. ``generation`` is the kvstore's
        restore count: it is part of the values' version, as in ``weights_after``.
        """
        with profiled("worker"):
            return self._run_window(window, plan, weights, metric, timeout, generation)

    def _run_window(self, window: int, plan: list[tuple], weights: tuple | None, metric: Any,
                    timeout: float | None, generation: int) -> dict:
        clock = _Clock()
        done, finished = [], None  # finished: (step, values) when our push completed it
        for i, (step, tasks, svrg) in enumerate(plan):
            if not tasks:
                continue
            if i == 0 and weights is not None:
                self.refresh(weights, in_place=not svrg)
            elif finished is not None and finished[0] == step - 1:
                self.refresh((("step", step - 1, generation), finished[1]), in_place=not svrg)
            elif self.version != ("step", step - 1, generation):
                try:
                    published = self.client.wait_done(step - 1, window, timeout)
                except ServerLost as err:
                    raise ServerLost(f"worker {self.rank}: {err}") from None
                if published is None:
                    return {"rank": self.rank, "steps": done, "stopped": step,
                            "seconds": clock.laps}
                self.refresh((("step", step - 1, generation), published), in_place=not svrg)
            clock.lap("wait")
            # the next step needs this one's values: its push waits for them (one message)
            then_wait = None
            if i + 1 < len(plan) and plan[i + 1][1] and plan[i + 1][0] == step + 1:
                then_wait = (window, timeout)
            _, published = self._slices(step, tasks, metric, svrg, clock, to_server=True,
                                        then_wait=then_wait)
            done.append(step)
            if then_wait is not None:
                if published is None:  # aborted (or timed out) after our push was taken
                    return {"rank": self.rank, "steps": done, "stopped": step + 1,
                            "seconds": clock.laps}
                finished = (step, published)
            elif len(published) == len(self.client.servers):  # no need to wait for it
                finished = (step, [published[s] for s in range(len(published))])
        return {"rank": self.rank, "steps": done, "stopped": None, "seconds": clock.laps}

    def _slices(self, step: int, tasks: list[dict], metric: Any, svrg: bool, clock: _Clock,
                to_server: bool, then_wait: tuple | None = None) -> tuple[dict, Any]:
        """Forward, backward and push each slice of one step; metric states go back to the
        caller or, ``to_server``, with the pushes. Returns the states and ``{shard:
        published}`` of the shards the pushes completed; with ``then_wait = (window,
        timeout)`` the last push also waits for the step, and the values after it per shard
        come back instead (None: the window was aborted)."""
        states, published = {}, {}
        if self.monitor is not None:  # one monitor step per training step, all slices in it
            self.monitor.tic()
        for task in tasks:
            self._bind_grads(step)
            group, batch = self._forward(task, True)
            group.backward()
            clock.lap("compute")
            state = None
            if metric is not None:  # now: the snapshot pass below overwrites the outputs
                state = self._metric_state(metric, group, batch.label)
                if not to_server:
                    states[task["slice"]] = state
            clock.lap("metric")
            grads = self._grads(group)
            if svrg:
                at_w = {n: g.copy() for n, g in grads.items()}  # the next pass reuses them
                at_snapshot = self._snapshot_grads(task)
                grads = {n: at_w[n] - at_snapshot[n] for n in at_w}
            clock.lap("compute")
            if then_wait is not None and task is tasks[-1]:
                try:
                    published = self.client.push_and_wait(
                        step, task["slice"], grads, task.get("num_slices"),
                        state if to_server else None, *then_wait,
                        sent=lambda: clock.lap("push"))
                except ServerLost as err:
                    raise ServerLost(f"worker {self.rank}: {err}") from None
                clock.lap("wait")
            else:
                published.update(self._push(step, task["slice"], grads,
                                            task.get("num_slices"),
                                            state if to_server else None))
                clock.lap("push")
        if self.monitor is not None:  # printed in this worker's log, which Ray forwards
            self.monitor.toc_print()
        return states, published

    def refresh(self, weights: tuple | None, in_place: bool = True) -> None:
        """Bring parameters to the published ``(version, [ref per shard])`` values; with
        ``in_place``, bind them to the servers' blocks where this machine has them."""
        if weights is None or weights[0] == self.version:
            return
        import ray
        published = weights[1]
        if weights[0] == "latest":  # dist_async: whatever the servers hold now
            published = [r[0] for r in ray.get([s.published.remote()
                                                for s in self.client.servers])]
        root, n = self.root, len(self.contexts)
        views = {}
        if in_place and self.local_updater is None and self._host_only:
            try:
                views = self.client.value_views(published)
            except ServerLost as err:
                raise ServerLost(f"worker {self.rank}: {err}") from None
        if self._host_only:
            self._bind_params(views)
        if self.local_updater is None:  # the new weights go straight into every device's copy
            targets = [{name: a[k] for name, a in zip(root.param_names, root.param_arrays)
                        if name not in views} for k in range(n)]
            if not targets[0]:  # every parameter is read in place
                self.version = weights[0]
                return
        else:  # the payload is the summed gradient: update each device's copy here
            targets = [{name: g[k] for name, g in zip(root.param_names, root.grad_arrays)
                        if g[k] is not None} for k in range(n)]

        def unpack(shard: int, payload: dict) -> None:
            for arrays in targets:
                self.layout.unpack(shard, payload, arrays)

        try:
            self.client.read(published, unpack)
        except ServerLost as err:
            raise ServerLost(f"worker {self.rank}: {err}") from None
        if self.local_updater is not None:
            index = {name: i for i, name in enumerate(root.param_names)}
            for k, grads in enumerate(targets):
                names = list(grads)
                weights_k = {name: w[k] for name, w in zip(root.param_names, root.param_arrays)}
                self.local_updater([index[m] * n + k for m in names], [grads[m] for m in names],
                                   [weights_k[m] for m in names])
        self.version = None if weights[0] == "latest" else weights[0]

    def _forward(self, task: dict, is_train: bool) -> tuple:
        batch = self._load(task)
        spec = self.specs[task["group"]]
        data = [DataDesc(d.name, tuple(a.shape), d.dtype, d.layout)
                for d, a in zip(spec["data"], batch.data)]
        label = None
        if spec["label"] and batch.label:
            label = [DataDesc(d.name, tuple(a.shape), d.dtype, d.layout)
                     for d, a in zip(spec["label"], batch.label)]
        elif spec["label"]:
            label = spec["label"]
        group = self._group(task["group"], data, label)
        self._pull_rows(task["group"], group, batch)
        if "states" in task:  # this slice's rows of the states the driver set
            group.set_states(states=[[s] * len(self.contexts) for s in task["states"]])
        group.forward(batch, is_train=is_train)
        return group, batch

    def _pull_rows(self, group_id: int, group: DataParallelExecutorGroup,
                   batch: DataBatch) -> None:
        """Pull the rows of every row_sparse table that this slice reads (all rows when the
        graph does not say which) into the devices' copies."""
        finders = self.finders.get(group_id) or {}
        if not finders or self.client is None:
            return
        spec = self.specs[group_id]
        inputs = dict(zip([d.name for d in spec["data"]], batch.data))
        inputs.update(zip([d.name for d in spec["label"] or []], batch.label or []))
        for name, arrays in zip(group.param_names, group.param_arrays):
            if name not in finders or not isinstance(arrays[0], RowSparseArray):
                continue
            find = finders[name]
            ids = None if find is None else find(inputs)
            try:
                rows = self.client.pull_rows(name, ids)
            except ServerLost as err:
                raise ServerLost(f"worker {self.rank}: {err}") from None
            for holder in arrays:
                holder[:] = rows

    def _load(self, task: dict) -> DataBatch:
        """The slice's arrays: rows read through the source's reader, or sent by value."""
        if "rows" in task:
            sid, ref = task["source"]
            if sid not in self.sources:  # the RowReader, kept with whatever it caches
                import ray
                self.sources[sid] = ray.get(ref[0])
            rows = task["rows"]
            if isinstance(rows, range):  # a contiguous slice, sent compactly
                rows = np.arange(rows.start, rows.stop)
            data, label = self.sources[sid].take(rows)
            return DataBatch(list(data), list(label))
        return DataBatch(task["data"], task.get("label") or [])

    # ---- zero copy on the servers' machine ---------------------------------------------------
    @property
    def _host_only(self) -> bool:
        """One CPU device: its executors can compute in shared-memory blocks."""
        return len(self.contexts) == 1 and self.contexts[0].device_type == "cpu"

    def _rebind(self, replace: dict) -> None:
        """Point every group's executors at other arrays (``id(old) -> new``)."""
        if replace:
            for group in self.groups.values():
                group.rebind(replace)

    def _point_at(self, arrays: list[tuple[str, np.ndarray]], views: dict,
                  private: Callable[[np.ndarray], np.ndarray | None]) -> None:
        """Rebind each ``(name, array)`` to ``views[name]`` (a flat block range) where there
        is one; otherwise to ``private(array)`` when that gives a new array."""
        replace = {}  # `arrays` keeps the old arrays alive, so no id is reused meanwhile
        for name, array in arrays:
            view = views.get(name)
            if view is not None:
                new = self._shaped.get(id(view))
                if new is None or new[0] is not view:  # once per block view, not per step
                    if len(self._shaped) > 8 * len(arrays) + 16:  # views of blocks gone by
                        self._shaped.clear()
                    new = (view, view.reshape(array.shape))
                    self._shaped[id(view)] = new
                new = new[1]
                if new is not array:  # (a view of another block, or of a block gone by)
                    replace[id(array)] = new
                continue
            new = private(array)  # a fresh array, or None when this one is private already
            if new is not None:
                replace[id(array)] = new
        self._rebind(replace)

    def _bind_params(self, views: dict) -> None:
        """Parameters in ``views`` (key -> flat read-only array) are computed with in place;
        any other parameter that is still such a view gets a private copy."""
        self._point_at([(n, a) for n, (a,) in zip(self.root.param_names,
                                                   self.root.param_arrays)
                        if not is_sparse(a)],
                       views, lambda a: None if a.flags.writeable else a.copy())

    def _own_params(self) -> None:
        """Private, writable parameter arrays again (before anything writes them here)."""
        if self.root is not None and self._host_only:
            self._bind_params({})

    def _bind_grads(self, step: int | None) -> None:
        """Compute the next slice's gradients into the outbox its push of ``step`` will take
        (None: into private arrays)."""
        if self.root is None or not self._host_only or not self.root.grad_arrays:
            return
        views = {} if step is None or self.client is None else \
            self.client.gradient_views(self.client.next_slot(step))
        reqs = self.root.execs[0].grad_req
        self._point_at([(n, g) for n, (g,) in zip(self.root.param_names, self.root.grad_arrays)
                        if g is not None and not is_sparse(g)],
                       {n: v for n, v in views.items() if reqs.get(n) == "write"},
                       lambda g: None if g.flags.owndata else np.zeros_like(g))

    def memory_report(self) -> dict:
        """How many parameters are read in place from a KVServer's block, and how many
        gradients are written straight into a push block, out of how many."""
        if self.root is None:
            return {"params": 0, "params_in_place": 0, "grads_in_place": 0}
        params = [a[0] for a in self.root.param_arrays]
        return {"params": len(params),
                "params_in_place": sum(not is_sparse(a) and not a.flags.writeable
                                       for a in params),
                "grads_in_place": sum(1 for g in self.root.grad_arrays
                                      if g[0] is not None and not is_sparse(g[0])
                                      and not g[0].flags.owndata)}

    @staticmethod
    def _grads(group: DataParallelExecutorGroup) -> dict:
        """Each trainable parameter's gradient summed over the devices, on the host."""
        grads = {}
        for name, per_device in zip(group.param_names, group.grad_arrays):
            if per_device[0] is None:
                continue
            if isinstance(per_device[0], RowSparseArray):  # a table's rows: pushed as rows
                grads[name] = sum_rows([RowSparseArray(as_numpy(g.data), as_numpy(g.indices),
                                                       g.shape, check=False)
                                        for g in per_device], per_device[0].shape)
                continue
            total = as_numpy(per_device[0])
            for g in per_device[1:]:
                total = total + as_numpy(g)
            grads[name] = total
        return grads

    def _push(self, step: int, slice_id: int, grads: dict,
              num_slices: int | None = None, metric: Any = None) -> dict:
        """Push one slice's gradients (and metric state) to every shard; returns
        ``{shard: published}`` of the shards this push completed (their new values)."""
        try:
            return self.client.push(step, slice_id, grads, num_slices, metric)
        except ServerLost as err:
            raise ServerLost(f"worker {self.rank}: {err}") from None

    @staticmethod
    def _metric_state(metric: Any, group: DataParallelExecutorGroup, labels: list) -> dict:
        metric.reset()
        group.update_metric(metric, labels)
        return metric.part_state()  # one update: its record is all a merge needs

    # ---- SVRG ---------------------------------------------------------------------------------
    def take_snapshot(self, weights: tuple | None) -> dict:
        """Keep a copy of the current parameters as SVRG's snapshot ``w~``; returns it."""
        self.refresh(weights)
        self.snapshot = [[a.copy() for a in per_device] for per_device in self.root.param_arrays]
        return self.snapshot_values()

    def snapshot_values(self) -> dict:
        """The snapshot ``w~`` (device 0's copy) as host arrays, by parameter name."""
        return {n: as_numpy(per[0]) for n, per in zip(self.root.param_names, self.snapshot)}

    def set_snapshot_ref(self, ref: list) -> None:
        """Make the values put at ``ref[0]`` (name -> array) the snapshot on every device."""
        import ray
        values = ray.get(ref[0])
        self.snapshot = [[array_module(context_of(a)).asarray(values[name]).copy()
                          for a in per_device]
                         for name, per_device in zip(self.root.param_names,
                                                     self.root.param_arrays)]

    def _swap_params(self, values: list) -> list:
        """Put ``values`` (per parameter, per device) into the parameter arrays; returns the
        previous values."""
        self._own_params()
        previous = []
        for arrays, new in zip(self.root.param_arrays, values):
            previous.append([a.copy() for a in arrays])
            for a, v in zip(arrays, new):
                a[...] = v
        return previous

    def _snapshot_grads(self, task: dict) -> dict:
        """Gradients of the task's slice at the snapshot weights."""
        current = self._swap_params(self.snapshot)
        try:
            group, _ = self._forward(task, True)
            group.backward()
            return self._grads(group)
        finally:
            self._swap_params(current)

    def full_grad(self, tasks: list[dict], weights: tuple | None) -> dict:
        """Summed gradients (float64) at the current weights over whole batches, and their
        count (a padded batch counts ``1 - pad/batch_size``, as MXNet)."""
        self.refresh(weights)
        sums: dict = {}
        count = 0.0
        for task in tasks:
            group, batch = self._forward(task, True)
            group.backward()
            for name, g in self._grads(group).items():  # float64: order barely matters
                sums[name] = g.astype(np.float64) if name not in sums else sums[name] + g
            count += 1.0 - task.get("pad", 0) / group.batch_size
        return {"sums": sums, "count": count}

    # ---- the step in separate calls (Module.forward / backward / update) -------------------------
    def forward(self, tasks: list[dict], weights: tuple | None, is_train: bool) -> None:
        """Forward each slice, keeping outputs for the calls that follow."""
        self.refresh(weights)
        self._bind_grads(None)  # the step is driven call by call: keep gradients private
        self.last = []
        for task in tasks:
            group, batch = self._forward(task, is_train)
            self.last.append((task, group, batch))

    def backward(self, out_grads: list | None) -> None:
        """Backward of the last forward; ``out_grads`` has one list per slice (or None)."""
        for i, (_, group, _) in enumerate(self.last):
            group.backward(None if out_grads is None else out_grads[i])

    def push(self, step: int, changes: dict | None = None) -> dict:
        """Push the gradients of the last backward; ``changes`` (by parameter name) are
        added to the first slice's: what the driver changed in the whole-batch sum."""
        published = {}
        for task, group, _ in self.last:
            grads = self._grads(group)
            for name, delta in (changes or {}).items():
                grads[name] = grads[name] + delta
            changes = None
            published.update(self._push(step, task["slice"], grads, task.get("num_slices")))
        return published

    def grads(self) -> dict:
        """The last backward's gradients, summed over this worker's slices, by name."""
        total: dict = {}
        for _, group, _ in self.last:
            for name, g in self._grads(group).items():
                total[name] = g if name not in total else total[name] + g
        return total

    def outputs(self) -> list:
        """Outputs of the last forward: per slice, the list of merged output arrays."""
        return [[as_numpy(o) for o in group.get_outputs()] for _, group, _ in self.last]

    def input_grads(self) -> list:
        """Input gradients of the last backward, per slice."""
        return [[as_numpy(g) for g in group.get_input_grads()] for _, group, _ in self.last]

    def metric_states(self, metric: Any, labels: list | None) -> dict:
        """Metric states of the last forward per slice; labels per slice or the slice's own."""
        out = {}
        for i, (task, group, batch) in enumerate(self.last):
            out[task["slice"]] = self._metric_state(
                metric, group, batch.label if labels is None else labels[i])
        return out

    def get_states(self) -> list:
        """State inputs of the last forward's group, per slice."""
        return [[as_numpy(s) for s in group.get_states()] for _, group, _ in self.last]

    def set_states(self, states: list | None, value: Any) -> None:
        """Set the state inputs of every bound group (one array per state, or a value)."""
        for group in self.groups.values():
            if value is not None:
                group.set_states(value=value)
            else:
                group.set_states(states=[[s] * len(self.contexts) for s in states])

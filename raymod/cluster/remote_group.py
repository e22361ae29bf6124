"""``RayExecutorGroup``: the executor-group interface of a Module, run on Ray worker actors.

It offers what :class:`~raymod.parallel.DataParallelExecutorGroup` offers a Module (bind
shapes, parameters, forward, backward, outputs, metrics), plus the step protocol:

- a step's global batch is cut into a fixed number of slices (``Workers.num_slices``), not
  one per live worker, so the gradient sum and therefore the trajectory do not depend on
  membership; slices are handed out to the live workers in contiguous runs;
- :meth:`train_step` is the whole step in one call per worker (forward, backward, push to
  the KVServers, metric); the driver then closes the step on the servers and keeps the refs
  of the new weights, which it hands to the workers with their next step;
- a worker that dies mid-step has its slices recomputed by the others; the servers keep one
  contribution per ``(step, slice)``. The pool's "lost" event is stamped when the actor
  error is seen; once the step completes, a "recovered" event gives the slices recomputed,
  the driver's re-planning time and the seconds from detection to the completed step.

Data from a row source (``NDArrayIter``, ``ArrowIter``) goes to the object store once and
workers receive row ids; other batches are sliced and sent by value.
"""
from __future__ import annotations

import functools
import itertools
import logging
import pickle
import statistics
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from ..base import MXNetError
from ..context import as_numpy
from ..io import DataDesc
from ..io.base import contiguous_range
from ..kvstore.server import ServerLost
from ..operator import pack_props
from ..parallel.executor_group import _desc
from ..parallel.slicing import batch_axis, split_input_slice, take_slice
from ..symbol import Symbol
from .controller import RestoreServers, ServerDied
from .plan import RankPlan, SliceTasks, cuts, pack_window
from .pool import WorkerPool, WorkersUnavailable
from . import moments, waits
from .workers import MIN_RUN_AHEAD

__all__ = ["RayExecutorGroup"]

_GROUP_IDS = itertools.count(1)
_WINDOW_IDS = itertools.count(1)
#: the driver keeps a KVServer snapshot this often (steps), plus the log of steps since
SNAPSHOT_EVERY = 50
#: a window plan shared by every worker travels inline in each call up to this size, else
#: once through the object store (Ray copies an argument over 100 KiB per call)
INLINE_PLAN_BYTES = 32 * 1024


def _settled(method: Callable) -> Callable:
    """Run ``method`` after the run-ahead steps in flight have completed (see ``drain``)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        self.drain()
        return method(self, *args, **kwargs)
    return run


class StepTimings:
    """Where the fused steps' time went: driver wall time and the workers' phases."""

    def __init__(self) -> None:
        self.steps = 0
        self.wall = 0.0
        self.phases: dict[str, float] = {}

    def add(self, wall: float, slice_results: Any) -> None:
        self.steps += 1
        self.wall += wall
        seen = set()
        for r in slice_results:  # one entry per worker, not per slice
            if r["rank"] in seen:
                continue
            seen.add(r["rank"])
            for phase, sec in r["seconds"].items():
                self.phases[phase] = self.phases.get(phase, 0.0) + sec

    def add_window(self, wall: float, steps: int, worker_results: Any) -> None:
        """A run-ahead window: ``steps`` steps in ``wall`` seconds, one result per worker."""
        self.steps += steps
        self.wall += wall
        for r in worker_results:
            for phase, sec in r["seconds"].items():
                self.phases[phase] = self.phases.get(phase, 0.0) + sec

    def summary(self) -> dict:
        """Mean milliseconds per step: wall, and each worker phase summed over workers."""
        n = max(self.steps, 1)
        return {"steps": self.steps, "wall_ms": 1e3 * self.wall / n,
                **{f"{k}_ms": 1e3 * v / n for k, v in self.phases.items()}}


class _Losses:
    """What worker losses cost one step: made only once a worker has died."""

    def __init__(self) -> None:
        self.detected: float | None = None  # time.time() of the first loss seen
        self.ranks: list[int] = []
        self.slices = 0                     # slice runs handed to others (a re-run may die too)
        self.replan_s = 0.0                 # driver time forgetting the dead and re-assigning
        self.wait_s = 0.0                   # waiting for replacements below min_workers

    def merge(self, other: "_Losses") -> None:
        """Add the losses of a later attempt at the same steps."""
        if other.detected is not None:
            self.detected = other.detected if self.detected is None else self.detected
        self.ranks += other.ranks
        self.slices += other.slices
        self.replan_s += other.replan_s
        self.wait_s += other.wait_s

    def add(self, loss: Any, rank: int, slices: int) -> None:
        # loss is None when the pool had already dropped the rank (seen by another caller)
        detected = time.time() if loss is None else loss.detected
        self.detected = detected if self.detected is None else self.detected
        self.ranks.append(rank)
        self.slices += slices


class _StepState:
    """What every bucket's group of one module shares: step counter, kvstore, weights."""

    def __init__(self) -> None:
        self.step = 0
        self.kv = None
        self.update_on_kvstore = True
        self.weights: tuple | None = None   # (version, refs) the workers must read next
        self.timings = StepTimings()
        self.snapshot: tuple[int, list] | None = None  # (last step in it, state per shard)
        self.snapshot_due: int | None = None  # step the servers snapshot when it finishes
        self.replay_losses: Any = None      # a window's losses, counted by a replay too
        self.snapshot_writes = -1           # kv.writes when it was taken
        self.replay: list[tuple] = []       # (step, tasks, options) since the snapshot
        self.recoveries: list[dict] = []
        # run-ahead windows (see RayExecutorGroup.train_step)
        self.planned: list[_Planned] = []   # steps not yet handed to the workers
        self.inflight: list[_Window] = []   # windows handed out, oldest first
        self.metric: Any = None             # the metric the windows' slices update
        self.finished: deque = deque()      # (planned step, metric states) to merge, in order
        self.finishing = False              # merging / calling back right now
        self.step_seconds: deque = deque(maxlen=64)  # recent step wall times (deadlines)
        self.window_ended = 0.0             # perf_counter when the last window completed
        self.median_step: float | None = None  # of step_seconds, after each window
        self.launched = False               # a window was launched since the last drain


@dataclass
class _Planned:
    """A step cut into slice tasks, waiting to be handed out or to complete."""

    step: int
    tasks: list[dict]
    svrg: bool
    on_done: Callable[[], None] | None


@dataclass
class _Window:
    """Steps handed to every live worker in one call each (``refs``: rank -> (ref, plan))."""

    wid: int
    steps: list[_Planned]
    refs: dict
    started: float


class RayExecutorGroup:
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
    """

    def __init__(self, symbol: Symbol, pool: WorkerPool, data_shapes: Any, label_shapes: Any,
                 param_names: list, for_training: bool, inputs_need_grad: bool,
                 shared_group: "RayExecutorGroup | None" = None, logger: Any = logging,
                 fixed_param_names: list | None = None, grad_req: Any = "write",
                 state_names: list | None = None):
        self.symbol, self.pool, self.logger = symbol, pool, logger
        self.param_names = list(param_names)
        self.aux_names = symbol.list_auxiliary_states()
        self.output_names = symbol.list_outputs()
        self.output_layouts = [batch_axis(symbol[n].attr("__layout__")) for n in self.output_names]
        self.for_training, self.inputs_need_grad = for_training, inputs_need_grad
        self.fixed_param_names = list(fixed_param_names or [])
        self.state_names = list(state_names or [])
        self.grad_req = grad_req
        self.state = shared_group.state if shared_group is not None else _StepState()
        if shared_group is None:  # the servers' recovery, for the pool's controller
            pool.controller.register(RestoreServers, self._restore)
        self.group_id = next(_GROUP_IDS)
        self.num_device = max(1, pool.spec.gpus_per_worker)
        self.execs: list = []  # no executors in this process
        self.grad_arrays: list = []
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
        sizes = {d.shape[batch_axis(d.layout)] for d in data if batch_axis(d.layout) >= 0}
        if len(sizes) != 1:
            raise MXNetError(f"data inputs disagree on the batch size: {sorted(sizes)}")
        self.batch_size = sizes.pop()
        shapes = {d.name: d.shape for d in data + label}
        types = {d.name: d.dtype for d in data + label}
        arg_shapes, out_shapes, aux_shapes = self.symbol.infer_shape(**shapes)
        arg_types, _, aux_types = self.symbol.infer_type(**types)
        if arg_shapes is None:
            raise MXNetError(f"cannot infer the network's shapes from {shapes}")
        by_name = dict(zip(args, zip(arg_shapes, arg_types)))
        self.param_arrays = [[np.zeros(by_name[n][0], by_name[n][1])] for n in self.param_names]
        self.aux_arrays = [[np.zeros(s, t)] for s, t in zip(aux_shapes, aux_types)]
        self.data_shapes, self.label_shapes = data, label or None
        self.data_names, self.label_names = [d.name for d in data], [d.name for d in label]
        self._out_shapes = list(zip(self.output_names, map(tuple, out_shapes)))
        self._total_exec_bytes = sum(a[0].nbytes for a in self.param_arrays + self.aux_arrays)
        first = self.slices(self.pool.spec.slices)[0]
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

    @staticmethod
    def _sliced(desc: DataDesc, s: slice) -> DataDesc:
        axis = batch_axis(desc.layout)
        shape = tuple(s.stop - s.start if k == axis else n for k, n in enumerate(desc.shape))
        return DataDesc(desc.name, shape, desc.dtype, desc.layout)

    def slices(self, count: int) -> list[slice]:
        """The batch cut into ``count`` slices (fewer if the batch is smaller): the same
        list each time (a window of steps pickles it once); not to be changed."""
        return _even_slices(self.batch_size, max(1, min(count, self.batch_size)))

    def reshape(self, data_shapes: Any, label_shapes: Any) -> None:
        """New whole-batch shapes; workers bind the matching slice shapes on first use."""
        self._bind(data_shapes, label_shapes)

    def get_output_shapes(self) -> list[tuple[str, tuple]]:
        """(name, whole-batch shape) of each output."""
        return list(self._out_shapes)

    # ---- parameters ---------------------------------------------------------------------------
    @_settled
    def set_params(self, arg_params: dict, aux_params: dict, allow_extra: bool = False) -> None:
        """Send values to every worker (one object-store copy) and to the kvstore servers."""
        args = {n: as_numpy(arg_params[n]) for n in self.param_names if n in arg_params}
        aux = {n: as_numpy(aux_params[n]) for n in self.aux_names if n in aux_params}
        ref = self.pool._ray.put((args, aux))
        self.pool.broadcast("set_params_ref", [ref], key="set_params")
        st = self.state
        if st.kv is not None and st.update_on_kvstore and args:
            self._with_servers("set_params", lambda: st.kv.init(list(args), list(args.values())))
            st.weights = None  # workers now hold these values already

    @_settled
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
            _store(arg_params, name, args[name])
        for name in self.aux_names:
            values = [w[1][name] for w in per_worker.values()]
            _store(aux_params, name, np.mean(values, axis=0).astype(values[0].dtype)
                   if len(values) > 1 else values[0])

    # ---- kvstore ------------------------------------------------------------------------------
    @_settled
    def attach_kvstore(self, kv: Any, update_on_kvstore: bool, local_optimizer: Any) -> None:
        """Connect every worker to ``kv``'s servers (after its keys are initialised).

        With ``update_on_kvstore`` the servers run the optimizer and publish weights;
        otherwise they publish summed gradients and each worker applies
        ``local_optimizer`` itself.
        """
        st = self.state
        st.kv, st.update_on_kvstore, st.weights = kv, update_on_kvstore, None
        kv.num_workers_attached = len(self.pool)
        self.pool.broadcast("connect", kv.layout, kv.servers, kv.compression_threshold,
                            None if update_on_kvstore else local_optimizer, key="connect")

    @_settled
    def get_updater_states(self) -> bytes:
        """The workers' local optimizer states (identical on every worker): the first's."""
        self.pool.call_all("refresh", self.state.weights)
        states = self.pool.call_all("updater_states")
        return states[min(states)]

    @_settled
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
        st.planned.append(_Planned(st.step, tasks, svrg, on_done))
        st.replay.append((st.step, tasks, svrg))
        st.step += 1
        if st.step % SNAPSHOT_EVERY == 0 and not self._snapshot_when_done(st.step - 1):
            self.drain()
            self._snapshot_now()
        elif len(st.planned) >= self._window():
            self._launch()

    def _window(self) -> int:
        """Steps per run-ahead window now: ``Workers.window`` at the recent step time. The
        first default window after a drain holds MIN_RUN_AHEAD steps: the workers idle
        while the driver plans it, and it plans the next, full one far faster than they
        run these (a window more costs the driver a call per worker)."""
        spec, st = self.pool.spec, self.state
        full = spec.window(len(self.pool), st.median_step)
        if spec.run_ahead is not None or st.launched:
            return full
        return min(full, MIN_RUN_AHEAD)

    def _runs_ahead(self) -> bool:
        st = self.state
        return (self._window() > 1 and st.kv.mode == "sync"
                and st.update_on_kvstore)

    def _train_step_now(self, batch: Any, metric: Any, svrg: bool) -> None:
        """The step with one driver call per worker, completed before returning."""
        st = self.state
        tasks = self._tasks(batch, self.slices(self.pool.spec.slices), labels=True)
        if st.kv.mode == "sync" and (st.snapshot is None or st.snapshot_writes != st.kv.writes):
            self._snapshot_now()
        while True:
            try:
                # short of workers after a short-handed step: waits, or stops the run
                self.pool.poll()
                self._run_step(tasks, metric, svrg)
                break
            except ServerLost as err:
                if st.kv.mode != "sync":
                    raise
                self._server_lost(err, "step", st.step - 1)
        self.pool.controller.done("step")
        moments.reached("step", pool=self.pool)
        if st.kv.mode == "sync":
            st.replay.append((st.step - 1, tasks, svrg))
            if st.step % SNAPSHOT_EVERY == 0:
                self._snapshot_now()

    # ---- run-ahead windows ------------------------------------------------------------------
    def drain(self) -> None:
        """Hand out the planned steps and wait until every step in flight has completed
        (metrics merged, callbacks called): afterwards the servers, the workers and
        ``state.weights`` agree on the last step, as after a step-by-step ``train_step``."""
        st = self.state
        if st.planned:
            self._launch()
        while st.inflight:
            self._collect_oldest()
        st.launched = False
        self._finish_steps()

    def _launch(self) -> None:
        """Give every live worker its slices of the planned steps in one call."""
        st = self.state
        planned, st.planned = st.planned, []
        if not planned:
            return
        st.launched = True
        self.pool.busy = self._busy_ranks
        try:
            self.pool.poll()  # joins, replacements, leaves (or a stop when short) between windows
        except ServerLost:
            # a joiner's set-up met a lost server: these steps and the windows in flight
            # complete through the recovery path, which restores the servers first
            st.inflight.append(_Window(0, planned, {}, time.perf_counter()))
            self._recover_windows()
            return
        wid = next(_WINDOW_IDS)
        sources: dict[int, list] = {}  # each row source's ref once, not once per slice
        plans = self._plans([(p.step, p.tasks, p.svrg) for p in planned], sources)
        # the first step's weights are known only when nothing is in flight
        weights = None if st.inflight else st.weights
        # Each call carries plain bytes, small enough for Ray to inline: the plan, pickled
        # by the C pickler (cloudpickle calls back into Python for every task dict), the
        # metric pickled once, and only the readers this worker was not sent before. An
        # object ref inside an argument costs Ray a borrow protocol per call.
        from ray import cloudpickle
        metric = None if st.metric is None else cloudpickle.dumps(st.metric)
        refs = {rank: (self.pool.workers[rank].run_planned_window.remote(
                    wid, blob, place, metric, st.kv.generation,
                    self.pool.readers_to_send(rank, sources), weights), plan)
                for rank, (blob, place, plan) in plans.items()}
        st.inflight.append(_Window(wid, planned, refs, time.perf_counter()))
        moments.reached("window.launched", pool=self.pool, steps=len(planned))
        while len(st.inflight) > 1:  # the workers have the next window queued meanwhile
            self._collect_oldest()

    def _plans(self, steps: list[tuple], sources: dict) -> dict[int, tuple]:
        """Each live worker's share of ``[(step, tasks, svrg), ...]``: ``{rank: (bytes to
        send, place, plan)}``; ``plan`` iterates as the worker's ``(step, tasks, svrg)``;
        the row sources' refs go into ``sources``."""
        ranks = self.pool.ranks
        if all(isinstance(tasks, SliceTasks) for _, tasks, _ in steps):
            # one plan for every worker, pickled once: each cuts out its own slices
            for _, tasks, _ in steps:
                sources[tasks.source[0]] = tasks.source[1]
            shared = pickle.dumps(pack_window(steps), protocol=5)
            if len(shared) > INLINE_PLAN_BYTES:  # (shuffled rows) one copy, not one per call
                shared = [self.pool._ray.put(shared)]
            return {rank: (shared, (i, len(ranks)), RankPlan(steps, i, len(ranks)))
                    for i, rank in enumerate(ranks)}
        per_rank: dict[int, list] = {rank: [] for rank in ranks}  # tasks by value
        for step, tasks, svrg in steps:
            chunks = self._assign([_without_source_ref(t, sources) for t in tasks])
            for rank, plan in per_rank.items():
                plan.append((step, chunks.get(rank, []), svrg))
        return {rank: (pickle.dumps(plan, protocol=5), None, plan)
                for rank, plan in per_rank.items()}

    def _busy_ranks(self) -> set:
        return {rank for win in self.state.inflight for rank in win.refs}

    def _deadline(self, steps: int, ranks: Any = ()) -> float:
        """Seconds ``steps`` steps may take before the laggards count as hung (longer when
        one of ``ranks`` has not completed a step of this bucket yet: it binds first)."""
        first = any(rank not in self._seasoned for rank in ranks)
        return self.pool.deadlines.step(steps, first=first)

    def _collect_oldest(self) -> None:
        """Wait for the oldest window; on a loss, a hung worker or a lost server, re-plan.

        A window may take a step deadline per step, but the servers must finish a step
        within each deadline: when one passes with no step finished, the workers the first
        unfinished step waits for are stopped as hung."""
        st = self.state
        win = st.inflight[0]
        waiting = {ref: rank for rank, (ref, _) in win.refs.items()}
        results, idle = {}, 0.0
        ray = self.pool._ray
        while waiting:
            # every result in already, in one wait and one get; else the first to come
            done = waits.ready(list(waiting))
            deadline = self._deadline(1, waiting.values())
            if not done:
                done, _ = waits.wait(list(waiting), deadline - idle, num_returns=1)
            if not done:
                # hung once no step has finished for a whole deadline (the servers know
                # when they last finished one: a deadline, not two)
                idle = st.kv.idle_seconds()
                if idle < deadline:  # still moving: a slow step, not a hung worker
                    continue
                self._stop_hung(win)
                self._recover_windows()
                return
            try:
                outs = waits.get(done, self._deadline(1), "window results")
            except (ServerLost, ray.exceptions.RayActorError, waits.DeadlineMissed):
                self._recover_windows()
                return
            for ref, out in zip(done, outs):
                if out["stopped"] is not None:  # aborted: cannot happen unless we re-plan
                    self._recover_windows()
                    return
                results[waiting.pop(ref)] = out
        st.inflight.pop(0)
        # the window's own span: it was queued behind the one before until that ended
        now = time.perf_counter()
        wall, st.window_ended = now - max(win.started, st.window_ended), now
        for _ in win.steps:
            st.step_seconds.append(wall / len(win.steps))
        st.median_step = statistics.median(st.step_seconds)
        self.pool.deadlines.saw(wall, len(win.steps))
        self._seasoned.update(results)
        st.timings.add_window(wall, len(win.steps), results.values())
        self._completed(win.steps)
        moments.reached("window.collected", pool=self.pool)

    def _stop_hung(self, win: _Window) -> None:
        """Kill the workers holding the slices the servers still lack for the first
        unfinished step (they missed the deadline); their calls then fail as losses."""
        st = self.state
        progress = st.kv.progress()
        first = min(p["steps_done"] for p in progress) + 1
        have = set.intersection(*[set(p["pending"].get(first, [])) for p in progress])
        hung = set()
        for w in st.inflight:
            for rank, (ref, plan) in w.refs.items():
                for step, tasks, _ in plan:
                    if step == first and any(t["slice"] not in have for t in tasks):
                        hung.add(rank)
        if not hung:
            raise MXNetError(f"step {first} passed its deadline of "
                             f"{self._deadline(len(win.steps)):.1f} s with every slice pushed")
        self.pool.hung(hung, f"step {first}")

    def _recover_windows(self) -> None:
        """Abort every window in flight, then complete their steps one by one: only the
        slices the servers lack are recomputed, by the live workers (a lost server first
        goes back to the snapshot, and every step since is replayed)."""
        st = self.state
        moments.reached("recovery", pool=self.pool)
        windows, st.inflight = st.inflight, []
        steps = [p for win in windows for p in win.steps]
        losses, server_lost = _Losses(), None
        try:
            st.kv.abort(max(win.wid for win in windows))
        except ServerLost as err:
            server_lost = err
        for win in windows:
            for rank, (ref, plan) in win.refs.items():
                try:
                    waits.get(ref, self._deadline(1, [rank]), f"worker {rank} window abort")
                except ServerLost as err:
                    server_lost = err
                except waits.DeadlineMissed as err:
                    if rank in self.pool.workers:
                        self.pool.hung([rank], "window abort")
                        losses.add(self.pool.lost(rank, err, steps[0].step, during="window"),
                                   rank, 0)
                except self.pool._ray.exceptions.RayActorError as err:
                    if rank in self.pool.workers:
                        losses.add(self.pool.lost(rank, err, steps[0].step, during="window"),
                                   rank, 0)
        self.pool.release_leaving()
        self._complete_after_failure(steps, losses, server_lost)

    def _complete_after_failure(self, steps: list[_Planned], losses: _Losses,
                                server_lost: Exception | None) -> None:
        """Complete ``steps`` one at a time after a failure: from the first step some shard
        has not finished or, after a lost server, from the snapshot on (every step since is
        replayed; only ``steps`` are reported)."""
        st = self.state
        while True:
            try:
                if server_lost is not None:  # back to the snapshot, the steps since replayed
                    self._server_lost(server_lost, "window", steps[-1].step, losses)
                    server_lost = None
                first = st.kv.steps_done() + 1
                for p in steps:
                    if p.step >= first:
                        self._rerun(p, losses)
                if losses.ranks:
                    self._recovered(losses, max(first, steps[0].step))
                    losses = _Losses()
                self._completed(steps, recovering=True)
                return
            except ServerLost as err:
                server_lost = err

    def _rerun(self, p: _Planned, losses: _Losses) -> None:
        """Complete step ``p`` on the live workers from the values after the step before:
        the slices some shard lacks are computed again (duplicates are ignored)."""
        st = self.state
        missing = set(st.kv.missing_slices(p.step, [t["slice"] for t in p.tasks]))
        tasks = [t for t in p.tasks if t["slice"] in missing]
        losses.slices += len(tasks) if losses.ranks else 0
        weights = st.kv.weights_after(p.step - 1)
        wid = next(_WINDOW_IDS)
        more = self._dispatch(tasks, lambda ts: ("run_window", wid, [(p.step, ts, p.svrg)],
                                                 weights, st.metric, None, st.kv.generation),
                              lambda out, chunk: None, step=p.step, during="replay")
        if more is not None:
            losses.merge(more)

    # ---- servers lost: the one recovery path ---------------------------------------------
    def _server_lost(self, err: Exception, during: str, through: int | None = None,
                     losses: "_Losses | None" = None) -> None:
        """Report a lost KVServer to the controller, which restores the servers (see
        :meth:`_restore`); the caller then runs its interrupted call again. ``through``: the
        last step the caller needs completed (every logged step up to it is replayed)."""
        self.state.replay_losses = losses  # the restore runs in the first bucket's handler
        self.pool.controller.handle(
            ServerDied(during, str(err).splitlines()[0], through),
            have_snapshot=self.state.snapshot is not None)

    def _restore(self, action: RestoreServers, event: ServerDied) -> None:
        """The controller's ``RestoreServers``: new servers for the dead shards, with the
        values of the driver's last snapshot and every logged step since replayed (or,
        before any snapshot, the kvstore's set-up again); the workers get the new servers."""
        st = self.state
        moments.reached("recovery", pool=self.pool)
        t0 = time.perf_counter()
        st.snapshot_due = None  # the servers forgot it
        if action.source == "setup":
            replaced = st.kv.restart_dead()
            snap_step, redo = None, []
        else:
            snap_step, refs = st.snapshot
            through = st.step - 1 if event.step is None else event.step
            redo = [(step, tasks, svrg) for step, tasks, svrg in st.replay if step <= through]
            replaced = st.kv.restore(refs)
            st.kv.set_metric(st.metric)
        if snap_step is not None:  # (a set-up run again connects the workers itself)
            self.pool.broadcast("set_servers", st.kv.servers, key="servers")
        if redo and not st.update_on_kvstore:  # workers update locally: the old step call
            st.step, st.weights = snap_step + 1, st.kv.weights()
            for step, tasks, svrg in redo:
                self._run_step(tasks, None, svrg, replay=True)
        else:
            losses, st.replay_losses = st.replay_losses or _Losses(), None
            for step, tasks, svrg in redo:
                self._rerun(_Planned(step, tasks, svrg, None), losses)
        st.weights = st.kv.weights() if st.kv.mode == "sync" else ("latest", None)
        event_log = {"event": "kvserver_recovered", "shards": replaced, "during": event.during,
                     "snapshot_step": snap_step, "steps_replayed": len(redo),
                     "seconds": time.perf_counter() - t0, "time": time.time(),
                     "error": event.error}
        st.recoveries.append(event_log)
        self.pool.events.append(event_log)
        self.pool.logger.warning("kvstore servers %s lost during %s: %s, %d steps replayed "
                                 "in %.2f s", replaced, event.during,
                                 "set up again" if snap_step is None else
                                 f"restored the step-{snap_step} snapshot", len(redo),
                                 event_log["seconds"])

    def _completed(self, steps: list[_Planned], recovering: bool = False) -> None:
        """Queue the completed steps' metric states and callbacks, then run the queue
        (a server lost meanwhile takes the failure path first: it held the metrics)."""
        st = self.state
        try:
            metrics = st.kv.take_metrics(steps[-1].step) if st.metric is not None else {}
        except ServerLost:
            if recovering:
                raise
            # back in front of the windows still in flight, which the lost server fails too
            st.inflight.insert(0, _Window(0, steps, {}, time.perf_counter()))
            self._recover_windows()
            return
        for p in steps:
            st.finished.append((p, metrics.get(p.step, {})))
        try:
            self._adopt_snapshot(steps[-1].step)
        except ServerLost:
            pass  # the older snapshot and the whole log stay; the next call meets the loss
        st.weights = None if st.inflight else st.kv.weights_after(steps[-1].step)
        self.pool.release_leaving()
        self.pool.controller.done("window")  # a loss inside the window is repaired now
        self._finish_steps()

    def _finish_steps(self) -> None:
        """Merge each completed step's metric and call its ``on_done``, in step order (a
        callback that drains again only queues more: the outer loop keeps the order)."""
        st = self.state
        if st.finishing:
            return
        st.finishing = True
        try:
            while st.finished:
                p, states = st.finished.popleft()
                if st.metric is not None and states:
                    for state in states.get("parts") or [states["merged"]]:
                        st.metric.merge(state)
                if p.on_done is not None:
                    p.on_done()
        finally:
            st.finishing = False

    def _take_snapshot(self) -> None:
        """Keep the servers' current state; the replay log restarts empty."""
        st = self.state
        st.snapshot, st.snapshot_writes, st.replay = (st.step - 1, st.kv.snapshot()), \
            st.kv.writes, []
        st.snapshot_due = None

    def _snapshot_now(self) -> None:
        """:meth:`_take_snapshot`, a server lost meanwhile restored first (from the older
        snapshot, the steps since replayed)."""
        self._with_servers("snapshot", self._take_snapshot)

    def _snapshot_when_done(self, step: int) -> bool:
        """Ask the servers to snapshot ``step`` (not yet handed out) when they finish it,
        so that the workers need not stop for it; :meth:`_completed` fetches it. False if
        they cannot (then the caller drains and takes one now)."""
        st = self.state
        if st.snapshot_due is not None:  # the last one is still coming: skip this one
            return True
        if st.kv.writes != st.snapshot_writes:
            return False
        try:
            if not st.kv.snapshot_at(step):
                return False
        except ServerLost:
            return False  # the next window meets the loss and recovers it
        st.snapshot_due = step
        return True

    def _adopt_snapshot(self, last: int) -> None:
        """After the steps up to ``last`` completed: fetch the snapshot the servers took of
        the due step, and trim the replay log to the steps after it."""
        st = self.state
        due = st.snapshot_due
        if due is None or last < due:
            return
        st.snapshot_due = None
        states = st.kv.snapshot_of(due)
        if states is not None:  # else (a server replaced meanwhile) keep the older one
            st.snapshot = (due, states)
            st.replay = [entry for entry in st.replay if entry[0] > due]

    def _run_step(self, tasks: list[dict], metric: Any, svrg: bool, replay: bool = False) -> None:
        st = self.state
        step, weights = st.step, st.weights
        t0 = time.perf_counter()
        results, published = {}, {}

        def collect(out: dict, chunk: list) -> None:
            published.update(out["published"])
            for t in chunk:
                results[t["slice"]] = {"metric": out["metrics"].get(t["slice"]),
                                       "seconds": out["seconds"], "rank": out["rank"]}

        losses = self._dispatch(tasks, lambda ts: ("run_step", step, ts, weights,
                                                   None if replay else metric, svrg),
                                collect, step=step)
        self._finish(step, [t["slice"] for t in tasks], published)
        if losses is not None:
            self._recovered(losses, step)
        if not replay:
            st.timings.add(time.perf_counter() - t0, results.values())
            st.step_seconds.append(time.perf_counter() - t0)
            self.pool.deadlines.saw(time.perf_counter() - t0)
        if metric is not None and not replay:
            _merge_metric(metric, [results[t["slice"]]["metric"] for t in tasks])

    def _finish(self, step: int, slice_ids: list[int], published: dict) -> None:
        """Record the step's new weights (refs the completing pushes returned, or asked for)."""
        st = self.state
        if st.kv.mode == "sync":
            if len(published) == len(st.kv.servers):
                st.kv.set_published([published[s] for s in range(len(st.kv.servers))])
            else:  # the worker that completed a shard died before answering
                st.kv.finish_step(step, slice_ids)
            st.weights = st.kv.weights()
        else:
            st.weights = ("latest", None)
        st.step += 1

    def _dispatch(self, tasks: list[dict], call: Callable, collect: Callable,
                  step: int | None = None, during: str = "step") -> _Losses | None:
        """Run ``tasks`` on the live workers; tasks of a worker that dies are re-run by others.

        ``call(tasks_of_one_worker)`` gives ``(method, *args)``; ``collect(result, tasks)``
        takes each worker's answer. Returns None when nobody died, else what the losses
        cost (for the "recovered" event once the caller has completed the step).
        """
        for t in tasks:
            t.setdefault("num_slices", len(tasks))
        pending = list(tasks)
        losses = None  # made on the first loss only: nothing to time while nobody dies
        for attempt in itertools.count():  # the controller gives up on endless losses
            if not pending:
                return losses
            t_plan = time.perf_counter() if attempt else 0.0
            refs = {}
            for rank, chunk in self._assign(pending).items():
                method, *args = call(chunk)
                refs[rank] = (getattr(self.pool.workers[rank], method).remote(*args), chunk)
            if attempt:  # handing a dead worker's slices to the survivors is re-planning
                losses.replan_s += time.perf_counter() - t_plan
            pending, server_lost = [], None
            for rank, ref, chunk in self._as_completed(refs):
                try:
                    out = waits.get(ref, self._deadline(1), f"worker {rank} {during}")
                except ServerLost as err:  # wait for the others before recovering
                    server_lost = err
                    continue
                except (self.pool._ray.exceptions.RayActorError, waits.DeadlineMissed) as err:
                    t_lost = time.perf_counter()
                    loss = self.pool.lost(rank, err, step, tuple(t["slice"] for t in chunk),
                                          during)
                    losses = losses or _Losses()
                    losses.add(loss, rank, len(chunk))
                    pending.extend(chunk)
                    losses.replan_s += time.perf_counter() - t_lost
                    continue
                collect(out, chunk)
                self._seasoned.add(rank)
            if server_lost is not None:
                raise server_lost
            if pending and len(self.pool) < self.pool.spec.min_workers:
                # Without replacements the survivors finish this step anyway (the
                # controller's policy): a worker can push its slice and die before
                # answering, so the servers may already hold the step; finishing it keeps
                # every shard at one step boundary, where the next step stops the run.
                t_wait = time.perf_counter()
                self.pool.short_of_workers(during, mid_step=True)
                losses.wait_s += time.perf_counter() - t_wait

    def _as_completed(self, refs: dict) -> Iterator[tuple[int, Any, list]]:
        """``(rank, ref, chunk)`` in the order the calls end, so that a death is seen when
        it happens, not after the answers of every lower rank. Workers still busy at the
        step deadline are stopped as hung: their calls then end as losses."""
        by_ref = {ref: (rank, chunk) for rank, (ref, chunk) in refs.items()}
        waiting = list(by_ref)
        # a worker given several slices (or batches) may take a deadline for each
        deadline = self._deadline(max(len(chunk) for _, chunk in refs.values()), refs)
        while waiting:
            done, waiting = waits.wait(waiting, deadline, num_returns=1)
            if not done:
                self.pool.hung([by_ref[ref][0] for ref in waiting], f"a {deadline:.1f} s call")
                continue
            rank, chunk = by_ref[done[0]]
            yield rank, done[0], chunk

    def _recovered(self, losses: _Losses, step: int | None, during: str = "step") -> None:
        """Log the "recovered" event of a step (or pass) that completed despite losses."""
        now = time.time()
        self.pool._event("recovered", None, when=now, during=during, step=step,
                         ranks_lost=losses.ranks, slices_recomputed=losses.slices,
                         detected=losses.detected, replan_s=losses.replan_s,
                         wait_s=losses.wait_s, seconds_to_step=now - losses.detected)

    # ---- SVRG -------------------------------------------------------------------------------
    @_settled
    def full_gradient(self, batches: Any) -> tuple[dict, float]:
        """SVRG's snapshot and full-gradient pass over ``batches``, spread over the workers.

        Every worker keeps the current weights as its snapshot ``w~``; then each worker
        sums the gradients of a contiguous run of whole batches at ``w~`` (a lost worker's
        run is recomputed by the others). Returns the summed gradients (added in batch order
        of the runs) and the batch count for the mean.
        """
        st = self.state
        moments.reached("svrg.full_gradient", pool=self.pool)
        if st.kv is not None and st.kv.mode == "sync":
            # a server lost during the pass goes back to the weights w~ is taken from
            self._snapshot_now()
        return self._with_servers("full_gradient", lambda: self._full_gradient(batches))

    def _full_gradient(self, batches: Any) -> tuple[dict, float]:
        st = self.state
        self.set_snapshot(self._call_one("take_snapshot", st.weights))
        tasks = []
        for i, batch in enumerate(batches):
            task = self._tasks(batch, [slice(0, self.batch_size)], labels=True)[0]
            task.update(slice=i, pad=getattr(batch, "pad", None) or 0)
            tasks.append(task)
        if not tasks:
            raise ValueError("update_full_grads: train_data yielded no batches")
        partials = {}
        losses = self._dispatch(tasks, lambda ts: ("full_grad", ts, st.weights),
                                lambda out, chunk: partials.__setitem__(chunk[0]["slice"], out),
                                during="full_gradient")
        if losses is not None:
            self._recovered(losses, st.step, during="full_gradient")
        sums: dict = {}
        for first in sorted(partials):
            for name, g in partials[first]["sums"].items():
                sums[name] = g.copy() if name not in sums else sums[name] + g
        return sums, sum(p["count"] for p in partials.values())

    @_settled
    def set_full_gradient(self, keys: list, means: list) -> None:
        """Give the servers SVRG's full gradient ``mu`` (their optimizer assigns these keys)
        and keep a server snapshot with it: a server lost later restores ``mu`` too."""
        st = self.state
        self._with_servers("full_gradient", lambda: st.kv.push(keys, means))
        if st.kv.mode == "sync":
            self._snapshot_now()

    @_settled
    def snapshot_values(self) -> dict:
        """SVRG's snapshot ``w~`` as host arrays, by parameter name."""
        return self._call_one("snapshot_values")

    @_settled
    def set_snapshot(self, values: dict) -> None:
        """Make ``values`` the snapshot ``w~`` on every worker, joiners included: they are
        put once, by the driver, so they outlive the published weights they came from."""
        self.pool.broadcast("set_snapshot_ref", [self.pool._ray.put(values)], key="snapshot")

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
        own = np.array if copy else (lambda a: a)
        data = [own(as_numpy(a)) for a in batch.data]
        label = [own(as_numpy(a)) for a in (batch.label or [])] if labels else []
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
    @_settled
    def forward(self, data_batch: Any, is_train: bool | None = None) -> None:
        """Forward on the workers, one slice each; outputs stay there until asked for.

        A worker lost meanwhile (score, predict) has been forgotten by the controller: the
        live workers run the whole forward again; a lost server is restored first."""
        is_train = self.for_training if is_train is None else is_train
        self._with_servers("forward", lambda: self._forward(data_batch, is_train))

    def _forward(self, data_batch: Any, is_train: bool) -> None:
        self._last = None
        moments.reached("forward", pool=self.pool)
        while self._last is None:  # the controller gives up on endless losses
            self.pool.poll()
            tasks = self._tasks(data_batch, self.slices(len(self.pool)), labels=True)
            for t in tasks:
                t["num_slices"] = len(tasks)
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
            args = () if per_slice is None else (per_slice(tasks),)
            refs[rank] = getattr(self.pool.workers[rank], method).remote(*args)
        out = self.pool.gather(refs)
        if len(out) != len(refs):
            raise MXNetError(f"a worker died during {method}; run the step again")
        return out

    @_settled
    def backward(self, out_grads: list | None = None) -> None:
        """Backward on the workers; whole-batch ``out_grads`` are sliced for each."""
        if not self.for_training:
            raise MXNetError("backward needs a group bound with for_training=True")
        slices = self.slices(len(self._require_last("backward")))
        if out_grads is None:
            self._per_worker("backward", lambda ts: None)
            return
        grads = [as_numpy(g) for g in out_grads]
        self._per_worker("backward", lambda ts: [
            [take_slice(g, ax, slices[t["slice"]]) if ax >= 0 else g
             for g, ax in zip(grads, self.output_layouts)] for t in ts])

    @_settled
    def update(self) -> None:
        """Push the last backward's gradients and close the step on the servers."""
        st = self.state
        if st.kv is None:
            raise MXNetError("update needs init_optimizer first (no kvstore attached)")
        step = st.step
        published = {}
        for out in self._per_worker("push", lambda ts: step).values():
            published.update(out)
        self._finish(step, [t["slice"] for _, ts in self._last for t in ts], published)

    def _ordered(self, method: str) -> list:
        out = self._per_worker(method)
        parts = []
        for rank, tasks in self._last:
            parts.extend(out[rank])
        return parts

    @_settled
    def get_outputs(self, merge_multi_context: bool = True, begin: int = 0,
                    end: int | None = None) -> list:
        """Outputs of the last forward, fetched from the workers now."""
        parts = self._ordered("outputs")
        end = len(self.output_names) if end is None else end
        per = [[p[k] for p in parts] for k in range(begin, end)]
        return _gather(per, self.output_layouts[begin:end], merge_multi_context)

    @_settled
    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        """Input gradients of the last backward, fetched from the workers."""
        if not self.inputs_need_grad:
            raise MXNetError("get_input_grads needs bind(inputs_need_grad=True)")
        parts = self._ordered("input_grads")
        per = [[p[k] for p in parts] for k in range(len(self.data_names))]
        return _gather(per, [batch_axis(d.layout) for d in self.data_shapes], merge_multi_context)

    @_settled
    def get_states(self, merge_multi_context: bool = True) -> list:
        """State inputs of the last forward, per slice."""
        parts = self._ordered("get_states")
        per = [[p[k] for p in parts] for k in range(len(self.state_names))]
        return _gather(per, [-1] * len(per), merge_multi_context)

    @_settled
    def set_states(self, states: Any = None, value: Any = None) -> None:
        """Set the state inputs on every worker (``value``, or one array per state)."""
        if (states is None) == (value is None):
            raise ValueError("set_states takes exactly one of states and value")
        flat = None if states is None else [as_numpy(s[0] if isinstance(s, list) else s)
                                            for s in states]
        self.pool.call_all("set_states", flat, value)

    @_settled
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
        _merge_metric(eval_metric, [states[k] for k in sorted(states)])

    @_settled
    def install_monitor(self, monitor: Any) -> None:
        """Install ``monitor`` on every worker's executors (it prints in the worker's log)."""
        self.pool.broadcast("install_monitor", monitor, key="monitor")

    # ---- servers guarded by the controller --------------------------------------------------
    def _with_servers(self, during: str, call: Callable[[], Any]) -> Any:
        """``call()``; a KVServer lost meanwhile is restored (see :meth:`_restore`) and the
        call made again, until it completes or the controller gives up."""
        while True:
            try:
                out = call()
            except ServerLost as err:
                self._server_lost(err, during)
                continue
            self.pool.controller.done(during)
            return out

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


@functools.lru_cache(maxsize=64)
def _even_slices(batch_size: int, count: int) -> list[slice]:
    return split_input_slice(batch_size, [1] * count)


def _without_source_ref(task: dict, sources: dict) -> dict:
    """``task`` with its row source's object ref moved into ``sources`` (pickling a ref
    costs Ray far more than a number: a window sends each once)."""
    if "source" not in task:
        return task
    sid, ref = task["source"]
    sources[sid] = ref
    return dict(task, source=(sid, None))


def _store(target: dict, name: str, value: np.ndarray) -> None:
    if name in target and target[name].shape == value.shape:
        target[name][...] = value
    else:
        target[name] = np.array(value)


def _gather(per: list[list], layouts: list[int], merge: bool) -> list:
    if not merge:
        return per
    return [parts[0] if len(parts) == 1 or axis < 0 else np.concatenate(parts, axis=axis)
            for parts, axis in zip(per, layouts)]


def _merge_metric(metric: Any, states: list) -> None:
    """Fold per-slice one-update states into ``metric`` as one whole-batch update."""
    states = [s for s in states if s is not None]
    if not states:
        return
    try:
        metric.merge(metric.merge_parts(states))
    except (ValueError, TypeError):  # a state covering several updates: add them in order
        for s in states:
            metric.merge(s)

"""Run-ahead windows: every live worker gets the slices of many steps in one call.

The driver plans a window of steps (:meth:`WindowRunner._launch`), each worker cuts out its
own slices and runs them back to back, waiting on the servers between steps; the driver
collects windows in step order (:meth:`WindowRunner._collect_oldest`), merges their metric
states and calls their batch-end callbacks in order. A failure inside a window goes to the
recovery of :mod:`.recovery.worker_lost` (a lost or hung worker, a lost server all abort the
windows in flight and complete their steps one by one).
"""
from __future__ import annotations

import functools
import itertools
import pickle
import statistics
import time
from typing import Callable

from ..kvstore.server import ServerLost
from . import moments, waits
from .plan import RankPlan, SliceTasks, pack_window
from .steps import Planned, Window
from .workers import MIN_RUN_AHEAD

__all__ = ["WindowRunner", "settled", "INLINE_PLAN_BYTES", "WINDOW_IDS"]

WINDOW_IDS = itertools.count(1)
#: a window plan shared by every worker travels inline in each call up to this size, else
#: once through the object store (Ray copies an argument over 100 KiB per call)
INLINE_PLAN_BYTES = 32 * 1024


def settled(method: Callable) -> Callable:
    """Run ``method`` after the run-ahead steps in flight have completed (see ``drain``)."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        self.drain()
        return method(self, *args, **kwargs)
    return run


class WindowRunner:
    """Run-ahead windows (mixed into :class:`~raymod.cluster.remote_group.RayExecutorGroup`:
    uses its ``state``, ``pool``, ``_assign``, the deadlines of :mod:`.recovery.worker_hung`
    and the recovery of :mod:`.recovery.worker_lost`)."""

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

    def drain(self) -> None:
        """Hand out the planned steps and wait until every step in flight has completed
        (metrics merged, callbacks called): afterwards the servers, the workers and
        ``state.weights`` agree on the last step, as after a step-by-step ``train_step``."""
        st = self.state
        while st.planned or st.inflight:  # a recovery hands unfinished steps back to plan
            if st.planned:
                self._launch()
            if st.inflight:
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
            st.inflight.append(Window(0, planned, {}, time.perf_counter()))
            self._recover_windows()
            return
        wid = next(WINDOW_IDS)
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
        st.inflight.append(Window(wid, planned, refs, time.perf_counter()))
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
        allowance = None  # a longer deadline while only workers on their first steps lag
        while waiting:
            # every result in already, in one wait and one get; else the first to come
            done = waits.ready(list(waiting))
            if not done:
                deadline = allowance or self._deadline(1)
                done, _ = waits.wait(list(waiting), deadline - idle, num_returns=1)
            if not done:
                # hung once no step has finished for a whole deadline (the servers know
                # when they last finished one: a deadline, not two)
                idle = st.kv.idle_seconds()
                if idle < deadline:  # still moving: a slow step, not a hung worker
                    continue
                allowance = self._stop_hung(win, idle)
                if allowance is not None:  # the laggards still bind: wait on for them
                    continue
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
            allowance = None  # results came in: the ordinary deadline again
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

    def _completed(self, steps: list[Planned], recovering: bool = False) -> None:
        """Queue the completed steps' metric states and callbacks, then run the queue
        (a server lost meanwhile takes the failure path first: it held the metrics)."""
        st = self.state
        try:
            metrics = st.kv.take_metrics(steps[-1].step) if st.metric is not None else {}
        except ServerLost:
            if recovering:
                raise
            # back in front of the windows still in flight, which the lost server fails too
            st.inflight.insert(0, Window(0, steps, {}, time.perf_counter()))
            self._recover_windows()
            return
        for p in steps:
            st.finished.append((p, metrics.get(p.step, {})))
        try:
            self._adopt_snapshot(steps[-1].step)
        except ServerLost:
            pass  # the older snapshot and the whole log stay; the next call meets the loss
        try:
            st.weights = None if st.inflight else st.kv.weights_after(steps[-1].step)
        except ServerLost:
            if recovering:
                raise
            st.weights = None  # the workers wait on the servers, and meet the loss there
        self._tend_standbys()
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
                st.completed_at = states.get("done_at") if states else None
                if p.on_done is not None:
                    p.on_done()
                st.completed_at = None
        finally:
            st.finishing = False


def _without_source_ref(task: dict, sources: dict) -> dict:
    """``task`` with its row source's object ref moved into ``sources`` (pickling a ref
    costs Ray far more than a number: a window sends each once)."""
    if "source" not in task:
        return task
    sid, ref = task["source"]
    sources[sid] = ref
    return dict(task, source=(sid, None))

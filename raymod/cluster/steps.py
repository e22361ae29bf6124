"""What every step of a module on workers shares, and the step protocol one step at a time.

:class:`StepState` is shared by every bucket's executor group of one module: the step
counter, the kvstore, the weights the workers read next, the servers' recovery snapshot and
the log of steps since, and the run-ahead windows in flight (:class:`Planned` steps, each
:class:`Window`). :class:`StepRunner` runs a step with one driver call per worker, completed
before it returns (``Workers.run_ahead=1``, ``dist_async``, or workers running the
optimizer); :mod:`.windows` runs them ahead.
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from ..kvstore.server import ServerLost
from . import moments
from . import snapshots

__all__ = ["StepTimings", "StepState", "Planned", "Window", "StepRunner", "merge_metric"]


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


class StepState:
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
        self.planned: list[Planned] = []   # steps not yet handed to the workers
        self.inflight: list[Window] = []   # windows handed out, oldest first
        self.metric: Any = None             # the metric the windows' slices update
        self.finished: deque = deque()      # (planned step, metric states) to merge, in order
        self.finishing = False              # merging / calling back right now
        self.completed_at: float | None = None  # time.time() the step being called back
        # completed on the servers (batch-end callbacks run later than that under run-ahead)
        self.step_seconds: deque = deque(maxlen=64)  # recent step wall times (deadlines)
        self.window_ended = 0.0             # perf_counter when the last window completed
        self.median_step: float | None = None  # of step_seconds, after each window
        self.launched = False               # a window was launched since the last drain


@dataclass
class Planned:
    """A step cut into slice tasks, waiting to be handed out or to complete."""

    step: int
    tasks: list[dict]
    svrg: bool
    on_done: Callable[[], None] | None


@dataclass
class Window:
    """Steps handed to every live worker in one call each (``refs``: rank -> (ref, plan))."""

    wid: int
    steps: list[Planned]
    refs: dict
    started: float


class StepRunner:
    """One step at a time on the workers (mixed into
    :class:`~raymod.cluster.remote_group.RayExecutorGroup`: uses its ``state``, ``pool``,
    ``slices`` and ``_tasks``, the dispatch of :mod:`.recovery.worker_lost` and the server
    recovery of :mod:`.recovery.server_lost`)."""

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
            if st.step % snapshots.SNAPSHOT_EVERY == 0:
                self._snapshot_now()
            self._tend_standbys()

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
            merge_metric(metric, [results[t["slice"]]["metric"] for t in tasks])

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


def merge_metric(metric: Any, states: list) -> None:
    """Fold per-slice one-update states into ``metric`` as one whole-batch update."""
    states = [s for s in states if s is not None]
    if not states:
        return
    try:
        metric.merge(metric.merge_parts(states))
    except (ValueError, TypeError):  # a state covering several updates: add them in order
        for s in states:
            metric.merge(s)

"""A worker lost (its actor or process killed, its node gone): the controller's ``Forget``.

The pool forgets it (:meth:`WorkerPool._forget <raymod.cluster.pool.WorkerPool>`); what it
was computing is recomputed here, by the live workers:

- in a step run one at a time, :meth:`WorkerLossRecovery._dispatch` hands its slices to the
  others at once (the servers keep one contribution per slice, so nothing counts twice);
- in run-ahead windows, :meth:`WorkerLossRecovery._recover_windows` aborts every window in
  flight and completes their steps one by one, recomputing only the slices some shard lacks
  (this is also where a hung worker's window and a lost server's end up).

Once the step completes, a "recovered" event gives the slices recomputed, the re-planning
time and the seconds from detection to the completed step.
"""
from __future__ import annotations

import itertools
import time
from typing import Any, Callable, Iterator

from ...kvstore.server import ServerLost
from .. import moments, waits
from ..steps import Planned
from ..windows import WINDOW_IDS

__all__ = ["Losses", "WorkerLossRecovery"]


class Losses:
    """What worker losses cost one step: made only once a worker has died."""

    def __init__(self) -> None:
        self.detected: float | None = None  # time.time() of the first loss seen
        self.ranks: list[int] = []
        self.slices = 0                     # slice runs handed to others (a re-run may die too)
        self.replan_s = 0.0                 # driver time forgetting the dead and re-assigning
        self.wait_s = 0.0                   # waiting for replacements below min_workers

    def merge(self, other: "Losses") -> None:
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


class WorkerLossRecovery:
    """Recomputing a lost worker's work (mixed into
    :class:`~raymod.cluster.remote_group.RayExecutorGroup`: uses its ``state``, ``pool``,
    ``_assign``, ``_deadline`` and ``_server_lost``)."""

    def _recover_windows(self) -> None:
        """Abort every window in flight, then complete their steps one by one: only the
        slices the servers lack are recomputed, by the live workers (a lost server first
        goes back to the snapshot, and every step since is replayed)."""
        st = self.state
        moments.reached("recovery", pool=self.pool)
        windows, st.inflight = st.inflight, []
        steps = [p for win in windows for p in win.steps]
        losses, server_lost = Losses(), None
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

    def _complete_after_failure(self, steps: list[Planned], losses: Losses,
                                server_lost: Exception | None) -> None:
        """Complete the first step of ``steps`` some shard has not finished, on the live
        workers and from the values after the step before (after a lost server, first the
        standbys or the snapshot: every step since is replayed); that brings every shard to
        one step boundary, so the later steps go back to the planned ones and run as
        windows again: a loss costs about one step, not a window of single steps."""
        st = self.state
        while True:
            try:
                if server_lost is not None:  # servers replaced (standbys or the snapshot)
                    self._server_lost(server_lost, "window", steps[-1].step, losses)
                    server_lost = None
                first = st.kv.steps_done() + 1
                ahead = [p for p in steps if p.step >= first]
                if ahead:
                    self._rerun(ahead[0], losses)
                if losses.ranks:
                    self._recovered(losses, max(first, steps[0].step))
                    losses = Losses()
                done = len(steps) - len(ahead) + (1 if ahead else 0)
                rest = list(steps[done:])
                st.planned = rest + st.planned
                try:
                    self._completed(steps[:done], recovering=True)
                except ServerLost:
                    del st.planned[:len(rest)]  # planned again after the servers' repair
                    raise
                return
            except ServerLost as err:
                server_lost = err

    def _rerun(self, p: Planned, losses: Losses) -> None:
        """Complete step ``p`` on the live workers from the values after the step before:
        the slices some shard lacks are computed again (duplicates are ignored)."""
        st = self.state
        missing = set(st.kv.missing_slices(p.step, [t["slice"] for t in p.tasks]))
        tasks = [t for t in p.tasks if t["slice"] in missing]
        if not tasks:  # every slice is in: close the step if a shard has not
            if st.kv.steps_done() < p.step:
                st.kv.finish_step(p.step, [t["slice"] for t in p.tasks])
            return
        losses.slices += len(tasks) if losses.ranks else 0
        weights = st.kv.weights_after(p.step - 1)
        wid = next(WINDOW_IDS)
        more = self._dispatch(tasks, lambda ts: ("run_window", wid, [(p.step, ts, p.svrg)],
                                                 weights, st.metric, None, st.kv.generation),
                              lambda out, chunk: None, step=p.step, during="replay")
        if more is not None:
            losses.merge(more)

    def _dispatch(self, tasks: list[dict], call: Callable, collect: Callable,
                  step: int | None = None, during: str = "step") -> Losses | None:
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
            if len(self.pool) < self.pool.spec.min_workers:
                # Without replacements the survivors finish this step anyway (the
                # controller's policy): a worker can push its slice and die before
                # answering, so the servers may already hold the step; finishing it keeps
                # every shard at one step boundary, where the next step stops the run.
                t_wait = time.perf_counter()
                self.pool.short_of_workers(during, mid_step=True)
                if losses is not None:
                    losses.wait_s += time.perf_counter() - t_wait
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
                    losses = losses or Losses()
                    losses.add(loss, rank, len(chunk))
                    pending.extend(chunk)
                    losses.replan_s += time.perf_counter() - t_lost
                    continue
                collect(out, chunk)
                self._seasoned.add(rank)
            if server_lost is not None:
                raise server_lost

    def _as_completed(self, refs: dict) -> Iterator[tuple[int, Any, list]]:
        """``(rank, ref, chunk)`` in the order the calls end, so that a death is seen when
        it happens, not after the answers of every lower rank. Workers still busy at the
        step deadline are stopped as hung: their calls then end as losses.

        A worker on its first steps (it binds and warms up) has the first-step deadline; a
        seasoned one that hangs beside it is still stopped at the ordinary deadline."""
        by_ref = {ref: (rank, chunk) for rank, (ref, chunk) in refs.items()}
        waiting = list(by_ref)
        # a worker given several slices (or batches) may take a deadline for each
        steps = max(len(chunk) for _, chunk in refs.values())
        ordinary, first = self._deadline(steps), self._deadline(steps, refs)
        start, stopped = time.monotonic(), set()
        while waiting:
            late = [by_ref[ref][0] for ref in waiting if by_ref[ref][0] not in stopped]
            deadline = first if late and self._seasoned.isdisjoint(late) else ordinary
            timeout = max(0.0, deadline - (time.monotonic() - start)) if late else ordinary
            done, waiting = waits.wait(waiting, timeout, num_returns=1)
            if done:
                rank, chunk = by_ref[done[0]]
                yield rank, done[0], chunk
                continue
            if not late:  # stopped ones that have not ended yet: stop them again
                self.pool.hung([by_ref[ref][0] for ref in waiting], f"a {ordinary:.1f} s call")
                continue
            past_first = time.monotonic() - start >= first
            hung = [r for r in late if past_first or r in self._seasoned]
            if hung:
                self.pool.hung(hung, f"a {deadline:.1f} s call")
                stopped.update(hung)

    def _recovered(self, losses: Losses, step: int | None, during: str = "step") -> None:
        """Log the "recovered" event of a step (or pass) that completed despite losses."""
        now = time.time()
        self.pool._event("recovered", None, when=now, during=during, step=step,
                         ranks_lost=losses.ranks, slices_recomputed=losses.slices,
                         detected=losses.detected, replan_s=losses.replan_s,
                         wait_s=losses.wait_s, seconds_to_step=now - losses.detected)

"""A worker hung (a stopped or deadlocked process): the controller's ``StopWorkers``.

A worker that misses its deadline (:class:`~raymod.cluster.waits.Deadlines`: from the step
times seen) is killed, its process included (:mod:`raymod.cluster.reaper`); its call then
fails like a lost worker's and :mod:`.worker_lost` recomputes its slices. In a run-ahead
window the deadline runs from the servers' last finished step, and the workers holding the
slices the first unfinished step lacks are the hung ones.
"""
from __future__ import annotations

from typing import Any

from ..steps import Window

__all__ = ["HungWorkers"]


class HungWorkers:
    """Deadlines and finding who hung (mixed into
    :class:`~raymod.cluster.remote_group.RayExecutorGroup`: uses its ``state``, ``pool`` and
    ``_seasoned``)."""

    def _deadline(self, steps: int, ranks: Any = ()) -> float:
        """Seconds ``steps`` steps may take before the laggards count as hung (longer when
        one of ``ranks`` has not completed a step of this bucket yet: it binds first)."""
        first = any(rank not in self._seasoned for rank in ranks)
        return self.pool.deadlines.step(steps, first=first)

    def _stop_hung(self, win: Window, idle: float) -> float | None:
        """Kill the workers holding the slices the servers still lack for the first
        unfinished step (they missed the deadline); their calls then fail as losses.

        A worker that has not completed a step yet (it binds and warms up first) gets the
        first-step deadline instead: while only such workers lag and ``idle`` (seconds since
        the servers last finished a step) is within it, nobody is stopped and that longer
        deadline is returned to wait on. A seasoned worker that hangs meanwhile is still
        stopped at the ordinary deadline."""
        st = self.state
        progress = st.kv.progress()
        first = min(p["steps_done"] for p in progress) + 1
        have = set.intersection(*[set(p["pending"].get(first, [])) for p in progress])
        hung = set()
        for w in st.inflight:
            for rank, (ref, plan) in w.refs.items():
                for step, tasks, _ in plan:
                    if step < first:
                        # the servers finished a step it held slices of: it is past its
                        # first steps, even though its window has not ended (a worker
                        # that hangs inside its first window was given the first-step
                        # deadline, 60 s, instead of the ordinary one)
                        self._seasoned.add(rank)
                    elif step == first and any(t["slice"] not in have for t in tasks):
                        hung.add(rank)
        if hung and hung.isdisjoint(self._seasoned):
            allowance = self._deadline(1, hung)
            if idle < allowance:
                return allowance
        if not hung:
            # every slice is in and still the step is not finished: the windows are
            # recovered (a worker that does not answer the abort is then the hung one, and
            # the step is closed by the driver, see WorkerLossRecovery._rerun)
            self.pool.logger.warning("step %d passed its deadline of %.1f s with every slice "
                                     "pushed: recovering its window", first,
                                     self._deadline(len(win.steps)))
            return None
        self.pool.hung(hung, f"step {first}")
        return None

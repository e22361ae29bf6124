"""SVRG on workers: the snapshot ``w~`` on every worker and the full-gradient pass.

Each worker keeps the weights of the snapshot; the full gradient ``mu`` is the sum of
per-worker partial sums over contiguous runs of whole batches, a lost worker's run
recomputed by the others (:mod:`.recovery.worker_lost`), and it lives on the KVServers as
correction keys.
"""
from __future__ import annotations

from typing import Any

from . import moments
from .windows import settled

__all__ = ["FullGradient"]


class FullGradient:
    """SVRG's passes (mixed into :class:`~raymod.cluster.remote_group.RayExecutorGroup`)."""

    @settled
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

    @settled
    def set_full_gradient(self, keys: list, means: list) -> None:
        """Give the servers SVRG's full gradient ``mu`` (their optimizer assigns these keys)
        and keep a server snapshot with it: a server lost later restores ``mu`` too."""
        st = self.state
        self._with_servers("full_gradient", lambda: st.kv.push(keys, means))
        if st.kv.mode == "sync":
            self._snapshot_now()

    @settled
    def snapshot_values(self) -> dict:
        """SVRG's snapshot ``w~`` as host arrays, by parameter name."""
        return self._call_one("snapshot_values")

    @settled
    def set_snapshot(self, values: dict) -> None:
        """Make ``values`` the snapshot ``w~`` on every worker, joiners included: they are
        put once, by the driver, so they outlive the published weights they came from."""
        self.pool.broadcast("set_snapshot_ref", [self.pool._ray.put(values)], key="snapshot")

"""A node being drained (a spot preemption notice, ``ray drain-node``): ``LeaveNodes``.

Every :data:`DRAIN_CHECK_SECONDS` the pool asks Ray which nodes it is draining; the workers on
them leave at the next step boundary, so nothing they hold has to be recomputed (a worker
with run-ahead steps in flight finishes them first), and Ray places their replacements on
other nodes.
"""
from __future__ import annotations

import time
from typing import Any

from ..controller import LeaveNodes, NodeDraining

__all__ = ["NodeDrains", "DRAIN_CHECK_SECONDS", "draining_nodes"]

#: how often (seconds) :meth:`WorkerPool.poll` asks Ray which nodes are being drained
DRAIN_CHECK_SECONDS = 5.0


def draining_nodes(ray: Any) -> dict[str, int]:
    """Node id -> drain deadline (ms since the epoch, 0: none) of the nodes Ray is draining:
    preempted spot instances, or ``ray drain-node``. Ray has no public call for this yet;
    Ray Data and Serve use the same GCS query. Any failure reads as "none"."""
    try:
        return dict(ray._private.state.state.get_draining_nodes())
    except Exception:  # noqa: BLE001 - an internal API: never let it stop training
        return {}


class NodeDrains:
    """Leaving draining nodes (mixed into :class:`~raymod.cluster.pool.WorkerPool`: uses its
    ``workers``, ``spares``, ``info``, ``leaving``, ``busy``, ``controller`` and ``_reap``)."""

    def _leave_draining_nodes(self) -> None:
        """Workers on nodes Ray is draining (a preemption notice) leave now, at a step
        boundary, so that nothing they hold has to be recomputed; Ray places their
        replacements on other nodes. Checked every :data:`DRAIN_CHECK_SECONDS`."""
        now = time.monotonic()
        if now < self._next_drain_check:
            return
        self._next_drain_check = now + DRAIN_CHECK_SECONDS
        draining = draining_nodes(self._ray)
        if not draining:
            return
        self._draining = draining
        for rank in [r for r, (_, info, _) in self.spares.items()
                     if info.get("node") in draining]:
            handle, info, _ = self.spares.pop(rank)  # a spare there would join a dying node
            self._event("leave", rank, reason="spare on a draining node", node=info.get("node"))
            self._reap(handle, rank, info)
            self._replace = True
        ranks = tuple(r for r in self.ranks if self.info[r].get("node") in draining)
        if ranks:
            self.controller.handle(NodeDraining(ranks))

    def _leave(self, action: LeaveNodes, event: Any) -> None:
        """The controller's ``LeaveNodes``: the workers leave at this step boundary."""
        for rank in action.ranks:
            node = self.info[rank].get("node")
            self.leaving[rank] = self.workers.pop(rank)
            self._event("leave", rank, reason="node draining", node=node,
                        deadline_ms=self._draining.get(node, 0))
            self._replace = True
        self.release_leaving()

    def release_leaving(self) -> None:
        """Stop the workers that left and have no run-ahead steps in flight any more."""
        busy = self.busy()
        for rank in [r for r in self.leaving if r not in busy]:
            self._reap(self.leaving.pop(rank), rank)

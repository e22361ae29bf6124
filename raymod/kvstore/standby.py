"""Hot-standby KVServer shards, the driver's side.

Each shard of a :class:`~raymod.kvstore.dist.DistKVStore` made with ``standby=True`` gets a
second KVServer actor, placed on another node when the cluster has one. The primary copies
its whole state to it once (:meth:`KVServer.attach_standby
<raymod.kvstore.server.KVServer.attach_standby>`) and then sends it every step before
publishing the step, so the standby holds every step a worker has seen. When a primary is
lost, :meth:`Standbys.promote` makes its standby the shard's server: no snapshot is restored
and at most the one step the other shards finished beyond it is computed again.

Starting an actor takes a while on a busy machine, so nothing here waits for one:
:meth:`Standbys.tend`, called between steps, starts the missing standbys and attaches those
that have come up.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from .. import actor_setup
from ..cluster import naming, waits

if TYPE_CHECKING:
    from .dist import DistKVStore

__all__ = ["Standbys"]

#: how often (seconds) the driver asks the primaries whether their standbys are still there
CHECK_SECONDS = 2.0


class Standbys:
    """The standby actor of every shard: starting, attaching, promoting, stopping.

    Parameters
    ----------
    kv : DistKVStore
        The store whose shards get standbys (its ``servers`` are the primaries).
    """

    def __init__(self, kv: "DistKVStore"):
        self.kv = kv
        self.attached: dict[int, Any] = {}   # shard -> standby actor taking its steps
        self.starting: dict[int, tuple[Any, Any]] = {}  # shard -> (actor, ping ref)
        self._checked = time.monotonic()

    def tend(self) -> None:
        """Start a standby for each shard without one and attach those that answer;
        never waits for an actor to start."""
        kv = self.kv
        if not kv.layout.keys:
            return  # nothing to copy yet
        if self.attached and time.monotonic() - self._checked > CHECK_SECONDS:
            self._checked = time.monotonic()
            shards = list(self.attached)
            alive = kv._get([kv.servers[s].has_standby.remote() for s in shards])
            for shard, ok in zip(shards, alive):
                if not ok:  # the primary dropped (and killed) it
                    del self.attached[shard]
        for shard in range(len(kv.servers)):
            if shard not in self.attached and shard not in self.starting:
                actor = self._start(shard)
                self.starting[shard] = (actor, actor.ping.remote())
        up = set(waits.ready([ref for _, ref in self.starting.values()]))
        for shard, (actor, ref) in list(self.starting.items()):
            if ref not in up:
                continue
            del self.starting[shard]
            if kv._get(kv.servers[shard].attach_standby.remote(actor)):
                self.attached[shard] = actor

    def _start(self, shard: int) -> Any:
        """A new KVServer actor for ``shard``'s standby, on another node than its primary
        when one offers the servers' resources (Ray's soft node affinity)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        kv = self.kv
        primary_node = kv._get(kv.servers[shard].node_id.remote())
        node = _other_node(primary_node, kv._server_resources, shard)
        strategy = None if node is None else NodeAffinitySchedulingStrategy(node, soft=True)
        return kv._server_cls.options(resources=kv._server_resources,
                                      scheduling_strategy=strategy,
                                      **naming.standby_options(kv, shard)).remote(
            shard, kv.mode, kv.shared_memory, actor_setup.steps())

    def promote(self, dead: list[int], ahead: int, timeout: float) -> bool:
        """Make the standbys of the ``dead`` shards their servers, if each has a live one
        that holds every step its primary published; False (nothing changed) otherwise.

        ``ahead`` is the furthest step a live shard has finished: a standby that took all
        its primary's steps is at most one step behind it. Each standby has ``timeout``
        seconds to answer.
        """
        candidates = {s: self.attached.get(s) for s in dead}
        if any(actor is None for actor in candidates.values()):
            return False
        asked = {s: a.progress.remote() for s, a in candidates.items()}
        try:
            progress = waits.get(list(asked.values()), timeout, "standby progress")
        except (waits.DeadlineMissed, self.kv._ray.exceptions.RayActorError):
            return False
        if any(p["steps_done"] < ahead - 1 for p in progress):
            return False  # a standby that missed steps (cannot happen unless it was dropped)
        for shard, actor in candidates.items():
            self.kv.servers[shard] = actor
            del self.attached[shard]
        return True

    def close(self) -> None:
        """Stop every standby actor."""
        actors = list(self.attached.values()) + [a for a, _ in self.starting.values()]
        waits.settle([a.close.remote() for a in actors], 10)
        for actor in actors:
            self.kv._ray.kill(actor, no_restart=True)
        self.attached, self.starting = {}, {}


def _other_node(node: str, resources: dict, shard: int) -> str | None:
    """An alive node other than ``node`` offering ``resources`` (spread by ``shard``), or
    None when there is none."""
    import ray
    nodes = sorted(n["NodeID"] for n in ray.nodes()
                   if n.get("Alive") and n["NodeID"] != node
                   and all(n.get("Resources", {}).get(k, 0) >= v for k, v in resources.items()))
    return nodes[shard % len(nodes)] if nodes else None

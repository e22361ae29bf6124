"""A KVServer lost (its actor or process killed, its node gone, or silent past its deadline):
the controller's ``RestoreServers`` and ``Retry``.

With hot standbys (``DistKVStore(standby=True)``) a lost server's standby takes its place and
only the steps some shard has not finished are computed again; without one (or when a
standby is lost too) the driver's snapshot is restored, as follows.

Every call site that talks to the servers runs through :meth:`ServerRecovery._with_servers`
or catches :class:`~raymod.kvstore.server.ServerLost` itself and calls
:meth:`ServerRecovery._server_lost`; the controller then runs :meth:`ServerRecovery._restore`:
new servers for the dead shards, the driver's last snapshot (:mod:`raymod.cluster.snapshots`)
and every step logged since replayed, or, before any snapshot, the whole set-up again. The
interrupted call then runs again.
"""
from __future__ import annotations

import time
from typing import Any, Callable

from ...kvstore.server import ServerLost
from .. import moments
from ..controller import RestoreServers, ServerDied
from ..steps import Planned
from .worker_lost import Losses

__all__ = ["ServerRecovery"]


class ServerRecovery:
    """Restoring lost servers (mixed into
    :class:`~raymod.cluster.remote_group.RayExecutorGroup`: uses its ``state``, ``pool``,
    ``_run_step`` and ``_rerun``)."""

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

    def _server_lost(self, err: Exception, during: str, through: int | None = None,
                     losses: "Losses | None" = None) -> None:
        """Report a lost KVServer to the controller, which restores the servers (see
        :meth:`_restore`); the caller then runs its interrupted call again. ``through``: the
        last step the caller needs completed (every logged step up to it is replayed)."""
        self.state.replay_losses = losses  # the restore runs in the first bucket's handler
        self.pool.controller.handle(
            ServerDied(during, str(err).splitlines()[0], through),
            have_snapshot=self.state.snapshot is not None)

    def _tend_standbys(self) -> None:
        """Between steps: start or attach the hot standbys still missing (a server lost
        meanwhile is met, and repaired, by the next call on the servers)."""
        try:
            self.state.kv.tend_standbys()
        except ServerLost:
            pass

    def _restore(self, action: RestoreServers, event: ServerDied) -> None:
        """The controller's ``RestoreServers``: new servers for the dead shards, with the
        values of the driver's last snapshot and every logged step since replayed (or,
        before any snapshot, the kvstore's set-up again); the workers get the new servers."""
        st = self.state
        moments.reached("recovery", pool=self.pool)
        t0 = time.perf_counter()
        st.snapshot_due = None  # the servers forgot it
        through = st.step - 1 if event.step is None else event.step
        promoted = st.kv.promote_standbys() if st.update_on_kvstore else None
        if promoted is not None:  # every step the lost servers published is on the standbys
            snap_step, replaced = None, promoted
            # only a step some shard finished and another did not is computed again here
            shard_steps = st.kv.shard_steps()
            first, last = min(shard_steps) + 1, min(max(shard_steps), through)
            redo = [(step, tasks, svrg) for step, tasks, svrg in st.replay
                    if first <= step <= last]
            self.pool.broadcast("set_servers", st.kv.servers, key="servers")
        elif action.source == "setup":
            replaced = st.kv.restart_dead()
            snap_step, redo = None, []
        else:
            snap_step, refs = st.snapshot
            # steps no live shard finished go back to the windows (as after a promotion)
            furthest = st.kv.furthest_live_step()
            last = through if furthest is None else min(furthest, through)
            redo = [(step, tasks, svrg) for step, tasks, svrg in st.replay if step <= last]
            replaced = st.kv.restore(refs)
            st.kv.set_metric(st.metric)
            self.pool.broadcast("set_servers", st.kv.servers, key="servers")
        if redo and not st.update_on_kvstore:  # workers update locally: the old step call
            st.step, st.weights = snap_step + 1, st.kv.weights()
            for step, tasks, svrg in redo:
                self._run_step(tasks, None, svrg, replay=True)
        else:
            losses, st.replay_losses = st.replay_losses or Losses(), None
            for step, tasks, svrg in redo:
                self._rerun(Planned(step, tasks, svrg, None), losses)
        st.weights = st.kv.weights() if st.kv.mode == "sync" else ("latest", None)
        event_log = {"event": "kvserver_recovered", "shards": replaced, "during": event.during,
                     "standby_promoted": promoted is not None,
                     "snapshot_step": snap_step, "steps_replayed": len(redo),
                     "seconds": time.perf_counter() - t0, "time": time.time(),
                     "error": event.error}
        st.recoveries.append(event_log)
        self.pool.events.append(event_log)
        self.pool.logger.warning("kvstore servers %s lost during %s: %s, %d steps replayed "
                                 "in %.2f s", replaced, event.during,
                                 "promoted their standbys" if promoted is not None else
                                 "set up again" if snap_step is None else
                                 f"restored the step-{snap_step} snapshot", len(redo),
                                 event_log["seconds"])

"""The servers' recovery snapshots: what a lost KVServer is restored from.

The driver keeps every shard's state (values, optimizer states, progress) of a recent step in
its own memory, so that it outlives the servers and their nodes, plus the log of the steps
planned since (:attr:`StepState.replay <raymod.cluster.steps.StepState>`). With run-ahead the
servers take the snapshot themselves when they finish the due step, and the driver fetches
it once that step has completed, so the workers never stop for it.
"""
from __future__ import annotations

from ..kvstore.server import ServerLost

__all__ = ["Snapshots", "SNAPSHOT_EVERY"]

#: the driver keeps a KVServer snapshot this often (steps), plus the log of steps since
SNAPSHOT_EVERY = 50


class Snapshots:
    """Taking and adopting snapshots (mixed into
    :class:`~raymod.cluster.remote_group.RayExecutorGroup`: uses its ``state`` and
    ``_with_servers``)."""

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

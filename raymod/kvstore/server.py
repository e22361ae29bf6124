"""``KVServer``: one shard of a dist KVStore, run as a Ray actor.

The server holds the authoritative values of its pieces (see :mod:`raymod.kvstore.layout`)
in one flat buffer per dtype, and the optimizer state of those pieces. Workers push
gradients tagged ``(step, slice_id)``:

- ``sync`` mode keeps one contribution per slice (a duplicate, e.g. from a slice recomputed
  after a worker died, is ignored) and, when the driver calls :meth:`finish` with the step's
  slice ids, sums them in slice order (so the result does not depend on which worker sent
  what, or when), runs the optimizer once and publishes the new values as one object;
- ``async`` mode applies each push as it arrives.

Without an optimizer a push replaces the stored value (MXNet's kvstore rule), which is how
"servers aggregate, workers update" works: the published object is then the summed gradient.

On a machine with ``/dev/shm`` the values live in a shared-memory block (:mod:`.shm`): a
sync step's new values are published by stamping the block's version, and workers on this
machine compute with them in place; a push may name a worker's block instead of carrying the
bytes. A sync server keeps two such blocks and writes each step's values into the one not
published: a worker that recomputes a lost slice of step k after the step was already
applied (its first worker pushed, then died) still finds step k's weights.

A sync shard may have a hot standby (:meth:`KVServer.attach_standby`): another KVServer
actor, on another node when there is one, holding a copy of the shard's whole state. Each
finished step's summed gradient (and folded metric) goes to it before the step is
published, and it runs the same optimizer on it, so it holds every published step,
bit-identical; a direct change (a write, new keys, optimizer states) copies the whole state
again. A lost primary is replaced by promoting its standby, with no snapshot to restore.

Row_sparse tables are kept apart from the pieces: per table, this shard's rows ``[lo, hi)``
as one dense array (:class:`Table`), never published to workers. The driver reads and
pushes rows of them directly (:meth:`KVServer.read_rows`, :meth:`KVServer.apply_rows`);
they are part of every snapshot and standby copy.
"""
from __future__ import annotations

import functools
import logging
import math
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from .. import actor_setup
from ..base import MXNetError
from ..optimizer import Optimizer, Updater
from ..sparse import RowSparseArray
from ..sparse.table_init import TableInit
from . import shm
from .compression import dequantize_2bit
from .doorbell import DoorbellServer
from .layout import Piece
from .rows import assign_rows
from ..sparse.row_sparse import sum_rows

__all__ = ["KVServer", "Published", "ServerLost", "Table"]

_LOG = logging.getLogger(__name__)

#: how long a primary waits for its standby to take a step before dropping it (the driver
#: starts a new one); far below the driver's step deadline, so a stalled standby never makes
#: the primary look hung
STANDBY_SECONDS = 3.0


class ServerLost(MXNetError):
    """A KVServer shard died: its values must be restored before training goes on."""


def _locked(method: Callable) -> Callable:
    """Run ``method`` holding the server's lock: Ray calls and doorbell pushes arrive on
    different threads."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self._lock:
            return method(self, *args, **kwargs)
    return run


def _mirrored(method: Callable) -> Callable:
    """A direct change of the shard's state (not a step): under the lock, and copied whole
    to the standby afterwards."""
    @functools.wraps(method)
    def run(self, *args, **kwargs):
        with self._lock:
            out = method(self, *args, **kwargs)
            self._sync_standby()
            return out
    return run


@dataclass(frozen=True)
class Published:
    """A server's values at ``version``, to be read in place from its shared-memory block."""

    handle: shm.BlockHandle
    version: int


@dataclass(frozen=True, eq=False)  # eq would compare arrays
class Table:
    """This shard's rows ``[lo, hi)`` of a row_sparse table, as a dense array.

    ``index`` is the table's optimizer index in the layout's key order (as
    :attr:`Piece.index`); the updater is called with the key itself, as for pieces, so that
    its states line up with an in-process store's.
    """

    index: int
    lo: int
    hi: int
    values: np.ndarray

    def copied(self) -> "Table":
        """The same rows in fresh, writable memory (arrays from Ray are read-only)."""
        return replace(self, values=np.array(self.values))

    def local(self, ids: np.ndarray) -> np.ndarray:
        """Global row ids as positions in :attr:`values`; ValueError for ids outside
        ``[lo, hi)`` (the driver splits ids by range, so this means a layout mismatch)."""
        ids = np.asarray(ids, np.int64)
        if ids.size and (ids.min() < self.lo or ids.max() >= self.hi):
            raise ValueError(f"row ids {int(ids.min())}..{int(ids.max())} are not all in this "
                             f"shard's rows [{self.lo}, {self.hi})")
        return ids - self.lo


class KVServer:
    """One shard's values, optimizer and pending pushes (the body of a Ray actor).

    Parameters
    ----------
    shard : int
        This server's shard number.
    mode : {'sync', 'async'}
        Whether pushes wait for :meth:`finish` or apply at once.
    shared_memory : bool, default True
        Keep the values in a shared-memory block when the machine has ``/dev/shm``.
    setup : tuple
        The driver's :func:`raymod.actor_setup.steps`, run first.
    """

    def __init__(self, shard: int, mode: str = "sync", shared_memory: bool = True,
                 setup: tuple = ()):
        actor_setup.apply(setup)  # before a method unpickles the user's metric
        if mode not in ("sync", "async"):
            raise ValueError(f"mode must be 'sync' or 'async', got {mode!r}")
        self.shard, self.mode = shard, mode
        self.shared_memory = shared_memory and shm.available()
        if self.shared_memory:
            shm.sweep_stale()  # blocks of killed processes: nobody else removes them
        self.block: shm.SharedBlock | None = None  # the published values
        self.spare: shm.SharedBlock | None = None  # where a sync step writes the next ones
        self.pieces: list[Piece] = []
        self.buffers: dict[str, np.ndarray] = {}
        self.scratch: dict[str, np.ndarray] = {}  # the summed gradient, when an update follows
        self.views: list[tuple[Piece, np.ndarray]] = []
        self.tables: dict[Any, Table] = {}    # row_sparse tables: this shard's rows
        self.updater: Updater | None = None
        self.custom: Callable | None = None
        self.threshold: float | None = None   # 2-bit compression of pushes
        self.pending: dict[int, dict[int, dict]] = {}
        # step -> slice -> {table: (row ids, rows)}: table rows of the step's slices
        self.pending_rows: dict[int, dict[int, dict]] = {}
        self._snapshot_at: set[int] = set()   # steps to snapshot when they finish
        self._snapshots: dict[int, dict] = {}  # the last one taken, until fetched
        self.applied: set = set()             # async: (step, slice) already applied
        self.corrections: dict = {}           # parameter key -> key added to its gradient
        self.version = 0
        self.steps_done = -1
        self._finished_at = time.monotonic()  # when the last step finished (hang checks)
        self._published: tuple[int, Any] = (-1, None)
        self._history: dict[int, list] = {}   # step -> what published() gave after it
        self.metrics: dict[int, Any] = {}     # step -> {slice: metric state pushed with it}
        self.metric: Any = None               # folds a finished step's states into one
        self.aborted = -1                     # waits of run-ahead windows up to this one end
        self._lock = threading.RLock()
        self._done = threading.Condition(self._lock)  # a step finished, or an abort
        self._doorbell: DoorbellServer | None = None
        self.standby: Any = None              # this shard's hot standby (an actor handle)

    def ping(self) -> int:
        """This server's shard (a liveness check)."""
        return self.shard

    def node_id(self) -> str:
        """The Ray node this server runs on (a standby is placed on another one)."""
        import ray
        return ray.get_runtime_context().get_node_id()

    # ---- keys -----------------------------------------------------------------------------
    @_mirrored
    def add(self, pieces: list[Piece], payload: dict[str, np.ndarray]) -> int:
        """Append new pieces (their values are at their offsets of ``payload``)."""
        sizes = {dt: b.size for dt, b in self.buffers.items()}
        for p in pieces:
            sizes[p.dtype] = max(sizes.get(p.dtype, 0), p.offset + p.size)
        block = spare = None
        if self.shared_memory:
            try:
                block = shm.SharedBlock.create(sizes)
                spare = shm.SharedBlock.create(sizes) if self.mode == "sync" else None
            except OSError as err:  # /dev/shm full or missing: the object store still works
                _LOG.warning("kvstore shard %d: no shared memory (%s); values go through the "
                             "object store", self.shard, err)
                self.shared_memory = False
                if block is not None:
                    block.unlink()
                block = None
        grown = block.arrays if block else {dt: np.empty(n, dt) for dt, n in sizes.items()}
        for dtype, values in grown.items():
            old = self.buffers.get(dtype, np.zeros(0, dtype))
            values[:old.size] = old
            if values.size > old.size:
                values[old.size:] = payload[dtype][old.size:]
        for old_block in (self.block, self.spare):
            if old_block is not None:
                old_block.unlink()
        self.block, self.spare, self.scratch = block, spare, {}
        self.pieces.extend(pieces)
        self._use(grown)
        self.version += 1
        return self.version

    def _use(self, buffers: dict[str, np.ndarray]) -> None:
        """Make ``buffers`` the stored values (and their per-piece views)."""
        self.buffers = buffers
        self.views = [(p, buffers[p.dtype][p.offset:p.offset + p.size]) for p in self.pieces]

    def _flip(self, carry: bool) -> None:
        """Write the next values into the spare block from now on (published at once after
        this step); ``carry`` copies the current values there first (an update follows)."""
        if self.spare is None:
            return
        if carry:
            _sum_into([self.buffers], self.spare.arrays)
        self.block, self.spare = self.spare, self.block
        self._use(self.block.arrays)

    @_mirrored
    def write(self, values: dict) -> int:
        """Overwrite pieces: ``{key: values of this shard's piece}`` (init of a known key,
        broadcast)."""
        for p, w in self.views:
            if p.key in values:
                w[...] = values[p.key]
        self.version += 1
        return self.version

    # ---- row_sparse tables --------------------------------------------------------------------
    @_mirrored
    def add_table(self, key: Any, index: int, lo: int, hi: int, values: Any) -> None:
        """Hold rows ``[lo, hi)`` of a new row_sparse table ``key``: ``values``, a dense
        ``(hi - lo,) + shape[1:]`` array (copied), a row_sparse one over those rows
        (zeros where it holds none), or the table's :class:`TableInit` (rows made here)."""
        if isinstance(values, TableInit):
            self.tables[key] = Table(index, lo, hi, values.rows(lo, hi))
        elif isinstance(values, RowSparseArray):
            table = Table(index, lo, hi, np.zeros(values.shape, values.dtype))
            table.values[values.indices] = values.data
            self.tables[key] = table
        else:
            self.tables[key] = Table(index, lo, hi, values).copied()

    @_mirrored
    def write_table(self, key: Any, values: Any) -> None:
        """Overwrite this shard's rows of table ``key`` (init of a known table): with a
        dense array, a row_sparse one (zeros where it holds none), or the table's
        :class:`TableInit`."""
        table = self.tables[key]
        target = table.values
        if isinstance(values, TableInit):
            target[...] = values.rows(table.lo, table.hi)
        elif isinstance(values, RowSparseArray):
            assign_rows(target, values)
        else:
            target[...] = values

    @_locked
    def read_rows(self, key: Any, ids: np.ndarray) -> np.ndarray:
        """The rows ``ids`` (global, sorted, all in this shard's range) of table ``key``."""
        table = self.tables[key]
        return table.values[table.local(ids)]

    @_mirrored
    def apply_rows(self, key: Any, ids: np.ndarray, data: np.ndarray) -> None:
        """Apply the driver's push of rows ``ids`` (global; ``data`` their summed values)
        to table ``key`` now.

        With an optimizer: a lazy update of those rows only; a custom updater gets the same
        row_sparse gradient; with neither, the rows replace the table's (zeros elsewhere,
        MXNet's push rule without an updater). ``ids`` may be empty: the driver calls every
        shard of the table, so that each counts the update as an in-process store does.
        """
        table = self.tables[key]
        self._update_tables({key: RowSparseArray(data, table.local(ids), table.values.shape,
                                                 check=False)})

    @_locked
    def push_rows(self, step: int, slice_id: int, rows: dict) -> bool:
        """One slice's table rows in the step protocol: ``{table: (row ids, rows)}``, the
        ids global and in this shard's ranges. A worker sends them before the slice's push
        (whose arrival may finish the step); sync mode keeps one contribution per slice and
        sums them in slice order when the step finishes, async mode applies them now.
        False when the step is finished or the slice's rows were already taken."""
        if self.mode == "async":
            self._update_tables(self._row_grads([rows]))
            return True
        if step <= self.steps_done:
            return False
        slot = self.pending_rows.setdefault(step, {})
        if slice_id in slot:
            return False
        slot[slice_id] = rows
        return True

    def _row_grads(self, parts: list[dict]) -> dict[Any, RowSparseArray]:
        """Per table of this shard: the rows of ``parts`` (slice contributions in slice
        order) summed in that order, as a row_sparse gradient over the shard's rows."""
        out = {}
        for key, table in self.tables.items():
            grads = [RowSparseArray(np.asarray(part[key][1]), table.local(part[key][0]),
                                    table.values.shape, check=False)
                     for part in parts if key in part]
            out[key] = sum_rows(grads, table.values.shape) if grads else \
                RowSparseArray.empty(table.values.shape, table.values.dtype)
        return out

    def _update_tables(self, grads: dict) -> None:
        """Apply summed row gradients ``{table: row_sparse gradient over this shard's rows}``:
        with an optimizer a lazy update of the pushed rows only (an empty gradient still
        counts an update, as in an in-process store); a custom updater gets the gradient;
        with neither, the pushed rows replace the table's, zeros elsewhere (MXNet's push
        rule without an updater)."""
        for key, grad in grads.items():
            values = self.tables[key].values
            if self.updater is not None:
                self.updater([key], [grad], [values])
            elif self.custom is not None:
                self.custom(key, grad, values)
            else:
                assign_rows(values, grad)

    # ---- how pushes are applied ---------------------------------------------------------------
    @_mirrored
    def set_optimizer(self, optimizer: Optimizer | None) -> None:
        """Run ``optimizer`` on every aggregated push (None: pushes replace values)."""
        self.updater = None if optimizer is None else Updater(optimizer)
        self.custom = None

    @_mirrored
    def set_updater(self, updater: Callable) -> None:
        """Call ``updater(key, received, stored)`` per piece instead of an optimizer."""
        self.updater, self.custom = None, updater

    @_mirrored
    def set_corrections(self, pairs: dict) -> None:
        """Add key ``pairs[k]``'s value to key ``k``'s aggregated gradient before each
        update (SVRG's full gradient); correction keys change only by direct pushes."""
        self.corrections = dict(pairs)

    @_mirrored
    def set_compression(self, threshold: float | None) -> None:
        """Pushes arrive 2-bit quantized with this threshold (None: uncompressed)."""
        self.threshold = threshold

    # ---- pushes -----------------------------------------------------------------------------
    @_locked
    def push(self, step: int, slice_id: int, payload: dict,
             num_slices: int | None = None, metric: Any = None) -> bool | list:
        """Take one slice's contribution; False if that ``(step, slice)`` was already taken.

        In sync mode, when ``num_slices`` is given and this push brings the step's slices
        ``0 .. num_slices-1`` all in, the step is finished here and the pusher gets the
        published ``[ref]`` back (saving the driver a round trip). ``metric``, the slice's
        metric state, is kept with the contribution until :meth:`take_metrics` (so it is
        counted exactly once, as the gradient is, whoever computed the slice).
        """
        if step <= self.steps_done:
            return False
        if isinstance(payload, shm.BlockHandle):  # the pusher's block on this machine
            payload = shm.SharedBlock.attach(payload).arrays
        if self.mode == "async":
            if (step, slice_id) in self.applied:
                return False
            self.applied.add((step, slice_id))
            self._apply(self._all(self._decode(payload)))
            return True
        slot = self.pending.setdefault(step, {})
        if slice_id in slot:
            return False
        slot[slice_id] = payload
        if metric is not None:
            self.metrics.setdefault(step, {})[slice_id] = metric
        if num_slices is not None and len(slot) == num_slices:
            return self.finish(step, list(range(num_slices)))
        return True

    @_locked
    def missing(self, step: int, slice_ids: list[int]) -> list[int]:
        """Which of ``slice_ids`` have not arrived for ``step`` (none once it is finished)."""
        if self.mode == "sync" and step <= self.steps_done:
            return []
        slot = self.pending.get(step, {})
        return [s for s in slice_ids if s not in slot]

    @_locked
    def finish(self, step: int, slice_ids: list[int]) -> list:
        """Complete a sync step: sum the slices in id order, update, publish.

        Returns ``[ref]`` (the published values' object ref, in a list so that Ray hands
        the caller the ref rather than the arrays), or raises if a slice is missing.
        """
        if step <= self.steps_done:  # a retried finish: the step is already applied
            return self.published()
        lost = self.missing(step, slice_ids)
        if lost:
            raise RuntimeError(f"shard {self.shard}: step {step} lacks slices {lost}")
        slot = self.pending.pop(step)
        grads = [self._decode(slot[s]) for s in sorted(slice_ids)]
        rows = self._row_grads([part for _, part in
                                sorted(self.pending_rows.pop(step, {}).items())])
        if self._replaces():
            self._flip(carry=False)
            summed = _sum_into(grads, self.buffers)  # the sum replaces the values: write it there
        else:
            if not self.scratch:
                self.scratch = {dt: np.empty_like(b) for dt, b in self.buffers.items()}
            summed = _sum_into(grads, self.scratch)
        if step in self.metrics:  # with when the step completed (the batch-end clock)
            self.metrics[step] = dict(self._fold_metric(self.metrics[step]),
                                      done_at=time.time())
        # sent before the update here, so that the standby updates at the same time
        taken = None if self.standby is None else \
            self.standby.replicate.remote(step, summed, self.metrics.get(step), rows)
        self._apply_step(summed, copy=False)
        self._update_tables(rows)
        if taken is not None:
            self._await_standby(taken)
        return self._step_done(step)

    def _replaces(self) -> bool:
        """Whether a step's summed pushes replace the values (no optimizer, no updater)."""
        return self.updater is None and self.custom is None and not self.corrections

    def _apply_step(self, summed: dict[str, np.ndarray], copy: bool) -> None:
        """Make the values those after a step whose summed gradient is ``summed`` (``copy``:
        the sum is not already in the values' block, as it is on a primary that replaces)."""
        if not self._replaces():
            self._flip(carry=True)
            self._apply(self._all(summed))
            return
        if copy:
            self._flip(carry=False)
            _sum_into([summed], self.buffers)
        self.version += 1

    def _step_done(self, step: int) -> list:
        """Publish ``step``: progress, the values' history, a snapshot asked for, waiters."""
        self.steps_done = step
        self._finished_at = time.monotonic()
        for old in [s for s in self.pending if s <= step]:
            del self.pending[old]
        for old in [s for s in self.pending_rows if s <= step]:
            del self.pending_rows[old]
        published = self.published()
        self._history = {step - 1: self._history.get(step - 1), step: published}
        if step in self._snapshot_at:  # asked for ahead: taken here, fetched later
            self._snapshot_at.discard(step)
            self._snapshots = {step: self.snapshot()}
        self._done.notify_all()
        self._wake_doorbell()
        return published

    # ---- run-ahead windows (workers wait here, not on the driver) -----------------------------
    def wait_done(self, step: int, window: int, timeout: float | None = None) -> list | None:
        """Block until ``step`` is finished; its published values (as :meth:`finish`), or
        None when window ``window`` was aborted first (see :meth:`abort`) or ``timeout``
        seconds passed. A finished step ``step`` is readable while ``step + 1`` is not
        finished, which cannot happen before the waiter pushes its slices of ``step + 1``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._done:
            while self.steps_done < step and self.aborted < window:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._done.wait(left)
            if self.steps_done < step:
                return None
            return self.published_after(step)

    @_locked
    def published_after(self, step: int) -> list:
        """What :meth:`published` gave when ``step`` finished (this step or the one before
        the last finished step: the two value blocks still hold them)."""
        if step == self.steps_done or self._history.get(step) is None:
            if step != self.steps_done:
                raise RuntimeError(f"shard {self.shard}: the values after step {step} are "
                                   f"gone (steps done: {self.steps_done})")
            return self.published()
        return self._history[step]

    def abort(self, window: int) -> None:
        """End the waits of every run-ahead window up to ``window`` (the driver re-plans)."""
        with self._done:
            self.aborted = max(self.aborted, window)
            self._done.notify_all()
        self._wake_doorbell()

    @_mirrored
    def set_metric(self, metric: Any) -> None:
        """Fold each finished step's per-slice metric states with ``metric.merge_parts``
        (None: hand them over per slice)."""
        self.metric = metric

    def _fold_metric(self, states: dict) -> dict:
        """``{"merged": state}`` for a whole step, or ``{"parts": [states in slice order]}``
        when the states do not fold (each then merges on its own)."""
        parts = [states[k] for k in sorted(states)]
        if self.metric is not None:
            try:
                return {"merged": self.metric.merge_parts(parts)}
            except (ValueError, TypeError):
                pass
        return {"parts": parts}

    @_locked
    def take_metrics(self, last_step: int) -> dict:
        """Hand over (and forget) the metric states of the finished steps up to
        ``last_step``: per step ``{"merged": state}`` or ``{"parts": [...]}``."""
        last_step = min(last_step, self.steps_done)
        out = {s: m for s, m in self.metrics.items() if s <= last_step}
        for s in out:
            del self.metrics[s]
        if out and self.standby is not None:
            self.standby.forget_metrics.remote(last_step)  # order does not matter: no wait
        return out

    @_locked
    def progress(self) -> dict:
        """``steps_done``, ``idle_s`` (seconds since a step last finished here) and, per
        pending step, the slice ids received (hung-worker checks)."""
        return {"steps_done": self.steps_done,
                "idle_s": time.monotonic() - self._finished_at,
                "pending": {s: sorted(slot) for s, slot in self.pending.items()}}

    @_mirrored
    def apply_now(self, values: dict) -> int:
        """Apply the driver's own push at once: ``{key: values of this shard's piece}``."""
        self._apply([(p, w, values[p.key]) for p, w in self.views if p.key in values])
        return self.version

    def _decode(self, payload: dict) -> dict[str, np.ndarray]:
        if self.threshold is None:
            return payload
        return {dt: dequantize_2bit(packed, (self.buffers[dt].size,), self.threshold,
                                    dtype=np.dtype(dt))
                for dt, packed in payload.items()}

    def _apply(self, triples: list) -> None:
        """Update ``(piece, stored view, received)`` triples: optimizer, custom updater, or
        replacement."""
        if self.updater is not None:
            self.updater([p.key for p, _, _ in triples], [g for _, _, g in triples],
                         [w for _, w, _ in triples])
        elif self.custom is not None:
            for p, w, g in triples:
                self.custom(p.key, g, w)
        else:
            for _, w, g in triples:
                w[...] = g
        self.version += 1

    def _all(self, grads: dict[str, np.ndarray]) -> list:
        """Triples for a step's aggregated gradient: every key but correction keys, each
        plus its correction when it has one."""
        if not self.corrections:
            return [(p, w, grads[p.dtype][p.offset:p.offset + p.size]) for p, w in self.views]
        skip = set(self.corrections.values())
        extra = {(p.key, p.start): w for p, w in self.views if p.key in skip}
        triples = []
        for p, w in self.views:
            if p.key in skip:
                continue
            g = grads[p.dtype][p.offset:p.offset + p.size]
            if p.key in self.corrections:
                g = g + extra[(self.corrections[p.key], p.start)]
            triples.append((p, w, g))
        return triples

    # ---- reading ----------------------------------------------------------------------------
    def block_handle(self) -> shm.BlockHandle | None:
        """The shared-memory block holding the values (None without one): a worker that
        can map it shares this machine's memory with the server."""
        return None if self.block is None else self.block.handle

    @_locked
    def doorbell(self) -> str | None:
        """The socket path local workers push through (see :mod:`.doorbell`); None when
        the values are not in shared memory. Starts listening on first call."""
        if self.block is None or self.mode != "sync":
            return None
        if self._doorbell is None:
            self._doorbell = DoorbellServer(self._ring)
        return self._doorbell.path

    def _ring(self, message: dict) -> dict | float:
        """A message that arrived through the doorbell (on its one thread, which must not
        block; arrays in it are decoded already): a push ``{step, slice, num_slices, block,
        sizes[, metric]}``, a wait ``{wait, window[, timeout]}`` (:meth:`wait_done`), or
        both, the push first. The reply says whether the push was taken or where the values
        after the awaited (or the finished) step are; a wait not over yet returns the time
        it ends instead (see :class:`DoorbellServer`), and is asked again when a step
        finishes or a window aborts."""
        if "step" in message and not message.get("pushed"):
            handle = shm.BlockHandle(message["block"],
                                     tuple((dt, int(n)) for dt, n in message["sizes"]))
            ack = self.push(int(message["step"]), int(message["slice"]), handle,
                            message.get("num_slices"), message.get("metric"))
            if "wait" not in message:
                if not isinstance(ack, list):
                    return {"taken": bool(ack)}
                return {"published": _block_json(ack[0])}
            message["pushed"] = True  # a parked push-and-wait is asked again: push once
        step, window = int(message["wait"]), int(message["window"])
        with self._lock:
            if self.steps_done >= step:
                return {"published": _block_json(self.published_after(step)[0])}
            if self.aborted >= window:
                return {"aborted": True}
        deadline = message.get("deadline")
        if deadline is None:
            timeout = message.get("timeout")
            deadline = math.inf if timeout is None else time.monotonic() + timeout
            message["deadline"] = deadline
        return {"aborted": True} if time.monotonic() >= deadline else deadline

    def _wake_doorbell(self) -> None:
        """Parked doorbell waits: look again (a step finished, a window aborted)."""
        if self._doorbell is not None:
            self._doorbell.wake()

    @_locked
    def published(self) -> list:
        """``[Published]`` for the current values: in sync mode with a shared-memory block,
        the block stamped with the version; else a ref to a copy, put once per version."""
        if self.block is not None and self.mode == "sync":
            # no worker reads while a sync step updates: it pushed its slice first
            self.block.version = self.version
            return [Published(self.block.handle, self.version)]
        import ray
        version, ref = self._published
        if version != self.version:
            ref = ray.put(self.buffers)
            self._published = (self.version, ref)
        return [ref]

    @_locked
    def pull(self) -> dict[str, np.ndarray]:
        """The current values (copied to the caller)."""
        return self.buffers

    def close(self) -> None:
        """Remove the shared-memory block and the doorbell (before the actor is killed)."""
        if self._doorbell is not None:
            self._doorbell.close()
        for block in (self.block, self.spare):
            if block is not None:
                block.unlink()

    @_locked
    def read(self, keys: list) -> dict:
        """``{key: values of this shard's piece}`` for the pieces of ``keys`` held here, and
        ``{key: this shard's rows}`` for the tables among ``keys``."""
        wanted = set(keys)
        values = {p.key: w for p, w in self.views if p.key in wanted}
        values.update({k: t.values for k, t in self.tables.items() if k in wanted})
        return values

    # ---- optimizer states -------------------------------------------------------------------
    @_locked
    def get_optimizer_states(self) -> bytes:
        """The updater's states of this shard's pieces (``Updater.get_states`` bytes)."""
        if self.updater is None:
            raise RuntimeError("no optimizer on this kvstore server")
        return self.updater.get_states()

    @_mirrored
    def set_optimizer_states(self, states: bytes) -> None:
        """Load states produced by :meth:`get_optimizer_states`."""
        if self.updater is None:
            raise RuntimeError("no optimizer on this kvstore server")
        self.updater.set_states(states)

    # ---- recovery ---------------------------------------------------------------------------
    @_locked
    def snapshot_at(self, step: int) -> bool:
        """Take a :meth:`snapshot` when ``step`` finishes (run-ahead: the driver does not
        stop the workers for it); False if ``step`` has finished already."""
        if step <= self.steps_done:
            return False
        self._snapshot_at.add(step)
        return True

    @_locked
    def snapshot_of(self, step: int) -> dict | None:
        """The snapshot :meth:`snapshot_at` took when ``step`` finished (handed over once),
        or None."""
        return self._snapshots.pop(step, None)

    def snapshot(self) -> dict:
        """Everything needed to rebuild this server: values, tables, optimizer states (of
        pieces and tables: one updater), progress."""
        return {"buffers": {dt: b.copy() for dt, b in self.buffers.items()},
                "tables": {k: t.copied() for k, t in self.tables.items()},
                "optimizer_states": None if self.updater is None else self.updater.get_states(),
                "steps_done": self.steps_done, "version": self.version}

    @_mirrored
    def restore(self, snap: dict) -> None:
        """Return to a :meth:`snapshot` (pieces and optimizer must already be set; the
        tables are taken from the snapshot whole)."""
        for dt, b in snap["buffers"].items():
            self.buffers[dt][...] = b
        self.tables = {k: t.copied() for k, t in snap["tables"].items()}
        if self.updater is not None and snap["optimizer_states"] is not None:
            self.updater.set_states(snap["optimizer_states"])
        self.steps_done = snap["steps_done"]
        self.pending.clear()  # the steps after the snapshot are replayed from scratch
        self.pending_rows.clear()
        self.applied.clear()
        self.metrics.clear()
        self._history.clear()
        self._snapshot_at.clear()
        self._snapshots = {}
        self.version = snap["version"] + 1
        self._done.notify_all()
        self._wake_doorbell()


    # ---- hot standby ------------------------------------------------------------------------
    @_locked
    def attach_standby(self, standby: Any) -> bool:
        """Make ``standby`` (a KVServer actor) this shard's hot standby: it gets a copy of
        the whole state now and every step from now on. False if it failed to take the
        copy (it is then dropped)."""
        if self.mode != "sync":
            raise MXNetError("a hot standby needs a dist_sync kvstore")
        self.standby = standby
        self._sync_standby()
        return self.standby is not None

    @_locked
    def has_standby(self) -> bool:
        """Whether a standby is attached (one that failed to take a step is dropped)."""
        return self.standby is not None

    def _sync_standby(self) -> None:
        """Copy the whole state to the standby (after a direct change)."""
        if self.standby is None:
            return
        state = {"pieces": self.pieces, "snapshot": self.snapshot(),
                 "optimizer": None if self.updater is None else self.updater.optimizer,
                 "custom": self.custom, "threshold": self.threshold,
                 "corrections": self.corrections, "metric": self.metric,
                 "metrics": {s: m for s, m in self.metrics.items() if s <= self.steps_done}}
        self._await_standby(self.standby.mirror.remote(state))

    def _await_standby(self, ref: Any) -> None:
        """Wait for the standby to take a step or a copy; drop it if it died or stalls (the
        driver starts another), so that the primary goes on alone."""
        import ray
        try:
            ray.get(ref, timeout=STANDBY_SECONDS)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as err:
            _LOG.warning("kvstore shard %d: standby dropped (%s)", self.shard,
                         type(err).__name__)
            ray.kill(self.standby, no_restart=True)
            self.standby = None

    @_locked
    def mirror(self, state: dict) -> None:
        """Become a copy of a primary's whole state (see :meth:`_sync_standby`)."""
        for block in (self.block, self.spare):
            if block is not None:
                block.unlink()
        self.block = self.spare = None
        self.pieces, self.buffers, self.scratch, self.views = [], {}, {}, []
        self.add(state["pieces"], state["snapshot"]["buffers"])
        self.updater = None if state["optimizer"] is None else Updater(state["optimizer"])
        self.custom, self.threshold = state["custom"], state["threshold"]
        self.corrections, self.metric = dict(state["corrections"]), state["metric"]
        self.restore(state["snapshot"])
        self.metrics = dict(state["metrics"])

    @_locked
    def replicate(self, step: int, summed: dict[str, np.ndarray], metric: Any,
                  rows: dict | None = None) -> int:
        """A standby takes its primary's step ``step``: the summed gradient (or the new
        values, without an optimizer), the summed table rows (only the rows pushed: the
        copy costs what the step touched) and the step's folded metric state."""
        if step <= self.steps_done:
            return self.steps_done
        if step != self.steps_done + 1:
            raise RuntimeError(f"standby of shard {self.shard}: step {step} after "
                               f"{self.steps_done}")
        self._apply_step(summed, copy=True)
        self._update_tables(rows or {})
        if metric is not None:
            self.metrics[step] = metric
        self._step_done(step)
        return step

    @_locked
    def forget_metrics(self, last_step: int) -> None:
        """A standby drops the metric states its primary handed over."""
        for s in [s for s in self.metrics if s <= last_step]:
            del self.metrics[s]


def _block_json(published: Published) -> dict:
    """A :class:`Published` block as the doorbell's JSON."""
    return {"block": published.handle.name, "version": published.version,
            "sizes": [list(x) for x in published.handle.sizes]}


#: threads that sum a step's slices (MXNet's variable); numpy adds without the GIL
REDUCTION_THREADS = max(1, int(os.environ.get("MXNET_KVSTORE_REDUCTION_NTHREADS",
                                              min(4, os.cpu_count() or 1))))
#: below this many elements per thread a sum stays on one thread
_PARALLEL_MIN = 1 << 18
_reducers: ThreadPoolExecutor | None = None


def _sum_into(grads: list[dict], out: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``out = grads[0] + grads[1] + ...`` per dtype, added left to right (slice order).

    Large buffers are cut into one contiguous range per reduction thread; every element is
    still added in slice order, so the result does not depend on the thread count.
    """
    global _reducers
    for dt, total in out.items():
        parts = [g[dt] for g in grads]
        chunks = min(REDUCTION_THREADS, total.size // _PARALLEL_MIN)
        if chunks < 2:
            _sum_range(parts, total, slice(None))
            continue
        if _reducers is None:
            _reducers = ThreadPoolExecutor(REDUCTION_THREADS, "kvstore-reduce")
        bounds = np.linspace(0, total.size, chunks + 1).astype(np.int64)
        list(_reducers.map(lambda k: _sum_range(parts, total, slice(bounds[k], bounds[k + 1])),
                           range(chunks)))
    return out


def _sum_range(parts: list[np.ndarray], total: np.ndarray, where: slice) -> None:
    if len(parts) == 1:
        total[where] = parts[0][where]
        return
    np.add(parts[0][where], parts[1][where], out=total[where])
    for g in parts[2:]:
        np.add(total[where], g[where], out=total[where])

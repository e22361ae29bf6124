"""The Ray-backed stores: ``'dist_sync'``, ``'dist_device_sync'`` and ``'dist_async'``.

:class:`DistKVStore` is the client the driver holds. Its values live on ``num_servers``
:class:`~raymod.kvstore.server.KVServer` actors, one shard each (see
:mod:`raymod.kvstore.layout`). The driver's own ``init``/``push``/``pull`` calls go to the
servers at once, one call per shard touched. Worker actors of a module push gradients
straight to the servers, tagged ``(step, slice)``; :meth:`DistKVStore.finish_step` then
closes the step on every shard and keeps the object refs of the published values, which
the workers read zero-copy at their next step.

A key initialised with a row_sparse value is a table, split by row ranges over the shards
(see :meth:`ShardLayout.add_table`): a row_sparse push sends each shard only its rows, and
:meth:`DistKVStore.row_sparse_pull` asks each shard only for its rows.
"""
from __future__ import annotations

import copy
import os
from typing import Any, Callable

import numpy as np

from .. import actor_setup
from ..base import MXNetError
from ..cluster import naming, waits
from ..context import as_numpy
from ..optimizer import Optimizer, Updater
from ..sparse import RowSparseArray, is_sparse
from ..sparse.table_init import TableInit
from .base import KVStoreBase, register
from .compression import GradientCompression
from .layout import ShardLayout
from .rows import check_sparse_push, summed
from .server import KVServer, ServerLost
from .standby import Standbys

__all__ = ["DistKVStore"]

#: environment variable giving the number of server shards (MXNet's name)
NUM_SERVERS_ENV = "DMLC_NUM_SERVER"
#: environment variable: "1" gives every shard a hot standby (see ``standby``)
STANDBY_ENV = "RAYMOD_KVSTORE_STANDBY"
_TYPES = ("dist_sync", "dist_device_sync", "dist_async", "dist")


#: Ray calls a KVServer serves at once (each run-ahead worker off its machine waits in one)
SERVER_THREADS = 64
#: seconds a driver's call on the servers may take before the silent ones count as lost
#: (none waits on workers: a step's pushes reach the servers from the workers)
SERVER_SECONDS = 60.0
#: seconds a server has to answer a ping when the driver looks for dead ones
PING_SECONDS = 10.0
#: seconds a new server has to answer its first call: its process starts and imports first,
#: which took over a minute on a 2-core machine at load 13 (then counted as a lost server)
START_SECONDS = 300.0


def _as_list(x: Any) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


class DistKVStore(KVStoreBase):
    """A key-value store kept by KVServer actors on the Ray cluster.

    Parameters
    ----------
    name : str, default 'dist_sync'
        ``'dist_sync'`` / ``'dist_device_sync'``: a module's step completes when every
        slice of its global batch has arrived, then the optimizer runs once.
        ``'dist_async'``: each worker's push is applied as it arrives.
    num_servers : int, optional
        Shards (default: ``$DMLC_NUM_SERVER`` or 1). Keys are spread over them; keys above
        ``MXNET_KVSTORE_BIGARRAY_BOUND`` elements are split across all.
    shared_memory : bool, default True
        Let workers on a server's machine push and read through shared memory
        (``/dev/shm``) instead of Ray's object store; False sends every byte through Ray.
    server_resources : dict, optional
        Ray custom resources each server actor asks for (a replacement too), e.g.
        ``{"ps": 1}`` to keep the servers on the nodes that offer ``ps``.
    standby : bool, optional
        Give every shard a hot standby (``dist_sync`` only; default
        ``$RAYMOD_KVSTORE_STANDBY == "1"``): a second server actor, on another node when
        there is one, that takes every step before it is published; a lost server is then
        replaced by its standby at once instead of restoring the driver's snapshot and
        replaying the steps since. Costs each step one copy of the summed gradient to the
        standby and the standby's optimizer run (in parallel with the primary's).

    Attributes
    ----------
    bytes_pushed, bytes_pulled : int
        Bytes of table rows (row ids and values) sent to and read from the servers by this
        driver so far (see :meth:`row_traffic`).

    Notes
    -----
    The driver is the only client that calls this API; workers of a module reach the
    servers through the step protocol. ``rank`` is therefore 0, and ``num_workers`` is
    the number of worker actors of the module using the store (1 before one does).
    Connects to (or starts) the Ray cluster with ``rm.cluster.init()``.

    A key initialised with a :class:`~raymod.sparse.RowSparseArray` is a row_sparse table:
    its rows are split evenly over the shards and kept out of the values workers read. A
    push of row_sparse gradients updates only their rows (a lazy update); pull rows with
    :meth:`row_sparse_pull`, or every row with :meth:`pull` into a dense array.
    """

    def __init__(self, name: str = "dist_sync", num_servers: int | None = None,
                 shared_memory: bool = True, server_resources: dict | None = None,
                 standby: bool | None = None):
        from ..cluster import local
        if name not in _TYPES:
            raise ValueError(f"unknown dist kvstore type {name!r}; known: {', '.join(_TYPES)}")
        if num_servers is None:
            num_servers = int(os.environ.get(NUM_SERVERS_ENV, "1"))
        if num_servers < 1:
            raise ValueError(f"num_servers must be >= 1, got {num_servers}")
        if server_resources is not None and (
                not isinstance(server_resources, dict)
                or not all(isinstance(k, str) and isinstance(v, (int, float))
                           and not isinstance(v, bool) and v > 0
                           for k, v in server_resources.items())):
            raise ValueError(f"server_resources must map resource names to amounts > 0, got "
                             f"{server_resources!r}")
        if standby is None:
            standby = os.environ.get(STANDBY_ENV, "0") == "1"
        if not isinstance(standby, bool):
            raise ValueError(f"standby must be a bool, got {standby!r}")
        if standby and name == "dist_async":
            raise ValueError("standby=True needs a dist_sync kvstore (a dist_async step is "
                             "never published as a whole), got 'dist_async'")
        local.init()
        import ray
        self._type = "dist_sync" if name == "dist" else name
        self.mode = "async" if self._type == "dist_async" else "sync"
        self.layout = ShardLayout(num_servers)
        # threaded: run-ahead workers block in wait_done while others push
        self._server_cls = ray.remote(num_cpus=0, max_restarts=0,
                                      max_concurrency=SERVER_THREADS)(KVServer)
        self._server_resources = dict(server_resources or {})
        self.shared_memory = bool(shared_memory)
        self.servers = [self._new_server(s) for s in range(num_servers)]
        self._ray = ray
        try:
            self._await_started(self.servers)
        except BaseException:
            for server in self.servers:  # nothing else will: the store was never made
                ray.kill(server, no_restart=True)
            raise
        self.generation = 0  # restores so far (see weights_after)
        self._key_kind: type | None = None
        self._optimizer: Optimizer | None = None
        self._updater: Callable | None = None
        self._compression: GradientCompression | None = None
        self._weights: tuple[int, list] | None = None
        self._corrections: dict = {}
        self.writes = 0  # direct changes (not steps): a recovery snapshot must follow them
        self._version = 0
        self.num_workers_attached = 1
        self.standbys = Standbys(self) if standby else None
        self.bytes_pushed = self.bytes_pulled = 0

    @classmethod
    def _from_name(cls, name: str) -> "DistKVStore":
        return cls(name)

    # ---- the driver's API ---------------------------------------------------------------------
    def init(self, key: Any, value: Any) -> None:
        """Set initial values; a known key is overwritten (as ``broadcast`` does).

        Parameters
        ----------
        key : int, str, or list of them
        value : ndarray or list of ndarray
        """
        values = self._one_value_each(key, value)
        tables = {k: v for k, v in values.items() if self.layout.is_table(k)
                  or (k not in self.layout.keys and isinstance(v, (RowSparseArray, TableInit)))}
        values = {k: _host_dense(v) for k, v in values.items() if k not in tables}
        fresh = {k: v for k, v in values.items() if k not in self.layout.keys}
        known = {k: v for k, v in values.items() if k in self.layout.keys}
        calls = self._init_tables(tables)
        if fresh:
            added: dict[int, list] = {}
            for k, v in fresh.items():
                for shard, piece in self.layout.add(k, v.shape, v.dtype):
                    added.setdefault(shard, []).append(piece)
            for shard, pieces in added.items():
                payload = self.layout.pack(shard, {**self._current_values(shard, pieces),
                                                   **fresh})
                calls.append(self.servers[shard].add.remote(pieces, payload))
        if known:
            calls += self._per_shard("write", known)
        self._get(calls)
        self._weights = None
        self.writes += 1

    def _init_tables(self, tables: dict) -> list:
        """Server calls that create the tables ``{key: value}`` (a known table is
        overwritten), one per shard holding rows of each. Each shard gets its rows of the
        value: a row_sparse value's held rows only (a table of zeros costs no transfer), or
        a :class:`TableInit`, from which each shard makes its own rows."""
        calls = []
        for k, value in tables.items():
            known = k in self.layout.keys
            if known:
                self._check_known(k, [value], "init")
            else:
                self.layout.add_table(k, value.shape, value.dtype)
            index = self.layout.keys[k][2]
            for s, lo, hi in self.layout.table_ranges(k):
                part = value if isinstance(value, TableInit) else _rows_in(value, lo, hi)
                calls.append(self.servers[s].write_table.remote(k, part) if known else
                             self.servers[s].add_table.remote(k, index, lo, hi, part))
        return calls

    def add_correction_keys(self, pairs: dict) -> None:
        """Create ``pairs[k]`` (zeros shaped like key ``k``) as the correction of ``k``:
        the servers add its value to ``k``'s aggregated gradient before every update.

        SVRG keeps its full gradient this way. Correction keys are placed on the same
        shards and ranges as their keys; set them with :meth:`push` (which the optimizer
        must treat as assignment) or :meth:`init`.
        """
        added: dict[int, list] = {}
        for key, extra in pairs.items():
            self._check_known(key, [], "add_correction_keys")
            if extra in self.layout.keys:  # added by an earlier try (a set-up run again)
                continue
            shape, dtype, _ = self.layout.keys[key]
            for shard, piece in self.layout.add(extra, shape, dtype, like=key):
                added.setdefault(shard, []).append(piece)
        zeros = {extra: np.zeros(self.layout.keys[key][0], self.layout.keys[key][1])
                 for key, extra in pairs.items()}
        self._corrections.update(pairs)  # before the calls: a replaced server gets them too
        calls = [self.servers[shard].add.remote(
            pieces, self.layout.pack(shard, {**self._current_values(shard, pieces), **zeros}))
            for shard, pieces in added.items()]
        self._get(calls)
        self._get([s.set_corrections.remote(self._corrections) for s in self.servers])
        self._weights = None
        self.writes += 1

    def _current_values(self, shard: int, new_pieces: list) -> dict:
        """Values of the shard's existing keys (so a growing buffer keeps them)."""
        old = {p.key for p in self.layout.shards[shard]} - {p.key for p in new_pieces}
        if not old:
            return {}
        return self._read_keys(sorted(old, key=str))

    def push(self, key: Any, value: Any, priority: int = 0) -> None:
        """Sum the values of each key, then let the servers apply them now.

        With an optimizer (``set_optimizer``) the servers update the stored weights; without
        one the sum replaces the stored value. Row_sparse values are summed by rows (in the
        order given); for a table, each shard gets only its rows, and the optimizer updates
        only those (a lazy update). Every key is checked before any server is called.
        """
        sums, rows = {}, {}
        for k, vals in self._grouped(key, value, "push").items():
            self._check_known(k, vals, "push")
            check_sparse_push(k, vals, self._compression)
            total = self._summed(k, vals)
            if self.layout.is_table(k):
                rows[k] = total if isinstance(total, RowSparseArray) \
                    else RowSparseArray.full(total)
            else:  # a dense key keeps its dense update, whatever the gradient's storage
                sums[k] = total.todense() if isinstance(total, RowSparseArray) else total
        calls = [c for k, total in rows.items() for c in self._push_rows(k, total)]
        self._get(calls + self._per_shard("apply_now", sums))
        self._weights = None
        self.writes += 1

    def _summed(self, key: Any, values: list) -> Any:
        """The host sum of one key's pushed values: row_sparse when all are (see
        :func:`~raymod.kvstore.rows.summed`), else dense, compressed first when asked."""
        if any(is_sparse(v) for v in values):
            total = summed(values)
            if isinstance(total, RowSparseArray):
                return RowSparseArray(as_numpy(total.data), as_numpy(total.indices),
                                      total.shape, check=False)
            return as_numpy(total)
        arrays = [as_numpy(v) for v in values]
        if self._compression is not None:
            arrays = [as_numpy(self._compression.compress(key, i, a))
                      for i, a in enumerate(arrays)]
        return arrays[0].copy() if len(arrays) == 1 else np.sum(arrays, axis=0,
                                                                dtype=arrays[0].dtype)

    def _push_rows(self, key: Any, total: RowSparseArray) -> list:
        """``apply_rows`` calls sending each shard of table ``key`` its rows of ``total``.

        Every shard of the table gets a call, one without rows an empty one (no row bytes):
        it still counts the update (Adam's bias correction, learning-rate schedules) and,
        without an updater, zeroes its rows, as an in-process store does for the whole
        table.
        """
        ids, data = total.indices, total.data
        calls = []
        for shard, part in self.layout.row_parts(key, ids):
            self.bytes_pushed += ids[part].nbytes + data[part].nbytes
            calls.append(self.servers[shard].apply_rows.remote(key, ids[part], data[part]))
        return calls

    def pull(self, key: Any, out: Any = None, priority: int = 0,
             ignore_sparse: bool = True) -> None:
        """Copy stored values into ``out`` (one array, or a list per key).

        A table's every row goes into a dense ``out``. Row_sparse ``out`` arrays are skipped
        unless ``ignore_sparse`` is False (then they receive every row): their rows come
        from :meth:`row_sparse_pull`.
        """
        if out is None:
            raise MXNetError("pull needs out= arrays to write into")
        keys = _as_list(key)
        outs = out if isinstance(key, (list, tuple)) else [out]
        if len(outs) != len(keys):
            raise MXNetError(f"pull: {len(keys)} keys but {len(outs)} outputs")
        self._check_kind(keys, "pull")
        for k in keys:
            self._check_known(k, [], "pull")
        pairs = [(k, t) for k, o in zip(keys, outs) for t in _as_list(o)
                 if not (ignore_sparse and isinstance(t, RowSparseArray))]
        values = self._read_keys(list(dict.fromkeys(k for k, _ in pairs)))
        for k, target in pairs:
            if isinstance(target, RowSparseArray):  # every row, in memory of its own
                target[:] = RowSparseArray.full(_on_device_of(target.data, values[k]).copy())
            else:
                target[...] = _on_device_of(target, values[k])

    def pushpull(self, key: Any, value: Any, out: Any = None, priority: int = 0) -> None:
        """``push`` then ``pull`` (into ``value`` itself when ``out`` is None)."""
        self.push(key, value, priority)
        self.pull(key, out=value if out is None else out, priority=priority)

    def broadcast(self, key: Any, value: Any, out: Any, priority: int = 0) -> None:
        """``init`` (or overwrite) the keys with ``value``, then ``pull`` into ``out``."""
        self.init(key, value)
        self.pull(key, out=out, priority=priority)

    def row_sparse_pull(self, key: Any, out: Any = None, priority: int = 0,
                        row_ids: Any = None) -> None:
        """Copy only the rows ``row_ids`` of stored tables into row_sparse ``out`` arrays;
        each shard is asked only for its rows.

        Parameters
        ----------
        key : int, str, or list of them
            The key(s): tables, or dense keys (whose rows are taken from the whole value).
        out : RowSparseArray, or lists as in :meth:`pull`
            Receives the rows (and holds no others afterwards).
        priority : int, default 0
            Accepted for MXNet compatibility.
        row_ids : array of int, or a list of them (one per ``out`` array)
            Rows wanted, any order, repeats allowed.

        Raises
        ------
        ValueError
            A row id outside the table, or no ``row_ids`` (before anything is copied).
        TypeError
            An ``out`` array that is not row_sparse.
        """
        plan = self._row_pulls(key, out, row_ids,
                               lambda k, o: self._check_known(k, [o], "row_sparse_pull"))
        for (k, o, wanted), data in zip(plan, self._read_rows([(k, w) for k, _, w in plan])):
            o[:] = RowSparseArray(_on_device_of(o.data, data), wanted, o.shape, check=False)

    def row_traffic(self, reset: bool = False) -> dict[str, int]:
        """``{"pushed": bytes, "pulled": bytes}`` of table rows (ids and values) moved by
        this driver since the store was made or last reset; ``reset`` zeroes the counts."""
        counts = {"pushed": self.bytes_pushed, "pulled": self.bytes_pulled}
        if reset:
            self.bytes_pushed = self.bytes_pulled = 0
        return counts

    def set_optimizer(self, optimizer: Optimizer) -> None:
        """Run ``optimizer`` on the servers (``update_on_kvstore``)."""
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"set_optimizer needs an Optimizer, got {type(optimizer).__name__}")
        self._optimizer, self._updater = optimizer, None
        self._get([s.set_optimizer.remote(optimizer) for s in self.servers])

    def _set_updater(self, updater: Callable) -> None:
        """Run ``updater(key, received, stored)`` on the servers (per piece of each key)."""
        if not callable(updater):
            raise TypeError(f"updater must be callable, got {type(updater).__name__}")
        self._optimizer, self._updater = None, updater
        self._get([s.set_updater.remote(updater) for s in self.servers])

    def set_gradient_compression(self, compression_params: dict) -> None:
        """2-bit compression of pushes, with residual error feedback (MXNet's format)."""
        self._compression = GradientCompression.from_params(compression_params)
        threshold = None if self._compression is None else self._compression.threshold
        self._get([s.set_compression.remote(threshold) for s in self.servers])

    @property
    def compression_threshold(self) -> float | None:
        """The 2-bit threshold workers compress with (None: off)."""
        return None if self._compression is None else self._compression.threshold

    def is_capable(self, capability: str) -> bool:
        """True for ``'optimizer'``: the servers can run one."""
        if capability.lower() == self.OPTIMIZER:
            return True
        raise ValueError(f"unknown kvstore capability {capability!r}")

    def get_optimizer(self) -> Optimizer | None:
        """The optimizer the servers run."""
        return self._optimizer

    def save_optimizer_states(self, fname: str, dump_optimizer: bool = False) -> None:
        """Write the servers' optimizer states to ``fname`` in the in-process format.

        The shards' pieces are joined back into whole-key states, so the file equals what
        a 'local' store with the same history would write.
        """
        with open(fname, "wb") as f:
            f.write(self.get_optimizer_states(dump_optimizer))

    def get_optimizer_states(self, dump_optimizer: bool = False) -> bytes:
        """The joined optimizer states as bytes (see :meth:`save_optimizer_states`)."""
        opt = self._require_optimizer("save")
        shards = self._get([s.get_optimizer_states.remote() for s in self.servers])
        whole = Updater(copy.deepcopy(opt))  # copies: set_states rewrites update counts
        merged = whole.optimizer._all_index_update_counts
        parts: dict[Any, list] = {}
        for blob in shards:
            upd = Updater(copy.deepcopy(opt))
            upd.set_states(blob)
            for k, state in upd._states.items():
                parts.setdefault(k, []).append(state)
            for dev, counts in upd.optimizer._all_index_update_counts.items():
                for k, c in counts.items():
                    merged.setdefault(dev, {})[k] = max(merged.get(dev, {}).get(k, 0), c)
            whole.optimizer.num_update = max(whole.optimizer.num_update,
                                             upd.optimizer.num_update)
        for k, states in parts.items():
            shape = self.layout.keys[k][0]
            whole._states[k] = _join(states, shape)
        return whole.get_states(dump_optimizer)

    def load_optimizer_states(self, fname: str) -> None:
        """Read a states file (from this store or an in-process one) onto the servers."""
        with open(fname, "rb") as f:
            self.set_optimizer_states(f.read())

    def set_optimizer_states(self, blob: bytes) -> None:
        """Split whole-key states over the shards (see :meth:`load_optimizer_states`)."""
        opt = self._require_optimizer("load")
        whole = Updater(copy.deepcopy(opt))
        whole.set_states(blob)
        calls = []
        for shard, server in enumerate(self.servers):
            part = Updater(whole.optimizer)
            for k, cut in self._shares(shard):
                if k in whole._states:
                    part._states[k] = _split(whole._states[k], cut)
            calls.append(server.set_optimizer_states.remote(part.get_states()))
        self._get(calls)
        self.writes += 1

    def _shares(self, shard: int) -> list[tuple[Any, Callable]]:
        """``(key, cut)`` for everything ``shard`` holds: ``cut(whole)`` is its share of an
        array shaped like the key (a piece's flat range, a table's rows)."""
        pieces = [(p.key, lambda a, p=p: a.reshape(-1)[p.start:p.stop])
                  for p in self.layout.shards[shard]]
        return pieces + [(k, lambda a, lo=lo, hi=hi: a[lo:hi])
                         for k, lo, hi in self.layout.tables_on(shard)]

    @property
    def type(self) -> str:
        return self._type

    @property
    def rank(self) -> int:
        """0: the driver is the store's only direct client."""
        return 0

    @property
    def num_workers(self) -> int:
        """Worker actors of the module using this store (1 until one attaches)."""
        return self.num_workers_attached

    def close(self) -> None:
        """Stop the server actors (the store is unusable afterwards)."""
        if self.standbys is not None:
            self.standbys.close()
        closing = [s.close.remote() for s in self.servers]
        waits.settle(closing, 10)  # dead ones never answer
        for server in self.servers:
            self._ray.kill(server, no_restart=True)
        self.servers = []

    def _barrier(self) -> None:
        """Nothing to wait for: the driver orders every step."""

    def __repr__(self) -> str:
        return (f"<DistKVStore type={self._type!r} servers={len(self.servers)} "
                f"keys={len(self.layout.keys)}>")

    def _get(self, refs: Any, seconds: float = SERVER_SECONDS) -> Any:
        """``ray.get`` of server calls within ``seconds``: a dead server reads as
        :class:`ServerLost`, which the module's controller repairs (see
        ``raymod.cluster.controller``); so does one that stops answering, once it is
        killed (its replacement takes its place)."""
        try:
            return waits.get(refs, seconds, "kvstore servers")
        except self._ray.exceptions.RayActorError as err:
            raise ServerLost(f"a kvstore server died: {type(err).__name__}") from err
        except waits.DeadlineMissed as err:
            hung = self.dead_shards(kill_silent=True)
            raise ServerLost(f"kvstore servers {hung} missed a {seconds:.0f} s "
                             f"deadline") from err

    # ---- recovery ---------------------------------------------------------------------------
    def snapshot(self) -> list:
        """Every shard's state (values, optimizer states, progress), held by the caller so
        that it outlives the servers and the nodes they run on.

        The states are fetched into this process: a ref to a server's answer would leave
        the only copy in the object store of the server's node, and losing that node would
        lose the server and its snapshot together. Returns once every shard has taken its
        snapshot: pushes from the servers' machine reach a server through its doorbell,
        not behind this call in the actor's queue, so the next step must not start before.
        """
        return self._get([s.snapshot.remote() for s in self.servers])

    def snapshot_at(self, step: int) -> bool:
        """Have every shard take its :meth:`snapshot` when it finishes ``step``, without
        stopping the steps in flight; False if some shard has finished it already."""
        return all(self._call_all("snapshot_at", step))

    def snapshot_of(self, step: int) -> list | None:
        """The shards' snapshots of ``step`` (see :meth:`snapshot_at`), fetched into this
        process; None if some shard has none (e.g. a replaced server)."""
        states = self._call_all("snapshot_of", step)
        return None if any(s is None for s in states) else states

    def _new_server(self, shard: int) -> Any:
        """Start the KVServer actor of ``shard`` (named, placed by ``server_resources``)."""
        return self._server_cls.options(resources=self._server_resources,
                                        **naming.server_options(self, shard)).remote(
            shard, self.mode, self.shared_memory, actor_setup.steps())

    def _await_started(self, servers: list) -> None:
        """Wait up to :data:`START_SECONDS` for new servers to answer a ping, before any
        call that counts a silent server as lost (one that dies or never answers reads as
        ``ServerLost``, as in :meth:`_get`)."""
        self._get([server.ping.remote() for server in servers], START_SECONDS)

    def dead_shards(self, kill_silent: bool = True) -> list[int]:
        """Shards whose server actor died or does not answer a ping within
        :data:`PING_SECONDS` (``kill_silent``: such a server is killed, so that it is
        replaced rather than waited for)."""
        pings = {shard: server.ping.remote() for shard, server in enumerate(self.servers)}
        _, silent = waits.wait(list(pings.values()), PING_SECONDS)
        dead = []
        for shard, ref in pings.items():
            if ref in silent:
                if kill_silent:
                    self._ray.kill(self.servers[shard], no_restart=True)
                dead.append(shard)
                continue
            try:
                waits.get(ref, PING_SECONDS, f"kvstore server {shard} ping")
            except self._ray.exceptions.RayActorError:
                dead.append(shard)
        return dead

    def restart_dead(self) -> list[int]:
        """New servers, holding zeros, for the dead shards (before any snapshot exists: the
        caller sets the values up again). Returns the replaced shards."""
        dead = self.dead_shards()
        for shard in dead:
            zeros = self.layout.pack(shard, {k: np.zeros(*self.layout.keys[k][:2])
                                             for k in {p.key for p in self.layout.shards[shard]}})
            server = self._configured_server(shard, zeros)
            self._get([server.add_table.remote(*args) for args in self.layout.zero_tables(shard)])
            self.servers[shard] = server
        self._weights = None
        self.generation += 1
        return dead

    def _configured_server(self, shard: int, buffers: Any) -> Any:
        """A new server for ``shard`` holding ``buffers``, with this store's optimizer (or
        updater), compression and correction keys."""
        server = self._new_server(shard)
        self._await_started([server])
        self._get(server.add.remote(self.layout.shards[shard], buffers))
        calls = [server.set_compression.remote(self.compression_threshold),
                 server.set_corrections.remote(self._corrections)]
        if self._optimizer is not None:
            calls.append(server.set_optimizer.remote(self._optimizer))
        elif self._updater is not None:
            calls.append(server.set_updater.remote(self._updater))
        self._get(calls)
        return server

    def tend_standbys(self) -> None:
        """Start the missing hot standbys and attach those that are up (without waiting
        for any to start); nothing without ``standby``."""
        if self.standbys is not None:
            self.standbys.tend()

    def promote_standbys(self) -> list[int] | None:
        """Replace every dead server by its hot standby: the replaced shards, or None when
        some dead shard has no standby holding all its steps (nothing is changed then)."""
        if self.standbys is None:
            return None
        dead = self.dead_shards()
        if not dead:
            return []
        live = [s for s in range(len(self.servers)) if s not in dead]
        ahead = max((p["steps_done"] for p in self._get(
            [self.servers[s].progress.remote() for s in live])), default=-1)
        if not self.standbys.promote(dead, ahead, PING_SECONDS):
            return None
        self._weights = None
        self.generation += 1
        return dead

    def furthest_live_step(self) -> int | None:
        """The furthest step a live shard has finished (None: every shard is dead). No
        shard finished a later one, so a restore need replay nothing beyond it."""
        dead = set(self.dead_shards(kill_silent=False))
        live = [s.progress.remote() for shard, s in enumerate(self.servers) if shard not in dead]
        return max((p["steps_done"] for p in self._get(live)), default=None)

    def restore(self, snapshot: list) -> list[int]:
        """Bring every shard back to a :meth:`snapshot`, starting new servers for dead ones.

        Returns the shards whose servers were replaced.
        """
        dead = self.dead_shards()
        for shard in dead:
            self.servers[shard] = self._configured_server(shard, snapshot[shard]["buffers"])
        self._get([s.restore.remote(snap) for s, snap in zip(self.servers, snapshot)])
        self._weights = None
        self.generation += 1
        return dead

    # ---- the step protocol (used by a module's worker actors) --------------------------------
    def finish_step(self, step: int, slice_ids: list[int]) -> None:
        """Close a sync step on every shard and keep the refs of the published values."""
        refs = self._get([s.finish.remote(step, slice_ids) for s in self.servers])
        self._version += 1
        self._weights = (self._version, [r[0] for r in refs])

    def set_published(self, refs: list) -> None:
        """Adopt the refs a step's completing pushes returned (one per shard)."""
        self._version += 1
        self._weights = (self._version, list(refs))

    def missing_slices(self, step: int, slice_ids: list[int]) -> list[int]:
        """Slices of ``step`` some shard has not received."""
        per = self._get([s.missing.remote(step, slice_ids) for s in self.servers])
        return sorted(set().union(*per))

    # ---- run-ahead windows -------------------------------------------------------------------
    def _call_all(self, method: str, *args: Any) -> list:
        return self._get([getattr(s, method).remote(*args) for s in self.servers])

    def abort(self, window: int) -> None:
        """End the servers' waits of run-ahead windows up to ``window``."""
        self._call_all("abort", window)

    def set_metric(self, metric: Any) -> None:
        """The metric whose per-slice states shard 0 folds into one state per step."""
        self._get(self.servers[0].set_metric.remote(metric))

    def take_metrics(self, last_step: int) -> dict:
        """Per finished step up to ``last_step``, its metric states pushed with its slices,
        folded by shard 0 (``{"merged": state}`` or ``{"parts": [...]}``); each step is
        handed over once."""
        return self._get(self.servers[0].take_metrics.remote(last_step))

    def steps_done(self) -> int:
        """The last step every shard has finished."""
        return min(self.shard_steps())

    def shard_steps(self) -> list[int]:
        """Each shard's last finished step."""
        return [p["steps_done"] for p in self._call_all("progress")]

    def idle_seconds(self) -> float:
        """Seconds since some shard last finished a step (a hung worker stalls them all)."""
        return min(p["idle_s"] for p in self._call_all("progress"))

    def progress(self) -> list[dict]:
        """Per shard: ``steps_done`` and the slices received per pending step."""
        return self._call_all("progress")

    def weights_after(self, step: int) -> tuple:
        """``(("step", step, generation), [published per shard])``: the values every shard
        published when it finished ``step`` (readable until the shard finishes ``step + 2``).
        ``generation`` counts :meth:`restore` calls, so that values after a restore never
        pass for the same step's values before it."""
        refs = self._call_all("published_after", step)
        return ("step", step, self.generation), [r[0] for r in refs]

    def weights(self) -> tuple[int, list]:
        """``(version, [published per shard])``: per shard an object ref to its values, or
        a :class:`~raymod.kvstore.server.Published` block to read them from."""
        if self._weights is None:
            refs = self._get([s.published.remote() for s in self.servers])
            self._version += 1
            self._weights = (self._version, [r[0] for r in refs])
        return self._weights

    def read_all(self) -> dict:
        """Every key's current value (host arrays)."""
        return self._read_keys(list(self.layout.keys))

    # ---- helpers ------------------------------------------------------------------------------
    def _per_shard(self, method: str, values: dict) -> list:
        """One call of ``method({key: piece values})`` per shard holding any of ``values``."""
        by_shard: dict[int, dict] = {}
        for k, v in values.items():
            flat = v.reshape(-1)
            for shard, p in self.layout.pieces_of(k):
                by_shard.setdefault(shard, {})[k] = flat[p.start:p.stop]
        return [getattr(self.servers[s], method).remote(vals) for s, vals in by_shard.items()]

    def _read_keys(self, keys: list) -> dict:
        """Every element of ``keys`` (pieces and table rows), joined from the shards."""
        shards = sorted({s for k in keys for s in self.layout.shards_of(k)})
        got = dict(zip(shards, self._get([self.servers[s].read.remote(keys)
                                              for s in shards])))
        values = {}
        for k in keys:
            shape, dtype, _ = self.layout.keys[k]
            whole = np.empty(shape, dtype)
            if self.layout.is_table(k):
                for s, lo, hi in self.layout.table_ranges(k):
                    whole[lo:hi] = got[s][k]
                self.bytes_pulled += whole.nbytes
            else:
                flat = whole.reshape(-1)
                for s, p in self.layout.pieces_of(k):
                    flat[p.start:p.stop] = got[s][k]
            values[k] = whole
        return values

    def _read_rows(self, wanted: list[tuple[Any, np.ndarray]]) -> list[np.ndarray]:
        """The rows ``ids`` (sorted, unique, checked) of each ``(key, ids)``, all asked for
        at once: each shard of a table only for its rows, a dense key read whole."""
        dense = self._read_keys(list(dict.fromkeys(
            k for k, _ in wanted if not self.layout.is_table(k))))
        out, where, calls = [], [], []
        for i, (k, ids) in enumerate(wanted):
            if k in dense:
                out.append(dense[k][ids])
                continue
            shape, dtype, _ = self.layout.keys[k]
            out.append(np.empty((ids.size,) + shape[1:], dtype))
            for shard, part in self.layout.row_parts(k, ids):
                if part.stop > part.start:  # shards with none of the rows are not asked
                    where.append((i, part))
                    calls.append(self.servers[shard].read_rows.remote(k, ids[part]))
                    self.bytes_pulled += ids[part].nbytes
        for (i, part), rows in zip(where, self._get(calls)):
            out[i][part] = rows
            self.bytes_pulled += rows.nbytes
        return out

    def _check_known(self, key: Any, arrays: list, what: str) -> None:
        if key not in self.layout.keys:
            raise MXNetError(f"{what}: key {key!r} has not been initialized; call init first")
        shape = self.layout.keys[key][0]
        for a in arrays:
            if tuple(a.shape) != shape:
                raise MXNetError(f"{what}: key {key!r} holds shape {shape}, got an array of "
                                 f"shape {tuple(a.shape)}")

    def _require_optimizer(self, what: str) -> Optimizer:
        if self._optimizer is None:
            raise MXNetError(f"cannot {what} optimizer states: no optimizer on this kvstore "
                             "(call set_optimizer first)")
        return self._optimizer


def _to_like(target: Any, value: np.ndarray) -> Any:
    """``value`` on ``target``'s device (CuPy targets)."""
    import cupy
    with cupy.cuda.Device(target.device.id):
        return cupy.asarray(value)


def _on_device_of(target: Any, value: np.ndarray) -> Any:
    """``value`` itself for a host ``target``, else a copy on ``target``'s device."""
    return value if isinstance(target, np.ndarray) else _to_like(target, value)


def _rows_in(value: Any, lo: int, hi: int) -> Any:
    """Rows ``[lo, hi)`` of an init value, renumbered from 0: a dense slice, or for a
    row_sparse value (not holding every row) the held rows among them."""
    if not isinstance(value, RowSparseArray) or value.is_full:
        return _host_dense(value)[lo:hi]
    a, b = np.searchsorted(as_numpy(value.indices), [lo, hi])
    return RowSparseArray(as_numpy(value.data[a:b]), as_numpy(value.indices[a:b]) - lo,
                          (hi - lo,) + tuple(value.shape[1:]), check=False)


def _host_dense(value: Any) -> np.ndarray:
    """An init value as a dense host array (a sparse one densified: rows not given are 0)."""
    return as_numpy(value.todense() if is_sparse(value) else value)


def _join(states: list, shape: tuple) -> Any:
    """Whole-key state from the per-shard piece states (in element order)."""
    first = states[0]
    if first is None or isinstance(first, (bool, int, float)):
        return first
    if isinstance(first, (tuple, list)):
        return type(first)(_join([s[i] for s in states], shape) for i in range(len(first)))
    return np.concatenate([np.asarray(s).reshape(-1) for s in states]).reshape(shape)


def _split(state: Any, cut: Callable[[np.ndarray], np.ndarray]) -> Any:
    """A shard's share of a whole-key state: ``cut`` of each of its arrays (see
    ``DistKVStore._shares``)."""
    if state is None or isinstance(state, (bool, int, float)):
        return state
    if isinstance(state, (tuple, list)):
        return type(state)(_split(s, cut) for s in state)
    return np.ascontiguousarray(cut(np.asarray(state)))


for _name in _TYPES:
    register(DistKVStore, name=_name)

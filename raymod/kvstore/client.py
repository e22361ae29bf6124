"""``ShardClient``: a worker's end of the KVServer shards in the step protocol.

It packs one slice's gradients per shard and pushes them tagged ``(step, slice)``, and reads
the values a step published. The bytes take the cheapest road to each server: through a
shared-memory block when the server runs on this machine (see :mod:`.shm`), through Ray's
object store otherwise, or 2-bit quantized when compression is on. A push to a server on
this machine is a short message on the server's doorbell socket (see :mod:`.doorbell`).

A block a push names must stay untouched until its step completes on the server (which
sums the slices in slice order only then). The client therefore keeps a small set of outbox
blocks per shard and gives each push of a step its own slot; the driver starts step
``k + 1`` only after step ``k`` completed, so a step reuses the blocks of the one before.

Zero copy on one machine: a worker may compute a slice's gradients straight into the
outbox of the slot its push will take (:meth:`ShardClient.gradient_views`), so the push
packs nothing, and may read parameters in place from the server's published block
(:meth:`ShardClient.value_views`), so a new step's weights are not copied either.
"""
from __future__ import annotations

import logging
from typing import Any, Callable

import numpy as np

from ..base import MXNetError
from . import shm
from .compression import quantize_2bit
from .doorbell import Doorbell
from ..sparse import RowSparseArray
from .layout import ShardLayout
from .rows import checked_row_ids
from .server import Published, ServerLost

__all__ = ["ShardClient"]

_LOG = logging.getLogger(__name__)


class ShardClient:
    """Pushes slices to and reads published values from every KVServer shard.

    Parameters
    ----------
    layout : ShardLayout
        Where each key's elements live on the shards.
    servers : list of KVServer actor handles
        One per shard.
    threshold : float, optional
        2-bit compression threshold (None: uncompressed pushes).
    """

    def __init__(self, layout: ShardLayout, servers: list, threshold: float | None = None):
        self.layout, self.threshold = layout, threshold
        self.residuals: dict[int, dict] = {}
        self.pack_buffers: dict[int, dict] = {}  # made on first use: shm pushes need none
        self.outboxes: dict[int, list[shm.SharedBlock]] = {}
        self.doorbells: list[Doorbell | None] = []
        self._step, self._pushes = None, 0
        # per-step work done once: a block's views stay valid as long as the block
        self._whole: dict[int, tuple[int, list]] = {}     # shard -> (pieces seen, whole ones)
        self._views: dict[str, tuple[int, dict]] = {}     # block name -> (pieces seen, views)
        self._in_place: dict[str, dict] = {}  # outbox name -> {key: array found lying in it}
        self.set_servers(servers)

    def set_servers(self, servers: list) -> None:
        """Use these server handles (after a server was replaced); learns which share this
        machine's memory by mapping the block each one offers."""
        import ray
        self.servers = list(servers)
        try:
            handles = ray.get([s.block_handle.remote() for s in self.servers])
        except ray.exceptions.RayActorError as err:
            raise ServerLost(f"a kvstore server died: {type(err).__name__}") from None
        self.local = [False] * len(self.servers)
        for shard, handle in enumerate(handles):
            if handle is not None:
                try:
                    shm.SharedBlock.attach(handle)
                    self.local[shard] = True
                except FileNotFoundError:  # another machine's memory: go by value
                    pass
        self._close_doorbells()
        self.doorbells = [None] * len(self.servers)
        if self.threshold is None and any(self.local):
            local = [s for s in range(len(self.servers)) if self.local[s]]
            try:
                paths = ray.get([self.servers[s].doorbell.remote() for s in local])
                for shard, path in zip(local, paths):
                    if path is not None:
                        self.doorbells[shard] = Doorbell(path)
            except ray.exceptions.RayActorError as err:
                raise ServerLost(f"a kvstore server died: {type(err).__name__}") from None
            except OSError as err:  # no socket after all: Ray carries the pushes
                _LOG.warning("kvstore doorbell unavailable (%s): pushing through Ray", err)

    def push(self, step: int, slice_id: int, grads: dict,
             num_slices: int | None = None, metric: Any = None) -> dict[int, Any]:
        """Push one slice's gradients (key -> host array) to every shard; ``metric`` (the
        slice's metric state) goes with shard 0's push.

        Returns ``{shard: published}`` for the shards this push completed (their new values,
        see :meth:`read`).
        """
        answers = self._push(step, slice_id, grads, num_slices, metric, None)
        return {shard: ack[0] for shard, ack in answers.items() if isinstance(ack, list)}

    def push_and_wait(self, step: int, slice_id: int, grads: dict, num_slices: int | None,
                      metric: Any, window: int, timeout: float | None = None,
                      sent: Callable[[], None] | None = None) -> list | None:
        """:meth:`push`, then :meth:`wait_done` for the same ``step``, in one message to
        each doorbell server (one round trip per step instead of two). ``sent()`` is called
        once every push is out, before the wait (a worker's clock).

        Returns the values after ``step`` per shard, or None when the driver aborted window
        ``window`` (or ``timeout`` passed) first; the push was taken either way.
        """
        answers = self._push(step, slice_id, grads, num_slices, metric, (window, timeout), sent)
        calls = {shard: self.servers[shard].wait_done.remote(step, window, timeout)
                 for shard, ack in answers.items() if not isinstance(ack, list)
                 and self.doorbells[shard] is None}
        return self._published_after(answers, calls)

    def _published_after(self, answers: dict, calls: dict) -> list | None:
        """``answers`` completed with the Ray ``wait_done`` calls: the published values
        per shard, or None if some wait ended without the step (aborted, timed out)."""
        import ray
        try:
            if calls:
                answers.update(zip(calls, ray.get(list(calls.values()))))
        except ray.exceptions.RayActorError as err:
            raise ServerLost(f"lost a kvstore server while waiting: {type(err).__name__}") \
                from None
        if any(not isinstance(a, list) for a in answers.values()):
            return None
        return [answers[shard][0] for shard in range(len(self.servers))]

    def _push(self, step: int, slice_id: int, grads: dict, num_slices: int | None,
              metric: Any, wait: tuple[int, float | None] | None,
              sent: Callable[[], None] | None = None) -> dict[int, Any]:
        """Every shard's answer to the push (``[published]`` or whether it was taken); a
        doorbell push with ``wait = (window, timeout)`` is answered once the step finished
        (``[published]``) or the window was aborted (False)."""
        import ray
        grads = self._push_rows(step, slice_id, grads)
        slot = self.next_slot(step)
        self._pushes += 1
        acks, rung = {}, []
        for shard, server in enumerate(self.servers):
            extra = metric if shard == 0 else None
            if self.threshold is not None:
                packed = self.layout.pack(shard, grads, out=self._pack_buffer(shard))
                res = self.residuals.setdefault(shard, {})
                payload = {dt: quantize_2bit(buf, res.setdefault(dt, np.zeros_like(buf)),
                                             self.threshold) for dt, buf in packed.items()}
            elif self.local[shard] and (block := self._outbox(shard, slot)) is not None:
                self._pack_into(shard, block, grads)
                payload = block.handle
                if self.doorbells[shard] is not None:
                    message = {"step": step, "slice": slice_id, "num_slices": num_slices,
                               "block": payload.name,
                               "sizes": [list(x) for x in payload.sizes]}
                    if extra is not None:  # (numpy values: as to_json, by the doorbell)
                        message["metric"] = extra
                    if wait is not None:
                        message.update(wait=step, window=wait[0], timeout=wait[1])
                    self._ring(shard, message)
                    rung.append(shard)
                    continue
            else:  # Ray copies the buffer into the object store at .remote(): reusable
                payload = self.layout.pack(shard, grads, out=self._pack_buffer(shard))
            acks[shard] = server.push.remote(step, slice_id, payload, num_slices, extra)
        answers = {}
        if acks:  # (doorbell pushes alone: no Ray call to wait for)
            try:
                answers = dict(zip(acks, ray.get(list(acks.values()))))
            except ray.exceptions.RayActorError as err:
                raise ServerLost(f"lost a kvstore server while pushing: "
                                 f"{type(err).__name__}") from None
        if sent is not None:
            sent()
        for shard in rung:
            answers[shard] = self._answer(shard)
        return answers

    def _push_rows(self, step: int, slice_id: int, grads: dict) -> dict:
        """Send the slice's row_sparse table gradients, each shard its rows, and wait until
        they are taken (the slice's push that follows may finish the step); returns the
        other gradients. Only rows the slice touched cross the wire."""
        tables = {k: g for k, g in grads.items() if isinstance(g, RowSparseArray)}
        if not tables:
            return grads
        by_shard: dict[int, dict] = {}
        for key, g in tables.items():
            for shard, part in self.layout.row_parts(key, g.indices):
                if part.stop > part.start:
                    by_shard.setdefault(shard, {})[key] = (g.indices[part], g.data[part])
        self._call([self.servers[s].push_rows.remote(step, slice_id, rows)
                    for s, rows in by_shard.items()], "pushing rows")
        return {k: g for k, g in grads.items() if k not in tables}

    def pull_rows(self, key: Any, ids: Any) -> RowSparseArray:
        """The rows ``ids`` of table ``key`` (every row when None), each shard asked only
        for its own; ids are checked against the table first (ValueError naming them)."""
        shape = self.layout.keys[key][0]
        ids = np.arange(shape[0]) if ids is None else checked_row_ids(ids, shape[0], key)
        parts = [(part, self.servers[shard].read_rows.remote(key, ids[part]))
                 for shard, part in self.layout.row_parts(key, ids) if part.stop > part.start]
        rows = self._call([ref for _, ref in parts], "pulling rows")
        out = np.empty((ids.size,) + tuple(shape[1:]), self.layout.keys[key][1])
        for (part, _), values in zip(parts, rows):
            out[part] = values
        return RowSparseArray(out, ids, shape, check=False)

    @staticmethod
    def _call(refs: list, what: str) -> list:
        import ray
        try:
            return ray.get(refs)
        except ray.exceptions.RayActorError as err:
            raise ServerLost(f"lost a kvstore server while {what}: {type(err).__name__}") \
                from None

    def _pack_into(self, shard: int, block: shm.SharedBlock, grads: dict) -> None:
        """Pack ``grads`` into an outbox block; a gradient computed in it stays. Which array
        lies in place is checked once per (block, array): the check reads each array's
        address, which costs numpy more than the rest of a small push."""
        seen = self._in_place.setdefault(block.handle.name, {})
        rest = {key: a for key, a in grads.items() if seen.get(key) is not a}
        found: set = set()
        self.layout.pack(shard, rest, out=block.arrays, in_place=found)
        for key in found:  # held here, so the identity stays this array's
            seen[key] = rest[key]

    def wait_done(self, step: int, window: int, timeout: float | None = None) -> list | None:
        """Wait until every shard finished ``step``; its published values per shard (as
        :meth:`push` returns them), or None when the driver aborted run-ahead window
        ``window`` (or ``timeout`` passed) first."""
        calls, rung = {}, []
        for shard, server in enumerate(self.servers):
            if self.doorbells[shard] is not None:
                self._ring(shard, {"wait": step, "window": window, "timeout": timeout})
                rung.append(shard)
            else:
                calls[shard] = server.wait_done.remote(step, window, timeout)
        return self._published_after({shard: self._answer(shard) for shard in rung}, calls)

    def next_slot(self, step: int) -> int:
        """The outbox slot the next push of ``step`` takes (0 for a step's first push)."""
        if step != self._step:
            self._step, self._pushes = step, 0
        return self._pushes

    def _ring(self, shard: int, message: dict) -> None:
        try:
            self.doorbells[shard].send(message)
        except ConnectionError as err:
            raise ServerLost(f"lost kvstore server {shard} while pushing: {err}") from None

    def _answer(self, shard: int) -> bool | list:
        """A doorbell push's answer in :meth:`KVServer.push`'s form."""
        try:
            reply = self.doorbells[shard].receive()
        except ConnectionError as err:
            raise ServerLost(f"lost kvstore server {shard} while pushing: {err}") from None
        if "published" not in reply:
            return False if reply.get("aborted") else reply["taken"]
        done = reply["published"]
        handle = shm.BlockHandle(done["block"], tuple((dt, int(n)) for dt, n in done["sizes"]))
        return [Published(handle, int(done["version"]))]

    def gradient_views(self, slot: int) -> dict:
        """``{key: flat array}`` inside the outbox of push slot ``slot``, for every key a
        server on this machine holds whole: a gradient computed into them is pushed with no
        copy. Empty when pushes are compressed or no server is local. The same block gives
        the same array objects every time (a worker bound to them need not rebind)."""
        if self.threshold is not None:
            return {}
        views = {}
        for shard, local in enumerate(self.local):
            if not local or (block := self._outbox(shard, slot)) is None:
                continue
            views.update(self._block_views(shard, block, writeable=True))
        return views

    def value_views(self, published: list) -> dict:
        """``{key: read-only flat array}`` inside the published blocks of this machine's
        servers, for every key such a block holds whole: the worker computes with them in
        place. A sync server changes its block only after every slice of the next step has
        been pushed, so the views stay valid for the whole of that step. The same block
        gives the same array objects every time."""
        views = {}
        for shard, item in enumerate(published):
            if not isinstance(item, Published):
                continue
            try:
                block = shm.SharedBlock.attach(item.handle)
            except FileNotFoundError:
                continue
            if block.version != item.version:
                raise ServerLost(f"shard {shard} holds version {block.version}, not the "
                                 f"published {item.version}: its server was replaced")
            views.update(self._block_views(shard, block, writeable=False))
        return views

    def _block_views(self, shard: int, block: shm.SharedBlock, writeable: bool) -> dict:
        """``{key: flat view}`` of the shard's whole pieces in ``block``, made once per block
        (and again when the layout grew)."""
        pieces = self._whole_pieces(shard)
        seen, views = self._views.get(block.handle.name, (-1, None))
        if seen != len(pieces) or views is None:
            views = {}
            for p in pieces:
                view = block.arrays[p.dtype][p.offset:p.offset + p.size].view()
                if not writeable:
                    view.flags.writeable = False  # the server's values: never written here
                views[p.key] = view
            if len(self._views) >= 4 * max(1, len(self.servers)) + 8:  # blocks of the past
                self._views.pop(next(iter(self._views)))
            self._views[block.handle.name] = (len(pieces), views)
        return views

    def _whole_pieces(self, shard: int) -> list:
        """``layout.whole_pieces(shard)``, recomputed only when the shard got pieces."""
        count = len(self.layout.shards[shard])
        seen, pieces = self._whole.get(shard, (-1, None))
        if seen != count:
            pieces = self.layout.whole_pieces(shard)
            self._whole[shard] = (count, pieces)
        return pieces

    def _pack_buffer(self, shard: int) -> dict:
        """The private buffers a by-value or compressed push of ``shard`` is packed into."""
        if shard not in self.pack_buffers:
            self.pack_buffers[shard] = self.layout.buffers(shard)
        return self.pack_buffers[shard]

    def _outbox(self, shard: int, slot: int) -> shm.SharedBlock | None:
        """The shard's outbox for the ``slot``-th push of a step (None: no shared memory
        left, so this shard's pushes go by value from now on)."""
        boxes = self.outboxes.setdefault(shard, [])
        sizes = dict(self.layout.sizes[shard])
        if boxes and dict(boxes[0].handle.sizes) != sizes:  # the layout grew: start over
            for box in boxes:
                self._in_place.pop(box.handle.name, None)
                box.unlink()
            boxes.clear()
        try:
            while len(boxes) <= slot:
                boxes.append(shm.SharedBlock.create(sizes))
        except OSError as err:  # /dev/shm full: the object store still works
            _LOG.warning("no shared memory for shard %d's pushes (%s): sending them through "
                         "the object store", shard, err)
            self.local[shard] = False
            return None
        return boxes[slot]

    def read(self, published: list, into: Callable[[int, dict], None]) -> None:
        """Hand each shard's published values to ``into(shard, {dtype: flat array})``.

        ``published`` holds, per shard, an object ref or a :class:`Published` block. A block
        is read in place; its version is checked before and after, so a read that raced a
        server update fails loudly instead of mixing two steps' weights.
        """
        import ray
        fetch = {}
        for shard, item in enumerate(published):
            if isinstance(item, Published):
                try:
                    shm.SharedBlock.attach(item.handle)
                except FileNotFoundError:  # not on this machine: ask the server for a copy
                    fetch[shard] = self.servers[shard].pull.remote()
            else:
                fetch[shard] = item
        try:
            values = dict(zip(fetch, ray.get(list(fetch.values()))))
        except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as err:
            raise ServerLost(f"cannot read the published values: {type(err).__name__}") \
                from None
        for shard, item in enumerate(published):
            if shard in values:
                into(shard, values[shard])
                continue
            block = shm.SharedBlock.attach(item.handle)
            if block.version != item.version:
                raise ServerLost(f"shard {shard} holds version {block.version}, not the "
                                 f"published {item.version}: its server was replaced")
            into(shard, block.arrays)
            if block.version != item.version:
                raise MXNetError(f"shard {shard} changed while it was read (version "
                                 f"{item.version} -> {block.version}): a step-protocol bug")

    def _close_doorbells(self) -> None:
        for bell in self.doorbells:
            if bell is not None:
                bell.close()

    def close(self) -> None:
        """Remove this client's outbox blocks and hang up the doorbells."""
        self._close_doorbells()
        self.doorbells = [None] * len(self.servers)
        for boxes in self.outboxes.values():
            for box in boxes:
                box.unlink()
        self.outboxes.clear()
        self._in_place.clear()

"""Where each key's elements live on the KVServer shards, and how values are packed for them.

A key's array is seen as a flat vector. Small keys go whole to the least-loaded shard; keys
above :data:`BIG_ARRAY_BOUND` elements are cut into one contiguous range per shard, so no
server carries a big layer alone (MXNet's ``MXNET_KVSTORE_BIGARRAY_BOUND``). Each shard keeps
one flat buffer per dtype; a :class:`Piece` is a range of a key mapped to a range of that
buffer. A push or a weight update then travels as one ``{dtype: flat array}`` payload per shard.

A row_sparse table (a key initialised with a row_sparse value) is laid out by rows instead:
shard ``s`` holds rows ``[lo_s, hi_s)``, the rows split evenly over every shard, outside the
flat buffers (see :meth:`ShardLayout.add_table`). Pushes and pulls of a table then carry only
the rows they touch.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from ..context import as_numpy

__all__ = ["BIG_ARRAY_BOUND", "Piece", "ShardLayout", "same_memory"]

#: ``(shard, lo, hi)``: the rows ``[lo, hi)`` of a table that ``shard`` holds
RowRange = tuple[int, int, int]

#: keys with more elements than this are split over all shards
BIG_ARRAY_BOUND = int(os.environ.get("MXNET_KVSTORE_BIGARRAY_BOUND", 1_000_000))


@dataclass(frozen=True)
class Piece:
    """Elements ``[start, stop)`` of key ``key``'s flat array, at ``offset`` of a shard buffer."""

    key: Any
    index: int      # the key's position in init order: the optimizer index on the servers
    start: int
    stop: int
    dtype: str
    offset: int

    @property
    def size(self) -> int:
        return self.stop - self.start


class ShardLayout:
    """The pieces of every key on ``num_shards`` shards, grown one key at a time.

    Parameters
    ----------
    num_shards : int
        How many KVServer shards share the keys.
    big_array_bound : int, optional
        Keys with more elements are split over every shard.
    """

    def __init__(self, num_shards: int, big_array_bound: int = BIG_ARRAY_BOUND):
        if num_shards < 1:
            raise ValueError(f"num_shards must be >= 1, got {num_shards}")
        self.num_shards = num_shards
        self.big_array_bound = big_array_bound
        self.shards: list[list[Piece]] = [[] for _ in range(num_shards)]
        self.sizes: list[dict[str, int]] = [{} for _ in range(num_shards)]
        self.keys: dict[Any, tuple[tuple, str, int]] = {}  # key -> (shape, dtype, index)
        self.tables: dict[Any, list[RowRange]] = {}  # table key -> its row ranges

    def add(self, key: Any, shape: tuple, dtype: Any,
            like: Any = None) -> list[tuple[int, Piece]]:
        """Place a new key; returns its ``(shard, piece)`` list.

        With ``like`` (a key of the same size), the new key's pieces go to the same shards
        and element ranges, so a server holds both halves of every pair it combines.
        """
        if like is not None and self.is_table(like):
            raise ValueError(f"key {key!r} cannot be laid out like the row_sparse table "
                             f"{like!r} (tables hold rows, not pieces)")
        size = int(np.prod(shape, dtype=np.int64))
        dtype, index = self._record(key, shape, dtype)
        if like is not None:
            ranges = [(s, p.start, p.stop) for s, p in self.pieces_of(like)]
        elif size > self.big_array_bound and self.num_shards > 1:
            ranges = self._even_ranges(size)
        else:
            load = [sum(sz.values()) for sz in self.sizes]
            ranges = [(int(np.argmin(load)), 0, size)]
        placed = []
        for shard, start, stop in ranges:
            offset = self.sizes[shard].get(dtype, 0)
            piece = Piece(key, index, start, stop, dtype, offset)
            self.shards[shard].append(piece)
            self.sizes[shard][dtype] = offset + piece.size
            placed.append((shard, piece))
        return placed

    def add_table(self, key: Any, shape: tuple, dtype: Any) -> list[RowRange]:
        """Place a new row_sparse table: its rows split evenly over every shard.

        Returns the ``(shard, lo, hi)`` row ranges, in row order; shards that get no row
        (a table with fewer rows than shards) are left out. The table takes the next
        optimizer index, as a key of pieces does.
        """
        if not shape:
            raise ValueError(f"row_sparse table {key!r} needs at least one dimension")
        self._record(key, shape, dtype)
        ranges = [r for r in self._even_ranges(int(shape[0])) if r[2] > r[1]]
        self.tables[key] = ranges
        return ranges

    def is_table(self, key: Any) -> bool:
        """Whether ``key`` is a row_sparse table (laid out by rows, not pieces)."""
        return key in self.tables

    def table_ranges(self, key: Any) -> list[RowRange]:
        """``(shard, lo, hi)`` of every row range of table ``key``, in row order."""
        return self.tables[key]

    def row_parts(self, key: Any, ids: np.ndarray) -> list[tuple[int, slice]]:
        """``(shard, slice of ids)`` for every shard of table ``key``: the part of the
        sorted ``ids`` in the shard's rows (empty slices included)."""
        ranges = self.tables[key]
        ends = np.searchsorted(ids, [hi for _, _, hi in ranges]).tolist()
        return [(shard, slice(start, end))
                for (shard, _, _), start, end in zip(ranges, [0] + ends[:-1], ends)]

    def tables_on(self, shard: int) -> list[tuple[Any, int, int]]:
        """``(key, lo, hi)`` of every table rows range ``shard`` holds."""
        return [(k, lo, hi) for k, ranges in self.tables.items()
                for s, lo, hi in ranges if s == shard]

    def zero_tables(self, shard: int) -> list[tuple[Any, int, int, int, np.ndarray]]:
        """``(key, index, lo, hi, zeros)`` of every table range ``shard`` holds: the
        arguments of ``KVServer.add_table`` for a new server holding zeros."""
        out = []
        for key, lo, hi in self.tables_on(shard):
            shape, dtype, index = self.keys[key]
            out.append((key, index, lo, hi, np.zeros((hi - lo,) + shape[1:], dtype)))
        return out

    def shards_of(self, key: Any) -> list[int]:
        """The shards holding some of ``key`` (pieces or table rows), ascending."""
        if self.is_table(key):
            return [s for s, _, _ in self.tables[key]]
        return sorted({s for s, _ in self.pieces_of(key)})

    def _record(self, key: Any, shape: tuple, dtype: Any) -> tuple[str, int]:
        """Register a new key: its dtype string and optimizer index (init order)."""
        if key in self.keys:
            raise KeyError(f"key {key!r} is already laid out")
        dtype = np.dtype(dtype).str
        index = len(self.keys)
        self.keys[key] = (tuple(shape), dtype, index)
        return dtype, index

    def _even_ranges(self, size: int) -> list[RowRange]:
        """``(shard, start, stop)``: ``[0, size)`` cut evenly into one range per shard."""
        bounds = np.linspace(0, size, self.num_shards + 1).astype(np.int64)
        return [(s, int(bounds[s]), int(bounds[s + 1])) for s in range(self.num_shards)]

    def pieces_of(self, key: Any) -> list[tuple[int, Piece]]:
        """``(shard, piece)`` of every piece of ``key``, in element order."""
        return [(s, p) for s, pieces in enumerate(self.shards) for p in pieces if p.key == key]

    def buffers(self, shard: int) -> dict[str, np.ndarray]:
        """Fresh zero buffers for one shard: one flat array per dtype."""
        return {dt: np.zeros(n, dtype=dt) for dt, n in self.sizes[shard].items()}

    def pack(self, shard: int, arrays: Mapping[Any, Any],
             out: dict[str, np.ndarray] | None = None,
             in_place: set | None = None) -> dict[str, np.ndarray]:
        """Copy the shard's pieces of ``arrays`` (key -> array) into its flat buffers.

        A piece whose array already lies at its place in ``out`` (a gradient computed
        straight into a push block) is not copied; its key is added to ``in_place``.
        """
        out = self.buffers(shard) if out is None else out
        for p in self.shards[shard]:
            if p.key not in arrays:  # keys this payload does not carry stay as they are
                continue
            target = out[p.dtype][p.offset:p.offset + p.size]
            source = arrays[p.key].reshape(-1)[p.start:p.stop]
            if isinstance(source, np.ndarray) and same_memory(source, target):
                if in_place is not None:
                    in_place.add(p.key)
                continue
            target[...] = as_numpy(source)
        return out

    def whole_pieces(self, shard: int) -> list[Piece]:
        """The shard's pieces that hold a whole key (those a worker can bind in place)."""
        return [p for p in self.shards[shard]
                if p.start == 0 and p.stop == int(np.prod(self.keys[p.key][0], dtype=np.int64))]

    def unpack(self, shard: int, payload: Mapping[str, np.ndarray],
               arrays: Mapping[Any, Any]) -> None:
        """Copy a shard's flat buffers into the pieces of ``arrays`` (key -> array, in place)."""
        for p in self.shards[shard]:
            if p.key not in arrays:
                continue
            target = arrays[p.key]
            part = payload[p.dtype][p.offset:p.offset + p.size]
            if isinstance(target, np.ndarray):
                target.reshape(-1)[p.start:p.stop] = part
            else:  # a CuPy array: one host-to-device copy per piece
                import cupy
                target.reshape(-1)[p.start:p.stop] = cupy.asarray(part)

    def views(self, shard: int, buffers: Mapping[str, np.ndarray]) -> list[tuple[Piece, Any]]:
        """``(piece, view of its range)`` for every piece of a shard's buffers."""
        return [(p, buffers[p.dtype][p.offset:p.offset + p.size]) for p in self.shards[shard]]


def same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays are the same elements of the same memory."""
    return (a.__array_interface__["data"][0] == b.__array_interface__["data"][0]
            and a.size == b.size and a.dtype == b.dtype and a.strides == b.strides)

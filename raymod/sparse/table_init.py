"""Initial values of a row_sparse table, made a block of rows at a time where the rows live.

A table of 10^7 x 64 floats is 2.56 GB: built whole on the driver and sent to the KVServers,
it would need the driver to hold what no worker is meant to. So on workers a table is not
drawn whole. Its rows are cut into blocks of :data:`BLOCK_ROWS`; the driver runs the
initializer over the blocks in order, one block's memory at a time, keeping only raymod's
generator state at the start of each block. A :class:`TableInit` (initializer, name, shape,
those states) is all that travels: each KVServer draws the blocks over its own rows again
from their states. The values are the ones a whole-array draw gives (the same as in one
process, bit for bit), since an element-wise initializer draws the elements in order.

Only initializers whose elements are drawn one after another (``Initializer.by_rows``:
Uniform, Normal, Xavier, constants) work this way; the others fill the table whole.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import random as _random
from ..initializer import InitDesc, create, rows_of_table

__all__ = ["BLOCK_ROWS", "TableInit"]

#: rows per block (16 MB of float32 at width 64): the unit a KVServer draws at a time
BLOCK_ROWS = 1 << 16


@dataclass(frozen=True)
class TableInit:
    """How to make any rows of a table's initial value (picklable: a state per block).

    Attributes
    ----------
    initializer : Initializer
        What fills each block (it resolves a variable's own ``__init__`` itself).
    desc : InitDesc
        The parameter's name and attributes, as ``init_params`` passes them.
    shape : tuple of int
        The whole table's shape.
    dtype : numpy.dtype
        The table's dtype.
    states : tuple of dict
        raymod's generator's bit-generator state at the start of each block.
    """

    initializer: Any
    desc: InitDesc
    shape: tuple
    dtype: np.dtype
    states: tuple

    @classmethod
    def draw(cls, initializer: Any, desc: InitDesc, shape: tuple,
             dtype: Any) -> "TableInit | None":
        """Run ``initializer`` over the table a block at a time, as ``initializer(desc,
        whole)`` would draw it, keeping each block's starting state (raymod's generator
        ends where the whole draw leaves it); None when the initializer that applies (the
        variable's own ``__init__`` first) must see the whole array (fill it whole then)."""
        own = desc.attrs.get("__init__", "")
        chosen = create(own) if own else initializer
        if not getattr(chosen, "by_rows", False) or len(shape) < 1:
            return None
        shape, dtype = tuple(int(n) for n in shape), np.dtype(dtype)
        states = []
        with rows_of_table(shape):
            for b in range(max(1, -(-shape[0] // BLOCK_ROWS))):
                states.append(_random.generator().bit_generator.state)
                count = min(BLOCK_ROWS, shape[0] - b * BLOCK_ROWS)
                initializer(desc, np.empty((count,) + shape[1:], dtype))
        return cls(initializer, desc, shape, dtype, tuple(states))

    def rows(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``[lo, hi)`` of the initial value, a fresh ``(hi - lo,) + shape[1:]`` array."""
        out = np.empty((hi - lo,) + self.shape[1:], self.dtype)
        for b in range(lo // BLOCK_ROWS, -(-hi // BLOCK_ROWS)):
            start = b * BLOCK_ROWS
            stop = min(start + BLOCK_ROWS, self.shape[0])
            a, z = max(lo, start), min(hi, stop)
            out[a - lo:z - lo] = self._block(b)[a - start:z - start]
        return out

    def fill(self, out: Any) -> None:
        """Write the whole initial value into ``out`` (a dense array shaped like the table),
        a block at a time."""
        for b in range(-(-self.shape[0] // BLOCK_ROWS)):
            out[b * BLOCK_ROWS:(b + 1) * BLOCK_ROWS] = self._block(b)

    def _block(self, b: int) -> np.ndarray:
        """Block ``b`` drawn again from its starting state."""
        count = min(BLOCK_ROWS, self.shape[0] - b * BLOCK_ROWS)
        block = np.empty((count,) + self.shape[1:], self.dtype)
        state = self.states[b]
        bits = getattr(np.random, state["bit_generator"])()
        bits.state = state
        with _random.drawing_from(np.random.Generator(bits)), rows_of_table(self.shape):
            self.initializer(self.desc, block)
        return block

"""Row-wise work on a large array, in blocks of rows, on the BLAS pool's threads.

numpy runs an elementwise chain (subtract, exp, sum, divide) on one core, a pass at a time
over the whole array: a softmax over a language model's (1120, 10000) logits takes 28 ms that
way. numpy releases the GIL inside its loops, so blocks of rows can run on several threads at
once: 12.6 ms on 2 threads (2-core Intel Xeon, quiet; blocks of 1 MB; on one thread the
blocks take as long as the whole). Every row is computed by the same calls as over the whole
array, so the result is the same to the bit however the rows are cut.

Threads: as many as the BLAS pool has now (:mod:`raymod.threads` sizes it to the free
cores), pulling blocks from a shared list, so that a thread on a core another process holds
takes fewer.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from .. import threads
from ._batch_parts import pool

# Bytes of a block: from 128 KB to 8 MB the 2-thread softmax above took 28, 16, 14, 12.6, 12.0
# and 11.2 ms; 1 MB keeps enough blocks (45 here) for a thread on a busy core to take fewer.
BLOCK_BYTES = 1 << 20
# Below this many bytes the whole array is one block: threads would cost more than they save.
MIN_SPLIT_BYTES = 1 << 22

def for_row_blocks(fn: Callable[[slice], None], rows: int, row_bytes: int) -> None:
    """Call ``fn(slice(start, stop))`` over blocks covering ``range(rows)``.

    ``fn`` must write only its own rows. Blocks run on the BLAS pool's threads when the work
    is large enough to gain from it, in order on the calling thread otherwise.
    """
    if rows * row_bytes < MIN_SPLIT_BYTES or rows < 2:
        fn(slice(0, rows))
        return
    step = max(1, BLOCK_BYTES // max(row_bytes, 1))
    blocks = [slice(s, min(s + step, rows)) for s in range(0, rows, step)]
    g = threads.governor()
    workers = min(g.threads if g is not None else 1, len(blocks))
    if workers <= 1:
        for b in blocks:
            fn(b)
        return
    # the caller takes blocks too; each helper pulls the next free block until none is left
    queue = iter(blocks)

    def drain() -> None:
        for b in queue:  # next() on a list iterator is atomic under the GIL
            fn(b)

    helpers = [pool(workers - 1).submit(drain) for _ in range(workers - 1)]
    drain()
    for h in helpers:
        h.result()


def softmax_rows(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of the 2-D ``x``, into a new array."""
    out = np.empty_like(x)

    def block(rows: slice) -> None:
        z = x[rows]
        e = out[rows]
        np.subtract(z, z.max(axis=1, keepdims=True), out=e)
        np.exp(e, out=e)
        e /= e.sum(axis=1, keepdims=True)

    for_row_blocks(block, x.shape[0], x.shape[1] * x.itemsize)
    return out

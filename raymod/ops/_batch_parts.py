"""An op's batch cut into parts that run at once, one per thread of the BLAS pool.

OpenBLAS threads a GEMM only from a size up: a ResNet-20 convolution at batch 32 (16-64
channels, 8x8 to 32x32 maps) is many products and copies below that size, so a second
thread gains it nothing (196-206 ms a step at 1 thread, 189-211 at 2). The samples of a batch
are independent, though, and numpy releases the GIL in its loops and in BLAS: the batch's
halves can run on two threads, each with a single-threaded BLAS (two callers of a threaded
OpenBLAS would wait on its one server).

Parts are as many as the pool has threads now (:mod:`raymod.threads` sizes it to the free
cores); the pool is set to one thread while parts run and set back after. Whatever a sum
over the batch gives (a weight's gradient) is added part by part, so its last bits depend on
how many parts there were, as the BLAS pool's own thread count already makes them.

It pays over a chain of ops cut alike, each part's maps staying with the thread (and core)
that made them: ResNet-20's convolutions, BatchNorms and ReLUs all cut took its step from
169-208 ms to 139-177 at 2 threads (separate runs, quiet 2-core Xeon), though BatchNorm and
ReLU alone on a whole map from one thread take 1.0-2.7x as long cut (memory-bound passes),
and so do the strided im2col layers (1.2-1.4x). It does not pay for one big GEMM that
OpenBLAS threads itself (see Convolution._parts), nor for an LSTM's steps, whose calls release
the GIL for a few microseconds each: two threads then hand the GIL to each other at every
call, a small numpy call took 8x as long as on one thread alone, and the LSTM LM's step went
from 142 to 166 ms cut.
"""
from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterator, TypeVar

from .. import threads

_T = TypeVar("_T")

# Multiply-adds of a part below which threads cost more than they save (a hand-off to a
# thread and back costs tens of microseconds): 2M is about 0.02 ms of one core's peak GEMM,
# nearer 0.1 ms at these layers' rates.
MIN_PART_FLOPS = 2e6
# Elements of a part of an elementwise chain (BatchNorm's, ReLU's) below which the same holds:
# 64K float32 values are 20-60 us a pass.
MIN_PART_ELEMENTS = 1 << 16

_POOL: ThreadPoolExecutor | None = None


def pool(workers: int) -> ThreadPoolExecutor:
    """The process's helper threads (at least ``workers`` of them), made on first use."""
    global _POOL
    if _POOL is None or _POOL._max_workers < workers:
        _POOL = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="raymod-parts")
    return _POOL


def count(batch: int, work: float, least: float = MIN_PART_FLOPS) -> int:
    """How many parts a batch of ``batch`` samples costing ``work`` in all is cut into: the
    BLAS pool's threads now, fewer where a part would cost less than ``least`` (multiply-adds
    by default; :data:`MIN_PART_ELEMENTS` for an elementwise chain), 1 for no cut."""
    g = threads.governor()
    most = g.threads if g is not None else 1
    if most <= 1 or batch < 2:
        return 1
    return max(1, min(most, batch, int(work // least)))


def bounds(batch: int, parts: int) -> list[slice]:
    """``parts`` contiguous slices of ``range(batch)``, sizes differing by at most one."""
    step, extra = divmod(batch, parts)
    cuts = [0]
    for i in range(parts):
        cuts.append(cuts[-1] + step + (i < extra))
    return [slice(a, b) for a, b in zip(cuts, cuts[1:])]


def cuts(batch: int, elements: int) -> list[slice] | None:
    """The parts of a batch of ``batch`` samples (``elements`` values in all) over which an
    elementwise chain runs at once, or None for one pass over all."""
    parts = count(batch, elements, MIN_PART_ELEMENTS)
    return None if parts == 1 else bounds(batch, parts)


def each(parts: list[slice] | None, fn: Callable[[slice], object]) -> None:
    """``fn(part)`` for each of ``parts`` at once (an elementwise chain, no BLAS), or
    ``fn(slice(None))`` once when there are none."""
    if parts is None:
        fn(slice(None))
    else:
        run(lambda i: fn(parts[i]), len(parts), blas=False)


@contextlib.contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """The BLAS pool at one thread inside, at its size before after."""
    g = threads.governor()
    size = g.pool.size if g is not None else 1
    if size > 1:
        g.pool.resize(1)
    try:
        yield
    finally:
        if size > 1:
            g.pool.resize(size)


def run(fn: Callable[[int], _T], parts: int, blas: bool = True) -> list[_T]:
    """``[fn(0), ..., fn(parts - 1)]``, run at once on ``parts`` threads (this one takes
    part 0) with a one-thread BLAS (``blas=False``: ``fn`` calls no BLAS, the pool is left
    as it is); ``fn(i)`` must write only its own part's memory."""
    if parts <= 1:
        return [fn(0)]
    with _single_threaded_blas() if blas else contextlib.nullcontext():
        helpers = [pool(parts - 1).submit(fn, i) for i in range(1, parts)]
        try:
            first = fn(0)
        finally:
            rest = [h.result() for h in helpers]  # waits for all, even when part 0 raised
    return [first] + rest

"""Iterators that wrap other iterators: ``ResizeIter`` and ``PrefetchingIter``."""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Sequence

from ..base import MXNetError
from .base import DataBatch, DataDesc, DataIter


class _HoldsBatch(DataIter):
    """A wrapper whose ``iter_next`` stores the batch to hand out in ``current_batch``."""

    current_batch: DataBatch | None = None

    def next(self) -> DataBatch:
        """The current batch after advancing; ``StopIteration`` at the end of the epoch."""
        if not self.iter_next():
            raise StopIteration
        return self.current_batch

    def getdata(self) -> list:
        """Data of the current batch."""
        return self.current_batch.data

    def getlabel(self) -> list:
        """Labels of the current batch."""
        return self.current_batch.label

    def getindex(self) -> Any:
        """Index of the current batch."""
        return self.current_batch.index

    def getpad(self) -> int:
        """Pad of the current batch."""
        return self.current_batch.pad


class ResizeIter(_HoldsBatch):
    """Make an iterator yield a fixed number of batches per epoch.

    The inner iterator is reset and continued whenever it runs out, so an epoch of
    ``size`` batches may span several of its epochs, or stop inside one.

    Parameters
    ----------
    data_iter : DataIter
        The iterator to resize.
    size : int
        Batches per epoch.
    reset_internal : bool, default True
        Whether :meth:`reset` also resets the inner iterator; False continues where the
        previous epoch stopped.
    """

    def __init__(self, data_iter: DataIter, size: int, reset_internal: bool = True):
        super().__init__(data_iter.batch_size)
        if int(size) < 0:
            raise ValueError(f"size must be non-negative, got {size}")
        self.data_iter = data_iter
        self.size = int(size)
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch: DataBatch | None = None
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    @property
    def provide_data(self) -> list[DataDesc]:
        """The inner iterator's data descriptors."""
        return self.data_iter.provide_data

    @property
    def provide_label(self) -> list[DataDesc]:
        """The inner iterator's label descriptors."""
        return self.data_iter.provide_label

    def reset(self) -> None:
        """Start a new epoch of ``size`` batches."""
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self) -> bool:
        """Fetch the next inner batch, restarting the inner iterator when it ends."""
        if self.cur >= self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True


def _fetch(it: DataIter) -> DataBatch | None:
    try:
        return it.next()
    except StopIteration:
        return None


def _renamed(descs: list, renames: dict | None) -> list[DataDesc]:
    if renames is None:
        return list(descs)
    out = []
    for d in descs:
        if not isinstance(d, DataDesc):
            d = DataDesc(*d)
        out.append(DataDesc(renames.get(d.name, d.name), d.shape, d.dtype, d.layout))
    return out


class PrefetchingIter(_HoldsBatch):
    """Read the next batch of one or more iterators on background threads.

    While the caller works on batch ``k``, one thread per inner iterator already reads
    batch ``k+1``. With several iterators, each batch joins their data and labels, in order.

    Parameters
    ----------
    iters : DataIter or list of DataIter
        The iterators; with several they must yield the same number of batches, with equal
        ``pad``.
    rename_data : list of dict, optional
        One ``{old_name: new_name}`` dict per iterator, renaming its data inputs.
    rename_label : list of dict, optional
        Likewise for label inputs.

    Notes
    -----
    An exception raised by an inner iterator is raised again by the ``next`` call that
    would have returned its batch. Call :meth:`close` (or use ``with``) to stop the threads;
    they also stop when the iterator is garbage-collected. At most one read per inner
    iterator is in flight, and ``close``/``reset`` wait for it to finish.
    """

    def __init__(self, iters: DataIter | Sequence[DataIter],
                 rename_data: Sequence[dict] | None = None,
                 rename_label: Sequence[dict] | None = None):
        iters = list(iters) if isinstance(iters, (list, tuple)) else [iters]
        if not iters:
            raise ValueError("PrefetchingIter needs at least one iterator")
        for name, renames in (("rename_data", rename_data), ("rename_label", rename_label)):
            if renames is not None and len(renames) != len(iters):
                raise ValueError(f"{name} needs one dict per iterator: got {len(renames)} "
                                 f"for {len(iters)} iterators")
        self.iters = iters
        self.n_iter = len(iters)
        self.rename_data = rename_data
        self.rename_label = rename_label
        super().__init__(iters[0].batch_size)
        self.current_batch: DataBatch | None = None
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(
            max_workers=self.n_iter, thread_name_prefix="raymod-prefetch")
        self._pending: list[Future] = []
        self._prefetch()

    @property
    def provide_data(self) -> list[DataDesc]:
        """Data descriptors of every inner iterator, renamed, in order."""
        renames = self.rename_data or [None] * self.n_iter
        return sum((_renamed(it.provide_data, r) for it, r in zip(self.iters, renames)), [])

    @property
    def provide_label(self) -> list[DataDesc]:
        """Label descriptors of every inner iterator, renamed, in order."""
        renames = self.rename_label or [None] * self.n_iter
        return sum((_renamed(it.provide_label, r) for it, r in zip(self.iters, renames)), [])

    def _prefetch(self) -> None:
        if self._pool is None:
            raise RuntimeError("PrefetchingIter is closed")
        self._pending = [self._pool.submit(_fetch, it) for it in self.iters]

    def _drain(self) -> None:
        for fut in self._pending:
            try:
                fut.result()
            except Exception:  # an error in a batch nobody will read
                pass
        self._pending = []

    def reset(self) -> None:
        """Wait for batches in flight, reset every inner iterator, prefetch anew."""
        self._drain()
        for it in self.iters:
            it.reset()
        self._prefetch()

    def iter_next(self) -> bool:
        """Take the prefetched batches (False at the end) and start reading the next ones."""
        if not self._pending:
            return False
        futures, self._pending = self._pending, []
        batches = [f.result() for f in futures]
        if all(b is None for b in batches):
            return False
        if any(b is None for b in batches):
            ended = [i for i, b in enumerate(batches) if b is None]
            raise MXNetError(f"iterators {ended} of {self.n_iter} ran out before the others: "
                             "they must yield the same number of batches")
        pads = [b.pad for b in batches]
        if any(p != pads[0] for p in pads):
            raise MXNetError(f"iterators give batches with different pad values {pads}")
        self.current_batch = DataBatch(
            sum((list(b.data) for b in batches), []),
            sum((list(b.label or []) for b in batches), []),
            batches[0].pad, batches[0].index,
            provide_data=self.provide_data, provide_label=self.provide_label)
        self._prefetch()
        return True

    def close(self) -> None:
        """Wait for reads in flight and stop the background threads. Idempotent."""
        pool, self._pool = getattr(self, "_pool", None), None
        if pool is not None:
            self._drain()
            pool.shutdown(wait=True)

    def __enter__(self) -> "PrefetchingIter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

"""Which rows form each batch: the sampler, kept apart from reading the rows.

:class:`RowSampler` is a small, picklable plan over row ids (shuffle order per epoch, the
last-batch rule, roll-over carry). :class:`RowIter` joins a sampler to a
:class:`~raymod.io.base.RowSource` and is the common base of ``NDArrayIter`` and
``ArrowIter``. A driver can drive the sampler alone (:meth:`RowSampler.next_rows`) and send
the row ids to workers, which call ``take`` on their own copy of the source.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import random as _random
from .base import DataBatch, DataDesc, DataIter, RowSource

LAST_BATCH_HANDLES = ("pad", "discard", "roll_over")
_EMPTY = np.zeros(0, dtype=np.int64)


class RowSampler:
    """The row ids of every batch, epoch after epoch, with MXNet's last-batch rules.

    Parameters
    ----------
    num_rows : int
        Rows in the source (must be positive).
    batch_size : int
        Rows per batch (must be positive).
    shuffle : bool, default False
        Visit rows in a fresh random order each epoch.
    last_batch_handle : {'pad', 'discard', 'roll_over'}, default 'pad'
        What to do with the rows left after the last full batch: ``'pad'`` fills the batch
        up by wrapping around to the start of the epoch's order (tiling when the batch is
        larger than the data) and reports the filler count as ``pad``; ``'discard'`` drops
        them; ``'roll_over'`` keeps them and puts them at the front of the first batch of
        the next epoch.
    seed : int, optional
        Seed of the shuffle. When None, one seed is drawn from :func:`raymod.random.generator`
        at construction, so ``rm.random.seed`` still makes runs repeat.

    Notes
    -----
    The order of epoch ``e`` is a pure function of ``(seed, e)`` (:meth:`epoch_order`), so
    a driver can plan or replay any epoch without replaying the ones before. Epoch 0 is the
    order in force after construction; every :meth:`reset` moves to the next epoch.
    """

    def __init__(self, num_rows: int, batch_size: int, shuffle: bool = False,
                 last_batch_handle: str = "pad", seed: int | None = None):
        if int(num_rows) <= 0:
            raise ValueError("the dataset is empty: an iterator needs at least one row")
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool) \
                or batch_size <= 0:
            raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
        if last_batch_handle not in LAST_BATCH_HANDLES:
            raise ValueError(f"last_batch_handle must be one of {', '.join(LAST_BATCH_HANDLES)}; "
                             f"got {last_batch_handle!r}")
        self.num_rows = int(num_rows)
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.last_batch_handle = last_batch_handle
        if seed is None and self.shuffle:
            seed = int(_random.generator().integers(2**63 - 1))
        self.seed = seed
        self.epoch = 0
        self.cursor = 0          # position in self.idx where the next batch starts
        self.carry = _EMPTY      # roll-over rows opening this epoch, not yet served
        self._leftover = None    # roll-over rows found at the end of this epoch
        self.idx = self.epoch_order(0)

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The order (original row ids) in which epoch ``epoch`` visits the rows."""
        if not self.shuffle:
            return np.arange(self.num_rows, dtype=np.int64)
        rng = np.random.default_rng([int(self.seed) % 2**63, int(epoch)])
        return rng.permutation(self.num_rows).astype(np.int64, copy=False)

    def next_rows(self) -> tuple[np.ndarray, int]:
        """Advance one batch and return ``(row_ids, pad)``; ``StopIteration`` at epoch end."""
        n, bs = self.num_rows, self.batch_size
        if self.carry.size:
            # first batch of an epoch after 'roll_over': leftover rows, then this epoch's
            need = bs - self.carry.size
            if need > n - self.cursor:
                self._leftover = np.concatenate([self.carry, self.idx[self.cursor:]])
                self.carry, self.cursor = _EMPTY, n
                raise StopIteration
            rows = np.concatenate([self.carry, self.idx[self.cursor:self.cursor + need]])
            pad = self.carry.size    # MXNet reports the rolled-over count as pad
            self.carry = _EMPTY
            self.cursor += need
            return rows, pad
        if self.cursor >= n:
            raise StopIteration
        end = self.cursor + bs
        if end <= n:
            rows, pad = self.idx[self.cursor:end], 0
        elif self.last_batch_handle == "pad":
            pad = end - n
            rows = np.concatenate([self.idx[self.cursor:], np.resize(self.idx, pad)])
        else:
            if self.last_batch_handle == "roll_over":
                self._leftover = self.idx[self.cursor:].copy()
            self.cursor = n
            raise StopIteration
        self.cursor = end
        return rows, pad

    def reset(self) -> None:
        """Start the next epoch (new order when shuffling); roll-over rows carry into it.

        Rows carry over only when the previous epoch ran to its end; resetting mid-epoch
        drops them, as MXNet does.
        """
        carry = self._leftover if self._leftover is not None else _EMPTY
        self._start_epoch(self.epoch + 1, carry)

    def hard_reset(self) -> None:
        """Start the next epoch without carrying any roll-over rows."""
        self._start_epoch(self.epoch + 1, _EMPTY)

    def _start_epoch(self, epoch: int, carry: np.ndarray) -> None:
        self.epoch = epoch
        self.idx = self.epoch_order(epoch)
        self.cursor, self.carry, self._leftover = 0, carry, None

    def batches_per_epoch(self) -> int:
        """How many batches an epoch without carried rows yields."""
        full, rest = divmod(self.num_rows, self.batch_size)
        return full + (1 if rest and self.last_batch_handle == "pad" else 0)

    def get_state(self) -> dict:
        """Position as plain data (for checkpoints): epoch, cursor, carried and leftover rows."""
        return {"epoch": self.epoch, "cursor": self.cursor, "seed": self.seed,
                "carry": self.carry.tolist(),
                "leftover": None if self._leftover is None else self._leftover.tolist()}

    def set_state(self, state: dict) -> None:
        """Resume at a position returned by :meth:`get_state`."""
        self.seed = state["seed"]
        self._start_epoch(int(state["epoch"]), np.asarray(state["carry"], dtype=np.int64))
        self.cursor = int(state["cursor"])
        if state.get("leftover") is not None:
            self._leftover = np.asarray(state["leftover"], dtype=np.int64)


class RowIter(DataIter, RowSource):
    """A :class:`DataIter` made of a :class:`RowSampler` and the subclass's ``take``.

    Subclasses implement :attr:`num_rows`, :meth:`take`, :attr:`data_descs` and
    :attr:`label_descs`, then call :meth:`_init_sampler`. Batches carry ``index`` = the
    original row ids of their rows (MXNet's ``NDArrayIter`` leaves it None).
    """

    sampler: RowSampler

    def _init_sampler(self, batch_size: int, shuffle: bool, last_batch_handle: str,
                      seed: int | None) -> None:
        self.sampler = RowSampler(self.num_rows, batch_size, shuffle, last_batch_handle, seed)
        DataIter.__init__(self, self.sampler.batch_size)
        self.shuffle = self.sampler.shuffle
        self.last_batch_handle = last_batch_handle
        self._rows: np.ndarray | None = None
        self._pad = 0
        self._batch: tuple[list, list] | None = None

    # --- MXNet DataIter interface -------------------------------------------------------
    @property
    def provide_data(self) -> list[DataDesc]:
        """Descriptors of one batch of each data input (batch axis first)."""
        return [DataDesc(d.name, (self.batch_size,) + tuple(d.shape), d.dtype)
                for d in self.data_descs]

    @property
    def provide_label(self) -> list[DataDesc]:
        """Descriptors of one batch of each label input (batch axis first)."""
        return [DataDesc(d.name, (self.batch_size,) + tuple(d.shape), d.dtype)
                for d in self.label_descs]

    @property
    def idx(self) -> np.ndarray:
        """The current epoch's visiting order, as original row ids."""
        return self.sampler.idx

    @property
    def cursor(self) -> int:
        """Position in :attr:`idx` where the next batch starts."""
        return self.sampler.cursor

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The visiting order of epoch ``epoch`` (see :meth:`RowSampler.epoch_order`)."""
        return self.sampler.epoch_order(epoch)

    def reset(self) -> None:
        """Start the next epoch (reshuffling when ``shuffle``); roll-over rows carry in."""
        self.sampler.reset()
        self._rows, self._batch = None, None

    def hard_reset(self) -> None:
        """Start the next epoch, dropping any roll-over rows."""
        self.sampler.hard_reset()
        self._rows, self._batch = None, None

    def iter_next(self) -> bool:
        """Move to the next batch; False at the end of the epoch."""
        try:
            self._rows, self._pad = self.sampler.next_rows()
        except StopIteration:
            self._rows, self._batch = None, None
            return False
        self._batch = None
        return True

    def next(self) -> DataBatch:
        """The next :class:`DataBatch`; ``StopIteration`` at the end of the epoch."""
        if not self.iter_next():
            raise StopIteration
        data, label = self._current()
        batch = DataBatch(data=data, label=label, pad=self._pad, index=self._rows,
                          provide_data=self.provide_data, provide_label=self.provide_label)
        batch.source = self  # lets Ray workers read these rows themselves
        return batch

    def _current(self) -> tuple[list, list]:
        if self._rows is None:
            raise RuntimeError("no current batch: call iter_next() (or reset()) first")
        if self._batch is None:
            self._batch = self.take(self._rows)
        return self._batch

    def getdata(self) -> list:
        """Data arrays of the current batch."""
        return self._current()[0]

    def getlabel(self) -> list:
        """Label arrays of the current batch (empty list when there are no labels)."""
        return self._current()[1]

    def getpad(self) -> int:
        """Filler rows in the current batch (see ``last_batch_handle``)."""
        return self._pad

    def getindex(self) -> Any:
        """Original row ids of the current batch."""
        return self._rows

    def next_rows(self) -> tuple[np.ndarray, int]:
        """Advance without reading: ``(row_ids, pad)`` of the next batch, for a driver."""
        self._rows, self._pad = self.sampler.next_rows()
        self._batch = None
        return self._rows, self._pad

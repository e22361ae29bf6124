"""The batch order of MXNet's C++ iterators (CSVIter, LibSVMIter, ImageRecordIter).

Their last batch differs from ``NDArrayIter``'s: with ``round_batch`` (the default) it is
filled up from the start of the data and the next epoch *continues after the rows used to
fill it*, so no row is visited twice more than the wrap demands; without ``round_batch`` the
last batch is short, its missing places still hold the previous batch's rows, and ``pad``
says how many.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import DataDesc
from .sampler import RowIter, RowSampler


class WrapAroundSampler(RowSampler):
    """A :class:`RowSampler` with the C++ iterators' ``round_batch`` rule.

    Parameters
    ----------
    num_rows, batch_size, shuffle, seed
        As :class:`RowSampler`.
    round_batch : bool, default True
        Fill the last batch from the start of the data and start the next epoch where the
        filling stopped; otherwise pad it with the previous batch's rows.
    """

    def __init__(self, num_rows: int, batch_size: int, shuffle: bool = False,
                 round_batch: bool = True, seed: int | None = None):
        if not isinstance(round_batch, (bool, int, np.integer)):
            raise TypeError(f"round_batch must be a bool, got {round_batch!r}")
        self.round_batch = bool(round_batch)
        self.start = 0        # where this epoch starts in its order (rows filled last epoch)
        self._overflow = 0    # rows of the next epoch already used to fill this one
        self._previous: np.ndarray | None = None
        super().__init__(num_rows, batch_size, shuffle, "pad", seed)

    def next_rows(self) -> tuple[np.ndarray, int]:
        """Advance one batch: ``(row_ids, pad)``; ``StopIteration`` at the end of the epoch."""
        n, bs = self.num_rows, self.batch_size
        if self.cursor >= n or self._overflow:
            raise StopIteration
        end = self.cursor + bs
        if end <= n:
            rows, pad = self.idx[self.cursor:end], 0
        elif self.round_batch:
            pad = end - n
            if pad > n:
                raise ValueError(f"batch_size {bs} needs more rows than the data has ({n}) to "
                                 "fill the last batch with round_batch")
            # MXNet fills from the start of the *next* pass over the data, in its order
            rows = np.concatenate([self.idx[self.cursor:], self.epoch_order(self.epoch + 1)[:pad]])
            self._overflow = pad
        else:
            pad = end - n
            filler = (self._previous[bs - pad:] if self._previous is not None
                      else np.resize(self.idx, pad))
            rows = np.concatenate([self.idx[self.cursor:], filler])
        self.cursor = min(end, n)
        self._previous = rows
        return rows, pad

    def reset(self) -> None:
        """Start the next epoch, after the rows that filled the last batch."""
        self._start(self.epoch + 1, self._overflow)

    def hard_reset(self) -> None:
        """Start the next epoch at its first row."""
        self._start(self.epoch + 1, 0)

    def _start(self, epoch: int, start: int) -> None:
        self._start_epoch(epoch, self.carry[:0])
        self.start = self.cursor = start
        self._overflow = 0
        self._previous = None

    def batches_per_epoch(self) -> int:
        """Batches in an epoch that starts at its first row."""
        return -(-self.num_rows // self.batch_size)

    def get_state(self) -> dict:
        """Position as plain data."""
        return {"epoch": self.epoch, "cursor": self.cursor, "seed": self.seed,
                "start": self.start, "overflow": self._overflow}

    def set_state(self, state: dict) -> None:
        """Resume at a position returned by :meth:`get_state`."""
        self.seed = state["seed"]
        self._start(int(state["epoch"]), int(state["start"]))
        self.cursor = int(state["cursor"])
        self._overflow = int(state["overflow"])


def check_shape(shape: Any, name: str) -> tuple[int, ...]:
    """``shape`` as a tuple of positive ints, or a ValueError naming ``name``."""
    try:
        shape = tuple(int(d) for d in ((shape,) if np.isscalar(shape) else shape))
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a tuple of positive ints, got {shape!r}") from None
    if not shape or min(shape) <= 0:
        raise ValueError(f"{name} must be a tuple of positive ints, got {shape!r}")
    return shape


def label_row_shape(label_shape: tuple[int, ...]) -> tuple[int, ...]:
    """One sample's label shape in a batch: MXNet's batches hold a ``(1,)`` label as a
    ``(batch,)`` vector."""
    return () if label_shape == (1,) else label_shape


class NativeIter(RowIter):
    """What MXNet's C++ iterators share: ``data_shape`` / ``label_shape`` / ``dtype``
    descriptors, ``part_index`` / ``num_parts`` checks and the :class:`WrapAroundSampler`."""

    data_shape: tuple[int, ...]
    label_shape: tuple[int, ...]
    dtype: Any = np.float32
    label_dtype: Any = None  # None: dtype
    _data_name, _label_name = "data", "softmax_label"

    @staticmethod
    def _check_part(part_index: int, num_parts: int) -> None:
        if int(num_parts) < 1 or not 0 <= int(part_index) < int(num_parts):
            raise ValueError(f"part_index must lie in [0, num_parts={num_parts}); got "
                             f"{part_index}")

    def _init_wrap_around(self, batch_size: int, shuffle: bool, round_batch: bool,
                          seed: int | None) -> None:
        """The C++ iterators' batch order (:class:`WrapAroundSampler`)."""
        self._init_sampler(batch_size, shuffle, "pad", seed)
        self.sampler = WrapAroundSampler(self.num_rows, batch_size, shuffle, round_batch,
                                         self.sampler.seed)
        self.round_batch = self.sampler.round_batch

    @property
    def data_descs(self) -> list[DataDesc]:
        """One sample's data descriptor."""
        return [DataDesc(self._data_name, self.data_shape, self.dtype)]

    @property
    def label_descs(self) -> list[DataDesc]:
        """One sample's label descriptor."""
        return [DataDesc(self._label_name, label_row_shape(self.label_shape),
                         self.label_dtype or self.dtype)]

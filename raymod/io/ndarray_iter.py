"""``NDArrayIter``: batches from in-memory arrays, as MXNet's ``mx.io.NDArrayIter``."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Mapping, Sequence

import numpy as np

from .base import DataDesc, check_rows, take_rows
from .sampler import RowIter


def _as_array(value: Any, name: str) -> Any:
    """numpy and cupy arrays (and array-likes with a shape, e.g. h5py) pass through, except
    that integer and boolean arrays become float32, as MXNet's iterator converts them."""
    if not (hasattr(value, "shape") and hasattr(value, "__getitem__")
            and hasattr(value, "dtype")):
        try:
            value = np.asarray(value)
        except Exception as err:
            raise TypeError(f"input {name!r} must be an array or convertible to one, "
                            f"got {type(value).__name__}") from err
    if np.dtype(value.dtype).kind in "biu" and hasattr(value, "astype"):
        value = value.astype(np.float32)
    return value


def _named_arrays(data: Any, allow_empty: bool, default_name: str) -> list[tuple[str, Any]]:
    """MXNet's input normalisation: one array, a list or a dict -> sorted (name, array) pairs.

    A single array is named ``default_name``; the items of a list of several are named
    ``_0_<default_name>``, ``_1_<default_name>``, ...; the pairs are sorted by name (so dict
    inputs come out in key order).
    """
    if data is None:
        data = []
    if hasattr(data, "shape") and not isinstance(data, Mapping):
        data = [data]
    if isinstance(data, (list, tuple)):
        if len(data) == 1:
            data = OrderedDict([(default_name, data[0])])
        else:
            data = OrderedDict((f"_{i}_{default_name}", d) for i, d in enumerate(data))
    if not isinstance(data, Mapping):
        raise TypeError("input must be an array, a list of arrays or a dict of arrays, "
                        f"got {type(data).__name__}")
    if not data and not allow_empty:
        raise ValueError("the dataset is empty: NDArrayIter needs at least one data array")
    pairs = [(str(k), _as_array(v, str(k))) for k, v in data.items()]
    for name, arr in pairs:
        if len(arr.shape) == 0:
            raise ValueError(f"input {name!r} is a scalar; it needs a leading row axis")
    return sorted(pairs, key=lambda kv: kv[0])


class NDArrayIter(RowIter):
    """Iterate over arrays held in memory, one batch of rows at a time.

    Parameters
    ----------
    data : array, list of arrays or dict of str to array
        The data inputs; all share their first (row) axis. One array is named
        ``data_name``; a list of several is named ``_0_<data_name>``, ``_1_<data_name>``...;
        a dict gives its own names. Inputs are ordered by name, as in MXNet.
    label : array, list of arrays or dict, optional
        The label inputs, named like ``data`` from ``label_name``. None or an empty list
        means no labels (each batch's ``label`` is then an empty list).
    batch_size : int, default 1
        Rows per batch.
    shuffle : bool, default False
        Visit the rows in a new random order every epoch (data and label rows stay paired).
    last_batch_handle : {'pad', 'discard', 'roll_over'}, default 'pad'
        How to treat the rows that do not fill a last batch: ``'pad'`` completes the batch
        with rows from the start of the epoch's order and reports how many in ``pad``;
        ``'discard'`` drops them; ``'roll_over'`` serves them first in the next epoch.
    data_name : str, default 'data'
        Name of a single data input.
    label_name : str, default 'softmax_label'
        Name of a single label input.
    seed : int, optional
        Shuffle seed (raymod addition). When None, it is drawn from
        :func:`raymod.random.generator`, so ``rm.random.seed`` makes the shuffle repeat.

    Attributes
    ----------
    idx : numpy.ndarray
        The current epoch's order of original row ids: batch rows ``k*batch_size ...`` are
        ``data[idx[k*batch_size ...]]`` (up to padding and roll-over).

    Notes
    -----
    Float arrays are kept as given (no copy, dtype kept); integer and boolean arrays are
    converted to float32 once, as MXNet's ``NDArrayIter`` converts numpy input (which it
    makes float32 whatever its dtype). Batches of consecutive rows (no
    shuffle) are views of the input arrays; shuffled batches are gathered copies.
    Beyond MXNet, the iterator is a :class:`~raymod.io.base.RowSource`: ``num_rows``,
    ``take(rows)``, ``epoch_order(epoch)`` and ``next_rows()`` let a driver send row ids
    instead of rows. With ``'roll_over'``, the first batch of an epoch reports the number of
    rolled-over rows as its ``pad``, as MXNet does.

    Examples
    --------
    >>> it = NDArrayIter(np.zeros((10, 3)), np.arange(10), batch_size=4)
    >>> [b.pad for b in it]
    [0, 0, 2]
    """

    def __init__(self, data: Any, label: Any = None, batch_size: int = 1, shuffle: bool = False,
                 last_batch_handle: str = "pad", data_name: str = "data",
                 label_name: str = "softmax_label", seed: int | None = None):
        self.data = _named_arrays(data, allow_empty=False, default_name=data_name)
        self.label = _named_arrays(label, allow_empty=True, default_name=label_name)
        lengths = {name: arr.shape[0] for name, arr in self.data + self.label}
        first_name, first_len = next(iter(lengths.items()))
        for name, length in lengths.items():
            if length != first_len:
                raise ValueError(f"inputs differ in length: {first_name!r} has {first_len} rows "
                                 f"but {name!r} has {length}")
        self.num_data = int(first_len)
        self._init_sampler(batch_size, shuffle, last_batch_handle, seed)

    @property
    def num_rows(self) -> int:
        """Rows in the data."""
        return self.num_data

    @property
    def data_descs(self) -> list[DataDesc]:
        """Per-row descriptors of the data inputs."""
        return [DataDesc(k, tuple(v.shape[1:]), v.dtype) for k, v in self.data]

    @property
    def label_descs(self) -> list[DataDesc]:
        """Per-row descriptors of the label inputs."""
        return [DataDesc(k, tuple(v.shape[1:]), v.dtype) for k, v in self.label]

    def take(self, rows: Sequence[int] | np.ndarray) -> tuple[list, list]:
        """Data and label arrays for ``rows`` (original row ids, independent of shuffle)."""
        rows = check_rows(rows, self.num_data)
        return ([take_rows(v, rows) for _, v in self.data],
                [take_rows(v, rows) for _, v in self.label])

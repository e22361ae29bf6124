"""The data-iterator vocabulary shared by every iterator: descriptors, batches, the base class.

:class:`DataDesc`, :class:`DataBatch` and :class:`DataIter` keep MXNet 1.x's names, fields and
defaults. :class:`RowSource` is raymod's addition: data that any process can read by row
index, so that a driver can send workers row ranges instead of the rows themselves; its
:meth:`RowSource.reader` is what a worker is given to read them (a :class:`RowReader`).
"""
from __future__ import annotations

import importlib
from collections import namedtuple
from typing import Any, Callable, Sequence

import numpy as np

from ..sparse import CSRArray


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """Name, shape, type and layout of one input of a batch.

    A ``DataDesc`` is a ``(name, shape)`` tuple, so ``dict(it.provide_data)`` and
    ``for name, shape in it.provide_data`` keep working; ``dtype`` and ``layout`` ride along
    as attributes.

    Parameters
    ----------
    name : str
        The input's name, matching a variable of the symbol (``'data'``, ``'softmax_label'``).
    shape : tuple of int
        The shape of one batch of this input, batch axis included.
    dtype : numpy dtype, default numpy.float32
        Element type.
    layout : str, default 'NCHW'
        One letter per axis; ``'N'`` marks the batch axis (see :meth:`get_batch_axis`).
    """

    def __new__(cls, name: str, shape: Sequence[int], dtype: Any = np.float32,
                layout: str = "NCHW") -> "DataDesc":
        desc = super().__new__(cls, name, tuple(shape))
        desc.dtype = dtype
        desc.layout = layout
        return desc

    def __repr__(self) -> str:
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    def __reduce__(self):
        return (DataDesc, (self.name, self.shape, self.dtype, self.layout))

    @staticmethod
    def get_batch_axis(layout: str | None) -> int:
        """The batch axis of ``layout``: the position of ``'N'``, 0 when layout is None.

        Returns -1 when the layout has no ``'N'`` (nothing can be split along a batch axis).
        """
        if layout is None:
            return 0
        return layout.find("N")

    @staticmethod
    def get_list(shapes: Sequence[tuple], types: Sequence[tuple] | None) -> list["DataDesc"]:
        """Build descriptors from ``[(name, shape), ...]`` and optional ``[(name, dtype), ...]``.

        Parameters
        ----------
        shapes : list of (str, tuple)
            Names and shapes.
        types : list of (str, dtype) or None
            Names and element types; every name in ``shapes`` must appear. None gives float32.
        """
        if types is None:
            return [DataDesc(name, shape) for name, shape in shapes]
        type_of = dict(types)
        return [DataDesc(name, shape, type_of[name]) for name, shape in shapes]


class DataBatch:
    """One batch: lists of input and label arrays, plus how many rows are padding.

    Parameters
    ----------
    data : list of array
        One array per data input, batch axis first (or where the layout puts it).
    label : list of array, optional
        One array per label input; an empty list or None when there are none.
    pad : int, optional
        How many trailing rows are filler, not new samples (``'pad'`` last batches).
    index : array of int, optional
        The row ids of the samples in the batch, when the iterator knows them.
    bucket_key : hashable, optional
        The bucket this batch belongs to (BucketingModule).
    provide_data, provide_label : list of DataDesc, optional
        Descriptors of this batch's inputs, when they differ from the iterator's.
    """

    def __init__(self, data: list | None, label: list | None = None, pad: int | None = None,
                 index: Any = None, bucket_key: Any = None,
                 provide_data: list[DataDesc] | None = None,
                 provide_label: list[DataDesc] | None = None):
        if data is not None and not isinstance(data, (list, tuple)):
            raise TypeError(f"DataBatch data must be a list of arrays, got {type(data).__name__}")
        if label is not None and not isinstance(label, (list, tuple)):
            raise TypeError(f"DataBatch label must be a list of arrays, got {type(label).__name__}")
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label
        #: the RowSource ``index`` refers to, when set by its iterator (Ray workers then
        #: read the rows themselves instead of receiving them); forgotten when ``data`` or
        #: ``label`` is replaced (a chained module's batch holds the previous one's outputs)
        self.source = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name in ("data", "label") and self.__dict__.get("source") is not None:
            self.__dict__["source"] = None  # the rows no longer say what the batch holds
        object.__setattr__(self, name, value)

    def __str__(self) -> str:
        data_shapes = [d.shape for d in self.data] if self.data is not None else None
        label_shapes = [lab.shape for lab in self.label] if self.label else None
        return f"{type(self).__name__}: data shapes: {data_shapes} label shapes: {label_shapes}"


class DeferredBatch(DataBatch):
    """A batch whose arrays are read only when first asked for (never, when Ray workers
    read the rows themselves)."""

    def __init__(self, load: Callable[[], tuple[list, list]], **kwargs: Any):
        self._load, self._arrays = load, None
        super().__init__(data=None, label=None, **kwargs)

    def _get(self) -> tuple[list, list]:
        if self._arrays is None:
            self._arrays = self._load()
        return self._arrays

    def wrap_load(self, decorate: Callable[[Callable], Callable]) -> None:
        """Read the arrays, when they are read, with ``decorate(load)`` instead of ``load``
        (to change what it returns or raises)."""
        self._load = decorate(self._load)

    @property
    def data(self) -> list:
        return self._get()[0]

    @data.setter
    def data(self, value: list | None) -> None:
        if value is not None:
            self._arrays = (value, self._get()[1])

    @property
    def label(self) -> list:
        return self._get()[1]

    @label.setter
    def label(self, value: list | None) -> None:
        if value is not None:
            self._arrays = (self._get()[0], value)


class DeferredRows:
    """For a :class:`~raymod.io.sampler.RowIter` whose rows cost to read (Ray Data blocks,
    images to decode): ``next`` hands out a :class:`DeferredBatch`, read only if asked for,
    so a driver whose Ray workers read the rows themselves never reads them."""

    def next(self) -> DataBatch:
        """The next batch; its arrays are read when first asked for."""
        if not self.iter_next():
            raise StopIteration
        rows = self._rows
        batch = DeferredBatch(lambda: self.take(rows), pad=self._pad, index=rows,
                              provide_data=self.provide_data,
                              provide_label=self.provide_label)
        batch.source = self
        return batch


_DESCRIPTOR_LISTS = ("provide_data", "provide_label")


class _Described:
    """``provide_data`` / ``provide_label`` of an iterator class: computed by the class's
    getter, unless the instance assigned its own list.

    Only a getter (a non-data descriptor), so ``self.provide_data = [...]`` stores the list in
    the instance, where attribute lookup then finds it first.
    """

    def __init__(self, fget: Any):
        self.fget = fget
        self.__doc__ = fget.__doc__

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        return self if obj is None else self.fget(obj)


class DataIter:
    """Base class of data iterators: ``for batch in it`` yields :class:`DataBatch` objects.

    A subclass implements :meth:`iter_next` (advance; False at the end of the epoch), the
    ``get*`` accessors for the current batch, :meth:`reset`, and the ``provide_data`` /
    ``provide_label`` descriptor lists: as properties, or (as MXNet-era iterators do) by
    assigning ``self.provide_data = [...]`` in ``__init__``. An assigned list takes the place
    of the class's property for that instance.

    Parameters
    ----------
    batch_size : int, default 0
        Rows per batch.
    """

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        # a read-only property would refuse the assignment MXNet's DataIter allows; its
        # getter stays the default for instances that assign nothing
        for name in _DESCRIPTOR_LISTS:
            attr = cls.__dict__.get(name)
            if isinstance(attr, property) and attr.fset is None and attr.fget is not None:
                setattr(cls, name, _Described(attr.fget))

    def __init__(self, batch_size: int = 0):
        self.batch_size = batch_size

    def __iter__(self) -> "DataIter":
        return self

    def __next__(self) -> DataBatch:
        return self.next()

    def next(self) -> DataBatch:
        """The next batch; raises ``StopIteration`` at the end of the epoch."""
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                         index=self.getindex())

    def reset(self) -> None:
        """Go back to the start (of the next epoch)."""

    def iter_next(self) -> bool:
        """Move to the next batch; False when the epoch is over."""
        raise NotImplementedError

    def getdata(self) -> list:
        """The data arrays of the current batch."""
        raise NotImplementedError

    def getlabel(self) -> list:
        """The label arrays of the current batch."""
        raise NotImplementedError

    def getindex(self) -> Any:
        """The row ids of the current batch, or None."""
        return None

    def getpad(self) -> int:
        """How many rows of the current batch are padding."""
        raise NotImplementedError

    def _no_provide_data(self) -> list[DataDesc]:
        """Descriptors of the data inputs of one batch."""
        raise NotImplementedError(f"{type(self).__name__} defines no provide_data (a property "
                                  "or a list assigned in __init__)")

    def _no_provide_label(self) -> list[DataDesc]:
        """Descriptors of the label inputs of one batch."""
        raise NotImplementedError(f"{type(self).__name__} defines no provide_label (a "
                                  "property or a list assigned in __init__)")

    provide_data = _Described(_no_provide_data)
    provide_label = _Described(_no_provide_label)


class RowSource:
    """Data that any process can read by row index: the contract behind row-range loading.

    A driver holding a ``RowSource`` can ship the source once (or have every worker open
    it itself) and then send only row ids; a worker calls :meth:`take` to build its slice.
    Row ids always refer to the source's own order (row ``i`` is the ``i``-th row of the
    arrays or table given), never to a shuffled order.

    Implementations provide :attr:`num_rows`, :meth:`take`, and :attr:`data_descs` /
    :attr:`label_descs` giving per-row shapes (no batch axis) and element types.
    """

    @property
    def num_rows(self) -> int:
        """How many rows the source holds."""
        raise NotImplementedError

    def __len__(self) -> int:
        return self.num_rows

    def take(self, rows: np.ndarray) -> tuple[list, list]:
        """Gather rows.

        Parameters
        ----------
        rows : array of int
            Row ids in the source's own order; repeats allowed.

        Returns
        -------
        (list of array, list of array)
            One array per data input and one per label input, each of ``len(rows)`` rows,
            in the order of :attr:`data_descs` and :attr:`label_descs`.
        """
        raise NotImplementedError

    @property
    def data_descs(self) -> list[DataDesc]:
        """Descriptors of the data inputs for a single row (shape excludes the batch axis)."""
        raise NotImplementedError

    @property
    def label_descs(self) -> list[DataDesc]:
        """Descriptors of the label inputs for a single row (shape excludes the batch axis)."""
        raise NotImplementedError

    def reader(self) -> "RowReader":
        """How a Ray worker reads this source's rows: a small picklable :class:`RowReader`.

        Called once per source on the driver, which ships the reader to every worker;
        workers then call its ``take`` with the row ids of their slices. This default
        puts all the rows in the object store once (one read here) and workers gather
        from that copy. A source whose rows already live where workers can reach them
        (files, Ray Data blocks) overrides it so that the driver never reads them.
        """
        import ray
        data, label = self.take(np.arange(self.num_rows))
        return StoredArrays(ray.put((list(data), list(label))))


class RowReader:
    """The worker side of a :class:`RowSource`: gathers rows by id, wherever it runs.

    Made by :meth:`RowSource.reader` on the driver and pickled to the workers, so it
    should carry references (object refs, paths), never the rows themselves; caches it
    builds on a worker stay there (subclasses drop them when pickled).
    """

    def take(self, rows: np.ndarray) -> tuple[list, list]:
        """Data and label arrays of ``rows`` (ids in the source's own order), as
        :meth:`RowSource.take`."""
        raise NotImplementedError


class StoredArrays(RowReader):
    """Rows kept as whole arrays in Ray's object store: ``ref`` to ``(data, label)`` lists.

    The arrays are fetched on first use (zero-copy from shared memory for numpy) and
    kept for the process's later calls.
    """

    def __init__(self, ref: Any):
        self.ref = ref
        self._arrays: tuple[list, list] | None = None

    def __getstate__(self) -> dict:
        return {"ref": self.ref, "_arrays": None}

    def take(self, rows: np.ndarray) -> tuple[list, list]:
        """Gather ``rows`` from the stored arrays (views for a contiguous range)."""
        if self._arrays is None:
            import ray
            self._arrays = ray.get(self.ref)
        data, label = self._arrays
        rows = np.asarray(rows)
        span = contiguous_range(rows)  # once for every array
        if span is not None:
            return [a[span] for a in data], [a[span] for a in label]
        return [take_rows(a, rows) for a in data], [take_rows(a, rows) for a in label]


def check_rows(rows: Any, num_rows: int) -> np.ndarray:
    """Validate row ids against ``num_rows`` and return them as an int64 array."""
    rows = np.asarray(rows)
    if rows.ndim != 1 or (rows.size and not np.issubdtype(rows.dtype, np.integer)):
        raise TypeError(f"rows must be a 1-d array of integers, got dtype {rows.dtype} "
                        f"and shape {rows.shape}")
    rows = rows.astype(np.int64, copy=False)
    if rows.size and (rows.min() < 0 or rows.max() >= num_rows):
        raise IndexError(f"row ids must lie in [0, {num_rows}); got min {rows.min()}, "
                         f"max {rows.max()}")
    return rows


def contiguous_range(rows: np.ndarray) -> slice | None:
    """``slice(a, b)`` when ``rows`` is exactly ``a, a+1, ..., b-1`` (non-empty), else None."""
    if rows.size == 0:
        return None
    start = int(rows[0])
    if int(rows[-1]) - start + 1 != rows.size:
        return None
    if rows.size > 1 and not (rows[1:] - rows[:-1] == 1).all():  # (np.diff costs 3x)
        return None
    return slice(start, start + rows.size)


def take_rows(arr: Any, rows: np.ndarray) -> Any:
    """Rows ``rows`` of ``arr`` (numpy, cupy, csr or h5py-like): a view for a contiguous
    range."""
    span = contiguous_range(rows)
    if span is not None:
        return arr[span]
    if isinstance(arr, CSRArray):
        return arr.take_rows(rows)
    if isinstance(arr, np.ndarray):
        return arr[rows]
    if type(arr).__module__.split(".")[0] == "cupy":
        return arr[importlib.import_module("cupy").asarray(rows)]
    # h5py-like stores accept only sorted, unique indices
    uniq, inverse = np.unique(rows, return_inverse=True)
    return np.asarray(arr[uniq])[inverse]

"""``mx.io``: raymod's data iterators, handing out batches whose arrays are NDArrays."""
from __future__ import annotations

from typing import Any

from ... import io as _io
from ..errors import not_supported
from ...io import DataBatch, DataDesc, DataIter
from ..ndarray import wrap

__all__ = ["DataBatch", "DataDesc", "DataIter", "NDArrayIter", "MNISTIter", "ResizeIter",
           "PrefetchingIter"]


class _NDArrayBatches:
    """Views the arrays of each batch as NDArrays (same memory)."""

    def next(self) -> DataBatch:
        batch = super().next()
        batch.data, batch.label = wrap(batch.data), wrap(batch.label)
        return batch

    def getdata(self) -> list:
        return wrap(super().getdata())

    def getlabel(self) -> list:
        return wrap(super().getlabel())


def _compat(cls: type) -> type:
    """``cls`` (a raymod iterator) with NDArray batches, under its own name."""
    return type(cls.__name__, (_NDArrayBatches, cls),
                {"__doc__": cls.__doc__, "__module__": __name__})


NDArrayIter = _compat(_io.NDArrayIter)
MNISTIter = _compat(_io.MNISTIter)
ResizeIter = _compat(_io.ResizeIter)
PrefetchingIter = _compat(_io.PrefetchingIter)


# MXNet's C++ iterators, which raymod does not have
_NATIVE = {"ImageRecordIter", "ImageRecordIter_v1", "ImageRecordUInt8Iter",
           "ImageRecordInt8Iter", "ImageDetRecordIter", "CSVIter", "LibSVMIter", "MXDataIter"}


def __getattr__(name: str) -> Any:
    if name in _NATIVE:
        raise not_supported(f"mx.io.{name}", "MXNet's C++ data iterators (use NDArrayIter, "
                                              "MNISTIter or rm.io.ArrowIter)")
    raise AttributeError(f"module 'mxnet.io' (raymod's compatibility layer) has no attribute "
                         f"{name!r}")

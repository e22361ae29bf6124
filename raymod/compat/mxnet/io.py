"""``mx.io``: raymod's data iterators, handing out batches whose arrays are NDArrays."""
from __future__ import annotations

from typing import Any

import functools

import numpy as np

from ... import io as _io
from ...base import MXNetError
from ..errors import not_supported
from ...io import DataBatch, DataDesc, DataIter
from ...io.base import DeferredBatch
from ...sparse._common import SparseBase
from ..ndarray import NDArray, wrap

__all__ = ["DataBatch", "DataDesc", "DataIter", "NDArrayIter", "MNISTIter", "ResizeIter",
           "PrefetchingIter", "ImageRecordIter", "CSVIter", "LibSVMIter"]


class _NDArrayBatches:
    """Views the arrays of each batch as NDArrays (same memory)."""

    def next(self) -> DataBatch:
        batch = super().next()
        if isinstance(batch, DeferredBatch):  # keep it unread: Ray workers may read it
            batch.wrap_load(lambda load: lambda: tuple(wrap(arrays) for arrays in load()))
        else:
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


def _native(cls: type) -> type:
    """``cls`` (one of raymod's versions of MXNet's C++ iterators) with NDArray batches, and
    bad input or files raising ``MXNetError`` (chained to raymod's error), as MXNet's C++
    iterators do."""
    def converting(method):
        @functools.wraps(method)
        def call(*args, **kwargs):
            try:
                out = method(*args, **kwargs)
            except (ValueError, KeyError, OSError) as err:
                raise MXNetError(f"{cls.__name__}: {err}") from err
            if isinstance(out, DeferredBatch):  # its images are decoded later
                out.wrap_load(converting)
            return out
        return call

    compat = _compat(cls)
    for name in ("__init__", "next", "iter_next", "getdata", "getlabel"):
        setattr(compat, name, converting(getattr(compat, name)))
    # MXNet's C++ iterators hand out one array from getdata/getlabel, not a list
    getdata, getlabel = compat.getdata, compat.getlabel
    compat.getdata = functools.wraps(getdata)(lambda self: getdata(self)[0])
    compat.getlabel = functools.wraps(getlabel)(lambda self: getlabel(self)[0])
    return compat


class _DenseCSR(NDArray):
    """A dense LibSVMIter batch (where MXNet hands out a CSRNDArray); its ``check_format``
    has nothing to check."""

    def check_format(self, full_check: bool = True) -> None:
        """A dense array is always well formed."""


def _libsvm_array(array: Any) -> Any:
    """A LibSVMIter batch array as MXNet's: a csr batch as CSRNDArray (same arrays), a
    dense one as an NDArray that has ``check_format``."""
    if isinstance(array, SparseBase):
        return wrap(array)
    return array.view(_DenseCSR)


class _LibSVMBatches:
    def next(self) -> DataBatch:
        batch = super().next()
        batch.data = [_libsvm_array(d) for d in batch.data]
        return batch

    def getdata(self) -> list:
        return [_libsvm_array(d) for d in super().getdata()]


ImageRecordIter = _native(_io.ImageRecordIter)
CSVIter = _native(_io.CSVIter)
LibSVMIter = _native(type("LibSVMIter", (_LibSVMBatches, _io.LibSVMIter),
                          {"__doc__": _io.LibSVMIter.__doc__, "__module__": __name__}))
class _MXNetInputs:
    """MXNet's NDArrayIter makes every input that is not an NDArray with ``mx.nd.array``:
    a numpy float64 or integer array becomes float32 (wide_deep relies on it)."""

    def __init__(self, data: Any, label: Any = None, *args: Any, **kwargs: Any):
        super().__init__(_as_mxnet_input(data), _as_mxnet_input(label), *args, **kwargs)


def _as_mxnet_input(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _as_mxnet_input(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_as_mxnet_input(v) for v in value)
    if isinstance(value, np.ndarray) and not isinstance(value, NDArray) \
            and value.dtype != np.float32:
        return value.astype(np.float32)
    return value


NDArrayIter = _compat(type("NDArrayIter", (_MXNetInputs, _io.NDArrayIter),
                           {"__doc__": _io.NDArrayIter.__doc__, "__module__": __name__}))
MNISTIter = _compat(_io.MNISTIter)
ResizeIter = _compat(_io.ResizeIter)
PrefetchingIter = _compat(_io.PrefetchingIter)


# MXNet's C++ iterators, which raymod does not have
_NATIVE = {"ImageRecordIter_v1", "ImageRecordUInt8Iter", "ImageRecordInt8Iter",
           "ImageDetRecordIter", "MXDataIter"}


def __getattr__(name: str) -> Any:
    if name in _NATIVE:
        raise not_supported(f"mx.io.{name}", "this one of MXNet's C++ data iterators (use "
                                              "ImageRecordIter, NDArrayIter or rm.io.ArrowIter)")
    raise AttributeError(f"module 'mxnet.io' (raymod's compatibility layer) has no attribute "
                         f"{name!r}")

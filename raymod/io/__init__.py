"""Data iterators, as MXNet 1.x's ``mx.io``: ``rm.io.NDArrayIter(...)`` and friends.

Besides MXNet's names, :class:`ArrowIter` reads Arrow tables, Parquet/CSV files and datasets,
:class:`RayDatasetIter` a ``ray.data.Dataset``, and every row-based iterator is a :class:`RowSource` whose rows a worker can read by id.
"""
from .arrow_iter import ArrowIter
from .csv_iter import CSVIter
from .image_record_iter import ImageRecordIter
from .libsvm_iter import LibSVMIter
from .base import DataBatch, DataDesc, DataIter, RowReader, RowSource
from .mnist_iter import MNISTIter
from .ndarray_iter import NDArrayIter
from .ray_dataset_iter import RayDatasetIter
from .sampler import RowIter, RowSampler
from .wrappers import PrefetchingIter, ResizeIter

__all__ = ["DataDesc", "DataBatch", "DataIter", "NDArrayIter", "MNISTIter", "ResizeIter",
           "PrefetchingIter", "ArrowIter", "RayDatasetIter", "RowSource", "RowReader",
           "RowSampler", "RowIter", "CSVIter", "LibSVMIter",
           "ImageRecordIter"]

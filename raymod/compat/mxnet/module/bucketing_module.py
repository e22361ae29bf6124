"""``mxnet.module.bucketing_module``: ``BucketingModule`` (returning NDArrays)."""
from . import BucketingModule

__all__ = ["BucketingModule"]

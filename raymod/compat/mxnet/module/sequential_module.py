"""``mxnet.module.sequential_module``: ``SequentialModule`` (returning NDArrays)."""
from . import SequentialModule

__all__ = ["SequentialModule"]

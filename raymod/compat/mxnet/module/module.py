"""``mxnet.module.module``: ``Module``, the module of one symbol (returning NDArrays)."""
from . import Module

__all__ = ["Module"]

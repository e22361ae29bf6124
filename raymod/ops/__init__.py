"""Operators: one class per MXNet op, grouped by kind in subpackages (``nn``, ``tensor``, ...).

Importing this package imports every op module of every group, which registers the op under
its MXNet name(s) in :data:`OPS`; a new group needs no list to be kept here.
"""
import importlib
import pkgutil

from .base import OPS, ElementwiseOp, Op, Param, get_op

for _group in pkgutil.iter_modules(__path__):
    if not _group.ispkg:
        continue
    _package = importlib.import_module(f"{__name__}.{_group.name}")
    for _info in pkgutil.iter_modules(_package.__path__):
        importlib.import_module(f"{_package.__name__}.{_info.name}")

__all__ = ["OPS", "Op", "Param", "ElementwiseOp", "get_op"]

"""Operators: one class per MXNet op, grouped by kind (``nn``, ``tensor``, ``loss``).

Importing this package imports every op module, which registers the op under its MXNet
name(s) in :data:`OPS`.
"""
import importlib
import pkgutil

from .base import OPS, ElementwiseOp, Op, Param, get_op

for _group in ("nn", "tensor", "loss"):
    _package = importlib.import_module(f"{__name__}.{_group}")
    for _info in pkgutil.iter_modules(_package.__path__):
        importlib.import_module(f"{_package.__name__}.{_info.name}")

__all__ = ["OPS", "Op", "Param", "ElementwiseOp", "get_op"]

"""ONNX export, as MXNet 1.9's ``mx.onnx``: ``rm.onnx.export_model(sym, params, in_shapes)``.

Needs the ``onnx`` package (``pip install 'raymod[onnx]'``); it is imported when this package
is, which ``import raymod`` does not do. One converter module per op family lives in
``convert/``; ``get_operator_support()`` lists the operators they cover.
"""
from . import convert  # noqa: F401  (registers the converters)
from .export import export_model, get_operator_support
from .graph import OPSET, UnsupportedOperatorError

__all__ = ["export_model", "get_operator_support", "OPSET", "UnsupportedOperatorError"]

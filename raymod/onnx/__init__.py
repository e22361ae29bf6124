"""ONNX export, as MXNet 1.9's ``mx.onnx``: ``rm.onnx.export_model(sym, params, in_shapes)``.

Needs the ``onnx`` package (``pip install 'raymod[onnx]'``); it is imported when this package
is, which ``import raymod`` does not do. One converter module per op family lives in
``convert/``; ``get_operator_support()`` lists the operators they cover.
"""
try:
    import onnx as _onnx  # noqa: F401
except ImportError as _err:
    raise ImportError("rm.onnx needs the onnx package: pip install 'raymod[onnx]'") from _err

from . import convert  # noqa: F401,E402  (registers the converters)
from .export import data_inputs, export_model, get_operator_support
from .graph import OPSET, DynamicBatchError, UnsupportedOperatorError

__all__ = ["export_model", "get_operator_support", "data_inputs", "OPSET",
           "UnsupportedOperatorError", "DynamicBatchError"]

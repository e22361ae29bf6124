"""ONNX converters, one module per op family; importing this package registers them all."""
from . import arith, heads, nn, tensor, vision  # noqa: F401

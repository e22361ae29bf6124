"""ONNX converters, one module per op family; importing this package registers them all."""
from . import arith, creation, heads, indexing, nn, rnn, tensor, vision  # noqa: F401

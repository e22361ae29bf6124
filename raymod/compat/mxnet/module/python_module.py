"""``mxnet.module.python_module``: ``PythonModule`` and ``PythonLossModule`` (returning
NDArrays)."""
from . import PythonLossModule, PythonModule

__all__ = ["PythonModule", "PythonLossModule"]

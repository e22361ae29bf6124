"""``mx.contrib.svrg_optimization.svrg_module``: raymod's SVRGModule, returning NDArrays."""
from ...module import SVRGModule

__all__ = ["SVRGModule"]

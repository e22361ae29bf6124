"""``mx.contrib.svrg_optimization``: raymod's SVRGModule and SVRG optimizers."""
from . import svrg_module
from .svrg_module import SVRGModule

__all__ = ["svrg_module", "SVRGModule"]

"""``mx.contrib``: only ``svrg_optimization`` (SVRGModule) is provided."""
from . import svrg_optimization

__all__ = ["svrg_optimization"]

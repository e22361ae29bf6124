"""raymod: MXNet 1.x's Module API, elastic on Ray, on numpy (CPU) and CuPy (GPU).

Use it as ``import raymod as rm`` and the MXNet names: ``rm.sym``, ``rm.io``, ``rm.init``,
``rm.optimizer``, ``rm.lr_scheduler``, ``rm.metric``, ``rm.callback``, ``rm.rnn``,
``rm.cpu()``, ``rm.gpu(i)``.
"""
from . import base, random
from .base import MXNetError
from .context import Context, cpu, current_context, gpu
from . import symbol
from . import symbol as sym
from .symbol import AttrScope
from . import symbol as name  # rm.name.Prefix / rm.name.NameManager, as mx.name
from . import initializer
from . import initializer as init
from . import callback, io, lr_scheduler, metric, mon, optimizer
from . import kvstore
from . import kvstore as kv
from . import rnn
from . import operator
from . import checkpoint, model, module
from . import recordio, image
from . import module as mod
from . import ndarray_io as nd
from .executor import Executor
from . import executor_manager
from . import cluster
from .cluster import Workers
from .module.fit_checkpoint import CheckpointConfig

__version__ = "0.1.0"

# Optional parts whose dependencies (onnx, ray[tune]) load only when first used.
_LAZY = ("onnx", "tune")


def __getattr__(attr: str):
    if attr in _LAZY:
        import importlib

        return importlib.import_module(f".{attr}", __name__)
    raise AttributeError(f"module 'raymod' has no attribute {attr!r}")

"""MXNet 1.x's names over raymod: ``import raymod.compat.mxnet as mx``.

Everything that trains is raymod's own object under MXNet's name (``mx.sym`` is ``rm.sym``,
``mx.metric`` is ``rm.metric``, ...). The few modules of this package add only MXNet's NDArray
surface (``.asnumpy()`` and friends, see :mod:`raymod.compat.ndarray`): ``mx.nd`` creates
arrays (``mx.nd.sparse`` sparse ones, see :mod:`raymod.compat.sparse`), ``mx.io`` and
``mx.mod`` hand out their batches and results as NDArray views, and ``mx.test_utils`` /
``mx.base`` hold the helpers scripts and tests use. ``mx.sym`` gains MXNet's ``sparse``,
``_internal`` and ``op`` op modules (:mod:`raymod.compat.mxnet.symbol_sparse`). Gluon and
autograd raise :class:`~raymod.compat.errors.NotSupportedError` naming the call.

``raymod run SCRIPT`` (or ``python -m raymod.compat SCRIPT``) makes ``import mxnet`` mean
this package for one process; see :mod:`raymod.compat.runner`.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any

from ...base import MXNetError
from ...context import Context, cpu, current_context, gpu
from ...symbol import AttrScope
from ..errors import NotSupportedError, Unsupported, not_supported
from . import base, ndarray, test_utils
from . import io, module
from . import ndarray as nd
from . import module as mod

__version__ = "1.9.1"

# MXNet name -> the raymod module it means, imported on first use (``mx.sym``, ``import
# mxnet.metric``). Both spellings MXNet has are listed.
SUBMODULES = {
    "sym": "raymod.symbol", "symbol": "raymod.symbol", "name": "raymod.symbol",
    "attribute": "raymod.symbol",
    "metric": "raymod.metric", "optimizer": "raymod.optimizer",
    "init": "raymod.initializer", "initializer": "raymod.initializer",
    "lr_scheduler": "raymod.lr_scheduler", "callback": "raymod.callback", "rnn": "raymod.rnn",
    "kv": "raymod.kvstore", "kvstore": "raymod.kvstore", "model": "raymod.model",
    "executor": "raymod.executor", "mon": "raymod.mon", "monitor": "raymod.mon",
    "random": "raymod.compat.mxnet.random", "context": "raymod.context",
    "operator": "raymod.operator",
    "executor_manager": "raymod.executor_manager",
    "contrib": "raymod.compat.mxnet.contrib",
    "recordio": "raymod.recordio", "image": "raymod.compat.mxnet.image",
}

# whole MXNet features raymod leaves out: ``mx.gluon`` is a stand-in module whose names
# raise NotSupportedError when used (so scripts that only import them still run)
UNSUPPORTED = {
    "gluon": "Gluon (mx.gluon)", "autograd": "autograd (mx.autograd)",
    "np": "the NumPy-compatible interface (mx.np)", "npx": "the NumPy-compatible interface "
    "(mx.npx)", "profiler": "the profiler (mx.profiler)",
}


# the parts of a left-out feature that are provided: MXNet name -> {attribute: module}
PROVIDED = {"mxnet.gluon": {"utils": "raymod.compat.mxnet.gluon_utils"}}


def stand_in(name: str, feature: str) -> Unsupported:
    """The stand-in module for the left-out feature ``name``, with its provided parts
    (``mx.gluon.utils``' array helpers under ``mx.gluon``)."""
    provided = {attr: importlib.import_module(module)
                for attr, module in PROVIDED.get(name, {}).items()}
    return Unsupported(name, feature, provided)


def __getattr__(name: str) -> Any:
    if name in SUBMODULES:
        try:
            target = importlib.import_module(SUBMODULES[name])
        except ModuleNotFoundError as err:
            raise not_supported(f"mx.{name}", f"{SUBMODULES[name]} (this raymod lacks it)") \
                from err
        if SUBMODULES[name] == "raymod.symbol":  # mx.sym.sparse, mx.sym._internal, mx.sym.op
            from .symbol_sparse import attach

            attach(target)
        globals()[name] = target
        return target
    if name in UNSUPPORTED:
        # the runner's stand-in when installed, so `mx.gluon` is what `import mxnet.gluon` gave
        installed = sys.modules.get(f"mxnet.{name}")
        globals()[name] = (installed if isinstance(installed, Unsupported)
                           else stand_in(f"mxnet.{name}", UNSUPPORTED[name]))
        return globals()[name]
    raise AttributeError(f"module 'mxnet' (raymod's compatibility layer) has no attribute "
                         f"{name!r}; see docs/compat.md for what is provided")


__all__ = ["Context", "cpu", "gpu", "current_context", "AttrScope", "MXNetError",
           "NotSupportedError", "nd", "ndarray", "io", "mod", "module", "base", "test_utils",
           "__version__", *SUBMODULES]

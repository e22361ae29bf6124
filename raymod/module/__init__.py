"""Modules, as MXNet 1.x's ``mx.mod``: ``rm.mod.Module(symbol, ...)``.

A module binds a symbol to devices and trains it: ``bind``, ``init_params``,
``init_optimizer``, then ``forward``/``backward``/``update``, or all of it through ``fit``.
"""
from .base_module import BaseModule
from .bucketing_module import BucketingModule
from .fit_result import FitResult
from .lifecycle import Stage, StageError
from .module import Module
from .placement import default_workers
from .python_module import PythonLossModule, PythonModule
from .sequential_module import SequentialModule
from .svrg_module import SVRGModule

__all__ = ["BaseModule", "BucketingModule", "FitResult", "Module", "PythonLossModule", "PythonModule",
           "SequentialModule", "Stage", "StageError", "SVRGModule", "default_workers"]

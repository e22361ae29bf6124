"""Run unmodified MXNet 1.x code on raymod.

``import raymod.compat.mxnet as mx`` gives MXNet's names over raymod; ``raymod run SCRIPT
[ARGS]`` or ``python -m raymod.compat SCRIPT [ARGS]`` runs a script whose ``import mxnet``
then means that package (for that process only). See docs/compat.md.
"""
from .errors import NotSupportedError
from .ndarray import NDArray
from .runner import install, installed, main, run, uninstall

__all__ = ["NotSupportedError", "NDArray", "install", "installed", "uninstall", "run", "main"]

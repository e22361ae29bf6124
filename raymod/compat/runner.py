"""Run a script written for MXNet 1.x with ``import mxnet`` meaning raymod's compatibility layer.

:func:`install` puts ``mxnet`` and its submodule names into ``sys.modules`` (this process
only), pointing at :mod:`raymod.compat.mxnet` or at the raymod module each name means, and adds
a finder that answers any other ``mxnet.*`` import with an error naming it. :func:`run`
installs, then runs a script as ``__main__`` with its own ``sys.argv`` and its folder first on
``sys.path``, as ``python SCRIPT ARGS`` would.
"""
from __future__ import annotations

import importlib
import importlib.abc
import os
import runpy
import sys
from typing import Sequence

from .errors import Unsupported, not_supported

__all__ = ["install", "uninstall", "installed", "run", "main"]

# ``import mxnet.X`` -> the module it means. Names whose raymod module is missing (a feature
# another part of raymod has not added yet) are skipped.
MODULES = {
    "mxnet": "raymod.compat.mxnet",
    "mxnet.ndarray": "raymod.compat.mxnet.ndarray", "mxnet.nd": "raymod.compat.mxnet.ndarray",
    "mxnet.io": "raymod.compat.mxnet.io", "mxnet.module": "raymod.compat.mxnet.module",
    "mxnet.mod": "raymod.compat.mxnet.module",
    "mxnet.module.executor_group": "raymod.parallel.executor_group",
    "mxnet.test_utils": "raymod.compat.mxnet.test_utils",
    "mxnet.base": "raymod.compat.mxnet.base",
    "mxnet.contrib": "raymod.compat.mxnet.contrib",
    "mxnet.contrib.svrg_optimization": "raymod.compat.mxnet.contrib.svrg_optimization",
    "mxnet.contrib.svrg_optimization.svrg_module":
        "raymod.compat.mxnet.contrib.svrg_optimization.svrg_module",
    "mxnet.contrib.svrg_optimization.svrg_optimizer": "raymod.optimizer.svrg",
    "mxnet.symbol": "raymod.symbol", "mxnet.sym": "raymod.symbol",
    "mxnet.name": "raymod.symbol", "mxnet.attribute": "raymod.symbol",
    "mxnet.metric": "raymod.metric", "mxnet.optimizer": "raymod.optimizer",
    "mxnet.initializer": "raymod.initializer", "mxnet.init": "raymod.initializer",
    "mxnet.rnn": "raymod.rnn", "mxnet.callback": "raymod.callback",
    "mxnet.kvstore": "raymod.kvstore", "mxnet.kv": "raymod.kvstore",
    "mxnet.model": "raymod.model", "mxnet.lr_scheduler": "raymod.lr_scheduler",
    "mxnet.executor": "raymod.executor", "mxnet.executor_manager": "raymod.executor_manager",
    "mxnet.monitor": "raymod.mon", "mxnet.mon": "raymod.mon",
    "mxnet.random": "raymod.compat.mxnet.random", "mxnet.context": "raymod.context",
    "mxnet.operator": "raymod.operator",
}

# features left out: ``import mxnet.X`` of one gives a stand-in whose names raise when used
_UNSUPPORTED = {"mxnet.gluon": "Gluon (mx.gluon)", "mxnet.autograd": "autograd (mx.autograd)",
                "mxnet.ndarray.sparse": "sparse storage (mx.nd.sparse)",
                "mxnet.np": "the NumPy-compatible interface (mx.np)",
                "mxnet.npx": "the NumPy-compatible interface (mx.npx)"}


class _Refuser(importlib.abc.MetaPathFinder):
    """Answers ``import mxnet.X`` for any X the compatibility layer does not provide."""

    def find_spec(self, fullname: str, path=None, target=None):
        if not fullname.startswith("mxnet.") or fullname in MODULES:
            return None
        for prefix, feature in _UNSUPPORTED.items():
            if fullname.startswith(prefix + "."):
                raise not_supported(f"import {fullname}", feature)
        raise ModuleNotFoundError(
            f"No module named {fullname!r}: raymod's MXNet compatibility layer does not "
            "provide it (see docs/compat.md)", name=fullname)


_REFUSER = _Refuser()


def installed() -> bool:
    """Whether ``import mxnet`` currently resolves to the compatibility layer."""
    return _REFUSER in sys.meta_path


def install() -> None:
    """Make ``import mxnet`` (and its submodules) resolve to raymod in this process.

    Raises
    ------
    RuntimeError
        If a real ``mxnet`` is already imported in this process.
    """
    if installed():
        return
    present = sys.modules.get("mxnet")
    if present is not None and not present.__name__.startswith("raymod."):
        raise RuntimeError("install: the real mxnet is already imported in this process; "
                           "run the script through `raymod run` in a fresh process")
    for name, target in MODULES.items():
        try:
            sys.modules[name] = importlib.import_module(target)
        except ModuleNotFoundError as err:
            if err.name != target:
                raise
    for name, feature in _UNSUPPORTED.items():
        sys.modules[name] = Unsupported(name, feature)
    sys.meta_path.insert(0, _REFUSER)


def uninstall() -> None:
    """Undo :func:`install` (``import mxnet`` then finds whatever is installed, if anything)."""
    for name in [*MODULES, *_UNSUPPORTED]:
        sys.modules.pop(name, None)
    if installed():
        sys.meta_path.remove(_REFUSER)


def run(script: str, args: Sequence[str] = ()) -> None:
    """Run ``script`` as ``__main__`` with ``import mxnet`` meaning raymod.

    Parameters
    ----------
    script : str
        Path of a Python file.
    args : sequence of str
        The script's arguments (its ``sys.argv[1:]``).

    Raises
    ------
    FileNotFoundError
        If ``script`` is not a file.
    """
    if not os.path.isfile(script):
        raise FileNotFoundError(f"run: script {script!r} is not a file")
    install()
    sys.argv = [script, *args]
    folder = os.path.dirname(os.path.abspath(script))
    if sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path[0] = folder  # replace the runner's own entry, as `python SCRIPT` would have
    else:
        sys.path.insert(0, folder)
    runpy.run_path(script, run_name="__main__")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m raymod.compat SCRIPT [ARGS...]``: the script's exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m raymod.compat SCRIPT [ARGS...]\n\nRun an MXNet 1.x script "
              "with `import mxnet` meaning raymod's compatibility layer.",
              file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    if not os.path.isfile(argv[0]):
        print(f"raymod.compat: error: script {argv[0]!r} is not a file", file=sys.stderr)
        return 2
    try:
        run(argv[0], argv[1:])
    except SystemExit as exit_:
        code = exit_.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    return 0

"""Run a script written for MXNet 1.x with ``import mxnet`` meaning raymod's compatibility layer.

:func:`install` puts ``mxnet`` and its submodule names into ``sys.modules`` (this process
only), pointing at :mod:`raymod.compat.mxnet` or at the raymod module each name means, and adds
a finder that answers any other ``mxnet.*`` import: with raymod's submodule of that name, or
with a stand-in that raises NotSupportedError naming it when used. :func:`run`
installs, then runs a script as ``__main__`` with its own ``sys.argv`` and its folder first on
``sys.path``, as ``python SCRIPT ARGS`` would; with ``workers`` (``--workers``,
``RAYMOD_WORKERS``: :mod:`raymod.compat.workers`) the script's modules train on Ray workers.
"""
from __future__ import annotations

import importlib
import importlib.abc
import os
import runpy
import sys
from typing import Any, Sequence

from .. import actor_setup, array_view
from ..cluster.local import shutdown as shutdown_ray
from ..cluster.workers import Workers
from ..module.placement import default_workers
from . import legacy_numpy
from . import workers as _workers
from .errors import Unsupported
from .mxnet import stand_in
from .mxnet import symbol_sparse
from .ndarray import wrap

__all__ = ["install", "uninstall", "installed", "run", "run_script", "main"]

# ``import mxnet.X`` -> the module it means. Names whose raymod module is missing (a feature
# another part of raymod has not added yet) are skipped.
MODULES = {
    "mxnet": "raymod.compat.mxnet",
    "mxnet.ndarray": "raymod.compat.mxnet.ndarray", "mxnet.nd": "raymod.compat.mxnet.ndarray",
    "mxnet.io": "raymod.compat.mxnet.io", "mxnet.recordio": "raymod.recordio",
    "mxnet.image": "raymod.compat.mxnet.image", "mxnet.module": "raymod.compat.mxnet.module",
    "mxnet.mod": "raymod.compat.mxnet.module",
    "mxnet.module.base_module": "raymod.compat.mxnet.module.base_module",
    "mxnet.module.module": "raymod.compat.mxnet.module.module",
    "mxnet.module.bucketing_module": "raymod.compat.mxnet.module.bucketing_module",
    "mxnet.module.sequential_module": "raymod.compat.mxnet.module.sequential_module",
    "mxnet.module.python_module": "raymod.compat.mxnet.module.python_module",
    "mxnet.module.executor_group": "raymod.compat.mxnet.module.executor_group",
    "mxnet.test_utils": "raymod.compat.mxnet.test_utils",
    "mxnet.base": "raymod.compat.mxnet.base",
    "mxnet.contrib": "raymod.compat.mxnet.contrib",
    "mxnet.contrib.svrg_optimization": "raymod.compat.mxnet.contrib.svrg_optimization",
    "mxnet.contrib.svrg_optimization.svrg_module":
        "raymod.compat.mxnet.contrib.svrg_optimization.svrg_module",
    "mxnet.contrib.svrg_optimization.svrg_optimizer": "raymod.optimizer.svrg",
    "mxnet.ndarray.sparse": "raymod.compat.mxnet.sparse",
    "mxnet.nd.sparse": "raymod.compat.mxnet.sparse",
    "mxnet.symbol": "raymod.symbol", "mxnet.sym": "raymod.symbol",
    "mxnet.symbol.sparse": "raymod.compat.mxnet.symbol_sparse",
    "mxnet.sym.sparse": "raymod.compat.mxnet.symbol_sparse",
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
    "mxnet.gluon.utils": "raymod.compat.mxnet.gluon_utils",
}

# features left out: ``import mxnet.X`` of one, or of any name under it, gives a stand-in
# whose names raise NotSupportedError naming the feature when used. install() puts these
# into sys.modules (their parents hand out the same stand-ins as attributes) ...
_UNSUPPORTED = {"mxnet.gluon": "Gluon (mx.gluon)", "mxnet.autograd": "autograd (mx.autograd)",
                "mxnet.np": "the NumPy-compatible interface (mx.np)",
                "mxnet.npx": "the NumPy-compatible interface (mx.npx)"}
# ... and the finder makes these on import (the import then sets them on their parent); any
# other name raymod lacks gets a stand-in naming the module itself
_LEFT_OUT = {"mxnet.contrib.amp": "automatic mixed precision (mx.contrib.amp)",
             "mxnet.contrib.onnx": "ONNX import/export through mx.contrib.onnx (raymod's "
                                   "exporter is rm.onnx.export_model)",
             "mxnet.contrib.quantization": "quantization (mx.contrib.quantization)",
             "mxnet.profiler": "the profiler (mx.profiler)"}


class _Given(importlib.abc.Loader):
    """Loads an ``mxnet.*`` name as a module that already exists (an alias or a stand-in)."""

    def __init__(self, module):
        self._module = module
        self._own_spec = getattr(module, "__spec__", None)

    def create_module(self, spec):
        return self._module

    def exec_module(self, module) -> None:
        """Nothing to run; an alias gets back its own ``__spec__``, which the import system
        replaced with the ``mxnet.*`` one (reloading it must find raymod's file)."""
        if self._own_spec is not None:
            module.__spec__ = self._own_spec


class _Refuser(importlib.abc.MetaPathFinder):
    """Answers ``import mxnet.X`` for any X that MODULES does not list.

    Under a raymod package (``mxnet.symbol`` is raymod.symbol) a submodule raymod has is that
    module (``mxnet.symbol.symbol`` is raymod.symbol.symbol). Any other name imports as an
    :class:`~raymod.compat.errors.Unsupported` stand-in: the import succeeds, and using one of
    its names raises NotSupportedError naming it (``mxnet.contrib.amp.amp.init``), so
    scripts that import a left-out feature without using it run.
    """

    def find_spec(self, fullname: str, path=None, target=None):
        if not fullname.startswith("mxnet.") or fullname in MODULES:
            return None
        parent_name, _, child = fullname.rpartition(".")
        parent = sys.modules.get(parent_name)
        module = None
        if parent is not None and not isinstance(parent, Unsupported) \
                and hasattr(parent, "__path__"):
            module = self._raymod_submodule(f"{parent.__name__}.{child}")
            if module is None and child[:1].isupper():
                # MXNet has no capitalised modules: `from mxnet.module import Modul` is a
                # mistyped name, and the import fails saying so
                return None
        if module is None:
            module = Unsupported(fullname, self._feature(fullname, parent))
        return importlib.machinery.ModuleSpec(fullname, _Given(module))

    @staticmethod
    def _raymod_submodule(name: str):
        """The raymod module ``name``, or None when raymod has none of that name."""
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:  # it exists but needs something missing: say so
                raise
            return None

    @staticmethod
    def _feature(fullname: str, parent) -> str:
        """What a stand-in for ``fullname`` says is left out."""
        if isinstance(parent, Unsupported):  # under a stand-in: the same feature
            return parent._feature
        features = {**_UNSUPPORTED, **_LEFT_OUT}
        known = [p for p in features if fullname == p or fullname.startswith(p + ".")]
        if known:
            return features[max(known, key=len)]
        return f"the MXNet module {fullname}"


_REFUSER = _Refuser()
_INSTALL = f"{__name__}:install"  # the actors' set-up steps (raymod.actor_setup)
_PATH = "raymod.actor_setup:prepend_path"


def installed() -> bool:
    """Whether ``import mxnet`` currently resolves to the compatibility layer."""
    return _REFUSER in sys.meta_path


def install() -> None:
    """Make ``import mxnet`` (and its submodules) resolve to raymod in this process, and in
    every worker and KVServer actor this process starts from now on (so CustomOps get
    NDArrays there, and metrics from modules that ``import mxnet`` unpickle).

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
    # mx.sym.sparse / mx.sym._internal as attributes of raymod.symbol (MXNet's op modules)
    symbol_sparse.attach(sys.modules["mxnet.symbol"])
    for name, feature in _UNSUPPORTED.items():
        sys.modules[name] = stand_in(name, feature)
        # the parent's attribute too: `mx.gluon` may hold a stand-in of an earlier use of
        # the package, to which `import mxnet.gluon.nn` would not add its submodule
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, sys.modules[name])
    sys.meta_path.insert(0, _REFUSER)
    array_view.set_viewer(wrap)  # every array raymod hands out is now an NDArray view
    legacy_numpy.install()  # np.int, binary np.fromstring: MXNet pinned numpy<1.24
    actor_setup.register(_INSTALL)


def uninstall() -> None:
    """Undo :func:`install` (``import mxnet`` then finds whatever is installed, if anything)."""
    for name in [n for n in sys.modules if n == "mxnet" or n.startswith("mxnet.")]:
        sys.modules.pop(name)  # the finder's names too, so a later import starts afresh
    if installed():
        sys.meta_path.remove(_REFUSER)
        array_view.set_viewer(None)
        legacy_numpy.uninstall()
    actor_setup.unregister(_INSTALL)


def run(script: str, args: Sequence[str] = (), workers: Any = None) -> dict:
    """Run ``script`` as ``__main__`` with ``import mxnet`` meaning raymod.

    Parameters
    ----------
    script : str
        Path of a Python file.
    args : sequence of str
        The script's arguments (its ``sys.argv[1:]``).
    workers : int, str, Workers or None, default None
        None: the script's modules run in this process. N, ``'MIN:MAX'`` or
        ``rm.Workers(...)``: every ``Module``, ``BucketingModule``, ``SVRGModule`` and
        subclass of them that the script makes without ``workers=`` trains on that many
        Ray workers (``rm.mod.default_workers``); this process joins Ray first (a
        loopback-only local cluster unless connected, or ``$RAY_ADDRESS``), and those
        modules' workers and servers are stopped when the script ends.

    Returns
    -------
    dict
        The script's globals, as ``runpy.run_path`` returns them.

    Raises
    ------
    FileNotFoundError
        If ``script`` is not a file.
    """
    if not os.path.isfile(script):
        raise FileNotFoundError(f"run: script {script!r} is not a file")
    spec = Workers.coerce(workers)
    # Ray first: importing it puts its own folder first on sys.path, where the script's goes
    started = spec is not None and _workers.connect(spec)
    install()
    sys.argv = [script, *args]
    folder = os.path.dirname(os.path.abspath(script))
    if sys.path and sys.path[0] in ("", os.getcwd()):
        sys.path[0] = folder  # replace the runner's own entry, as `python SCRIPT` would have
    else:
        sys.path.insert(0, folder)
    if spec is None:
        return runpy.run_path(script, run_name="__main__")
    # the script's sibling modules (its CustomOps, metrics) import in the actors too
    actor_setup.register(_PATH, folder)
    try:
        with default_workers(spec) as placed:
            try:
                return runpy.run_path(script, run_name="__main__")
            finally:  # the script rarely closes its modules: their actors hold CPUs
                _workers.close_all(placed.modules)
    finally:
        actor_setup.unregister(_PATH)
        if started:
            shutdown_ray()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m raymod.compat [--workers N|MIN:MAX] [--cpus-per-worker C]
    [--gpus-per-worker G] SCRIPT [ARGS...]``: the script's exit status (2 for a usage
    error, reported as one line before the script runs). ``$RAYMOD_WORKERS`` stands in
    for ``--workers`` when that is not given."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        options, rest = _workers.split_options(argv)
    except _workers.UsageError as err:
        print(f"raymod.compat: error: {err}", file=sys.stderr)
        return 2
    if not rest or rest[0] in ("-h", "--help"):
        print("usage: python -m raymod.compat [--workers N|MIN:MAX] [--cpus-per-worker C] "
              "[--gpus-per-worker G] SCRIPT [ARGS...]\n\nRun an MXNet 1.x script with "
              "`import mxnet` meaning raymod's compatibility layer. With --workers (or "
              f"${_workers.WORKERS_ENV}) its modules train on that many Ray workers, the "
              "script's batch being the global batch.",
              file=sys.stderr if not rest else sys.stdout)
        return 2 if not rest else 0
    if not os.path.isfile(rest[0]):
        print(f"raymod.compat: error: script {rest[0]!r} is not a file", file=sys.stderr)
        return 2
    try:
        workers = _workers.workers_from_options(*(options.get(o) for o in _workers.OPTIONS))
    except _workers.UsageError as err:
        print(f"raymod.compat: error: {err}", file=sys.stderr)
        return 2
    return run_script(rest[0], rest[1:], workers, prog="raymod.compat")


def run_script(script: str, args: Sequence[str], workers: Any = None,
               prog: str = "raymod.compat") -> int:
    """:func:`run`, as a command: the script's exit status (``sys.exit`` with a message
    prints it and gives 1; a usage error found while connecting to Ray gives 2)."""
    try:
        run(script, args, workers)
    except _workers.UsageError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except SystemExit as exit_:
        code = exit_.code
        if code is None or isinstance(code, int):
            return code or 0
        print(code, file=sys.stderr)
        return 1
    return 0

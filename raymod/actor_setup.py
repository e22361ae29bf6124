"""Steps every raymod actor runs first, so that user code behaves there as in the driver.

Some driver-side state changes how user code runs: MXNet's compatibility layer
(``raymod run``) makes ``import mxnet`` mean raymod and hands out NDArrays, and the script's
folder holds modules its CustomOps and metrics come from. Ray starts actors in fresh
processes that know none of this, so the driver registers each such change here as a step
(``"module:function"`` plus plain arguments), and every worker and KVServer actor is
created with :func:`steps` as a constructor argument and runs them (:func:`apply`) in its
``__init__``: before any method call can unpickle something of the user's.
"""
from __future__ import annotations

import importlib
import sys
from typing import Any

__all__ = ["register", "unregister", "steps", "apply", "prepend_path"]

_STEPS: list[tuple[str, tuple]] = []


def register(function: str, *args: Any) -> None:
    """Have actors created from now on call ``function(*args)`` first.

    Parameters
    ----------
    function : str
        ``"package.module:function"``, importable in the actors' processes.
    *args
        Plain, picklable values (paths, flags).
    """
    module, sep, name = function.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"register: function must be 'module:function', got {function!r}")
    step = (function, tuple(args))
    if step not in _STEPS:
        _STEPS.append(step)


def unregister(function: str) -> None:
    """Forget every step of ``function`` (actors already started keep theirs)."""
    _STEPS[:] = [s for s in _STEPS if s[0] != function]


def steps() -> tuple:
    """The registered steps, in order, as shipped to a new actor."""
    return tuple(_STEPS)


def apply(shipped: Any) -> None:
    """Run ``shipped`` (what :func:`steps` gave in the driver) in this process, in order."""
    for function, args in shipped or ():
        module, _, name = function.partition(":")
        getattr(importlib.import_module(module), name)(*args)


def prepend_path(folder: str) -> None:
    """Put ``folder`` first on ``sys.path``, so that the modules beside a script import in
    an actor as they do in the driver."""
    if folder not in sys.path:
        sys.path.insert(0, folder)

"""``mx.mod`` / ``mx.module``: raymod's modules, returning NDArrays.

Each class is raymod's class with results (outputs, input gradients, parameters, states,
predictions) viewed as NDArrays; user subclasses of ``mx.mod.Module`` / ``BaseModule`` get the
same, also from the result methods they override themselves (a module written against MXNet's
``BaseModule`` returns its executor group's plain arrays). Classes added to ``rm.mod`` later
(e.g. ``SequentialModule``) appear here by themselves.

As in MXNet this is a package: ``mxnet.module.base_module``, ``.module``,
``.bucketing_module``, ``.sequential_module``, ``.python_module`` and ``.executor_group``
hold the classes and the private helpers MXNet's modules import from each other.
"""
from __future__ import annotations

import functools
import types
from typing import Any, Callable, Iterator

from .... import module as _mod
from ...ndarray import wrap

# what a module hands back to the user; these are viewed as NDArrays
_RESULT_METHODS = ("get_outputs", "get_input_grads", "get_params", "get_states", "predict")


def _wrapping(method: Callable) -> Callable:
    """``method`` with its result viewed as NDArrays."""
    @functools.wraps(method)
    def call(self, *args: Any, **kwargs: Any) -> Any:
        return wrap(method(self, *args, **kwargs))
    call._ndarray_results = True
    return call


class _NDArrayResults:
    """Views what a module returns as NDArrays (same memory)."""

    def __init_subclass__(cls, **kwargs: Any):
        super().__init_subclass__(**kwargs)
        # a user class overriding a result method (e.g. an MXNet-era Module(BaseModule)
        # returning ``self._exec_group.get_outputs()``) would otherwise hand out plain arrays
        for name in _RESULT_METHODS:
            method = cls.__dict__.get(name)
            if isinstance(method, types.FunctionType) and \
                    not getattr(method, "_ndarray_results", False):
                setattr(cls, name, _wrapping(method))

    def get_outputs(self, merge_multi_context: bool = True) -> list:
        return wrap(super().get_outputs(merge_multi_context))

    def get_input_grads(self, merge_multi_context: bool = True) -> list:
        return wrap(super().get_input_grads(merge_multi_context))

    def get_params(self) -> tuple[dict, dict]:
        return wrap(super().get_params())

    def get_states(self, merge_multi_context: bool = True) -> list:
        return wrap(super().get_states(merge_multi_context))

    def predict(self, *args: Any, **kwargs: Any) -> Any:
        return wrap(super().predict(*args, **kwargs))

    def iter_predict(self, *args: Any, **kwargs: Any) -> Iterator:
        for outputs, nbatch, batch in super().iter_predict(*args, **kwargs):
            batch.data, batch.label = wrap(batch.data), wrap(batch.label)
            yield wrap(outputs), nbatch, batch


def _compat(cls: type) -> type:
    return type(cls.__name__, (_NDArrayResults, cls),
                {"__doc__": cls.__doc__, "__module__": __name__})


# every module class of rm.mod, under its MXNet name
__all__ = []
for _name in dir(_mod):
    _cls = getattr(_mod, _name)
    if isinstance(_cls, type) and issubclass(_cls, _mod.BaseModule):
        globals()[_name] = _compat(_cls)
        __all__.append(_name)
Stage, StageError = _mod.Stage, _mod.StageError
del _name, _cls

if hasattr(_mod, "PythonLossModule"):
    class PythonLossModule(_NDArrayResults, _mod.PythonLossModule):  # noqa: F811
        __doc__ = _mod.PythonLossModule.__doc__

        def __init__(self, *args: Any, **kwargs: Any):
            super().__init__(*args, **kwargs)
            func = self._grad_func
            if func is not None:  # MXNet hands grad_func NDArrays (it calls .asnumpy())
                self._grad_func = lambda scores, labels: func(wrap(scores), wrap(labels))

# MXNet's submodules, imported last: they re-export the classes above
from . import (base_module, bucketing_module, executor_group, module,  # noqa: E402,F401
               python_module, sequential_module)

"""``mx.sym.sparse`` / ``mxnet.symbol.sparse``, and ``mx.sym._internal`` / ``mx.sym.op``.

``mx.sym.sparse.<name>`` is the symbol function of the op MXNet registers under
``_sparse_<name>`` (``mx.sym.sparse.retain`` is ``_sparse_retain``, ``mx.sym.sparse.dot`` is
``dot``): the same node as ``mx.sym.<name>``, since raymod's ops take sparse inputs where
MXNet's sparse kernels do (an executor densifies the others). The names are MXNet 1.9.1's
(:data:`raymod.compat.mxnet.sparse.SPARSE_OPS`); one whose op raymod lacks raises
:class:`~raymod.compat.errors.NotSupportedError` naming it.
"""
from __future__ import annotations

import types
from typing import Any, Callable

from .sparse import SPARSE_OPS, op_name

__all__ = ["SPARSE_OPS", "attach"]


def _symbol_function(registered: str, short: str) -> Callable[..., Any]:
    from ...symbol import create

    def apply(*args: Any, name: str | None = None, attr: dict | None = None,
              out: Any = None, **kwargs: Any) -> Any:
        # out= is accepted and ignored, as MXNet's generated symbol functions do
        return create(registered, args, kwargs, name=name, attr=attr, hint=short.lower())
    apply.__name__ = apply.__qualname__ = short
    from ...ops.base import OPS

    apply.__doc__ = OPS.get(registered).__doc__
    return apply


def __getattr__(name: str) -> Callable[..., Any]:
    if name.startswith("__") or name not in SPARSE_OPS:
        raise AttributeError(f"module 'mxnet.symbol.sparse' has no attribute {name!r}")
    registered = op_name(name)
    if registered is None:  # a missing op, as mx.sym.<name> reports one
        raise AttributeError(f"mx.sym.sparse has no operator {name!r} (raymod registers no "
                             f"op {name!r} or '_sparse_{name}')")
    fn = _symbol_function(registered, name)
    globals()[name] = fn
    return fn


def __dir__() -> list[str]:
    return sorted(n for n in SPARSE_OPS if op_name(n))


class _Prefixed(types.ModuleType):
    """``mx.sym._internal`` (the ops whose names start with ``_``) or ``mx.sym.op`` (the
    others): raymod.symbol's op functions under MXNet's module names."""

    def __init__(self, name: str, internal: bool):
        super().__init__(name)
        self._internal = internal

    def __getattr__(self, name: str) -> Callable[..., Any]:
        from ...ops.base import OPS
        from ... import symbol

        if name.startswith("__") or name not in OPS or name.startswith("_") != self._internal:
            raise AttributeError(f"{self.__name__} has no operator {name!r}")
        return getattr(symbol, name)

    def __dir__(self) -> list[str]:
        from ...ops.base import OPS

        return sorted(n for n in OPS.names() if n.startswith("_") == self._internal)


def attach(symbol_module: types.ModuleType) -> None:
    """Give raymod's ``symbol`` module MXNet's submodule names that it lacks (``sparse``,
    ``_internal``, ``op``), as attributes; raymod's own names are left alone."""
    import sys

    extra = {"sparse": sys.modules[__name__],
             "_internal": _Prefixed("mxnet.symbol._internal", True),
             "op": _Prefixed("mxnet.symbol.op", False)}
    for key, module in extra.items():
        if key not in vars(symbol_module):
            setattr(symbol_module, key, module)

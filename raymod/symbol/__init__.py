"""``rm.sym`` / ``rm.symbol``: build graphs with MXNet's symbolic API.

Every registered operator is a function here under its MXNet name(s), e.g.
``rm.sym.FullyConnected(data, num_hidden=10, name='fc1')``. As MXNet's generated functions,
they also take everything positionally: the op's inputs (arguments, then auxiliary states;
None for one the op should create), then its attributes in declaration order, then ``name``
and ``attr`` (``rm.sym.Dropout(data, 0.5)``).
"""
from __future__ import annotations

from typing import Any, Callable

from ..ops import OPS
from .naming import AttrScope, NameManager, Prefix
from .symbol import Group, Node, Symbol, Variable, create, load, load_json, var


def _op_function(op_name: str) -> Callable[..., Symbol]:
    op_cls = OPS.get(op_name)

    def apply(*args: Symbol, name: str | None = None, attr: dict | None = None, **kwargs) -> Symbol:
        return create(op_name, args, kwargs, name=name, attr=attr)
    apply.__name__ = apply.__qualname__ = op_name
    apply.__doc__ = op_cls.__doc__
    return apply


for _name in OPS.names():
    globals()[_name] = _op_function(_name)


from .arith import hypot, maximum, minimum, pow, power  # noqa: E402,A004 - after the op functions


class _ContribNamespace:
    """``rm.sym.contrib``: the ``_contrib_*`` ops under their short names, as MXNet's
    ``mx.sym.contrib`` (``contrib.ROIAlign`` is ``_contrib_ROIAlign``). As there, nodes are
    auto-named from the short name (``roialign0``), not from the registered one."""

    prefix = "_contrib_"

    def __getattr__(self, short: str) -> Callable[..., Symbol]:
        op_name = self.prefix + short
        if op_name not in OPS:
            raise AttributeError(f"rm.sym.contrib has no operator {short!r} "
                                 f"(no op registered as {op_name!r})")

        def apply(*args: Symbol, name: str | None = None, attr: dict | None = None,
                  **kwargs) -> Symbol:
            return create(op_name, args, kwargs, name=name, attr=attr, hint=short.lower())
        apply.__name__ = apply.__qualname__ = short
        apply.__doc__ = OPS.get(op_name).__doc__
        return apply

    def __dir__(self) -> list[str]:
        return sorted(n[len(self.prefix):] for n in OPS.names() if n.startswith(self.prefix))


contrib = _ContribNamespace()


def zeros(shape: Any, dtype: Any = None, **kwargs: Any) -> Symbol:
    """A ``_zeros`` node: zeros of ``shape`` (0 dims inferred) and ``dtype`` (default float32).

    As MXNet's ``mx.sym.zeros``, a function taking ``shape, dtype`` positionally, where the
    ``_zeros`` op itself declares ``shape, ctx, dtype``.
    """
    return create("_zeros", [], {"shape": shape, "dtype": dtype or "float32", **kwargs})


def ones(shape: Any, dtype: Any = None, **kwargs: Any) -> Symbol:
    """A ``_ones`` node: ones of ``shape`` and ``dtype`` (default float32); see :func:`zeros`."""
    return create("_ones", [], {"shape": shape, "dtype": dtype or "float32", **kwargs})


def __getattr__(name: str) -> Callable[..., Symbol]:
    # ops registered after import (user-defined) are reachable too
    if name in OPS:
        return _op_function(name)
    raise AttributeError(f"module 'raymod.symbol' has no attribute {name!r}")

"""Errors and small helpers shared by every layer of raymod."""
from __future__ import annotations


class MXNetError(RuntimeError):
    """Error raised where MXNet 1.x raised ``mxnet.base.MXNetError``.

    Kept under MXNet's name so that ported ``except MXNetError`` clauses keep working.
    """


class ShapeError(MXNetError, ValueError):
    """A shape given or inferred for an operator input does not fit."""


class AttributeValueError(MXNetError, ValueError):
    """An operator attribute is unknown or has a value the operator cannot take."""


def names_list(names) -> str:
    """Format a collection of names for an error message, sorted."""
    return ", ".join(repr(n) for n in sorted(names))

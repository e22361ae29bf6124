"""``rm.sym.maximum``, ``minimum``, ``hypot``, ``pow`` and ``power``: elementwise functions of two
operands that may each be a Symbol or a number, as MXNet's ``mx.sym`` helpers.

Two symbols give the elementwise op (``_maximum``, ``_minimum``, ``_power``: same shapes, no
broadcasting), a symbol and a number give the scalar op (``_maximum_scalar``, ...; a number
base gives ``_rpower_scalar``), and two numbers give a number.
"""
from __future__ import annotations

from numbers import Number
from typing import Any

from .symbol import Symbol, create

__all__ = ["maximum", "minimum", "pow", "power", "hypot"]


def _refuse(left: Any, right: Any) -> TypeError:
    return TypeError(f"types ({type(left)}, {type(right)}) not supported")


def _symmetric(left: Any, right: Any, op: str) -> Symbol | None:
    """The ``op`` / ``op_scalar`` node of a commutative function, or None when neither
    operand is a Symbol. Node names follow MXNet's creators (``_maximumscalar0``)."""
    if isinstance(left, Symbol) and isinstance(right, Symbol):
        return create(op, [left, right], {})
    if isinstance(left, Symbol) and isinstance(right, Number):
        return create(f"{op}_scalar", [left], {"scalar": right}, hint=f"{op}scalar")
    if isinstance(left, Number) and isinstance(right, Symbol):
        return create(f"{op}_scalar", [right], {"scalar": left}, hint=f"{op}scalar")
    return None


def _commutative(left: Any, right: Any, op: str, on_numbers) -> Any:
    """The ``op`` node for Symbol operands, ``on_numbers(left, right)`` for two numbers."""
    out = _symmetric(left, right, op)
    if out is not None:
        return out
    if isinstance(left, Number) and isinstance(right, Number):
        return on_numbers(left, right)
    raise _refuse(left, right)


def maximum(left: Any, right: Any) -> Any:
    """Elementwise maximum of two Symbols, a Symbol and a number, or two numbers.

    Parameters
    ----------
    left, right : Symbol or number
        The operands; two Symbols must have the same shape.

    Returns
    -------
    Symbol or number
        A ``_maximum`` / ``_maximum_scalar`` node, or the larger number.
    """
    return _commutative(left, right, "_maximum", lambda a, b: a if a > b else b)


def minimum(left: Any, right: Any) -> Any:
    """Elementwise minimum of two Symbols, a Symbol and a number, or two numbers.

    Parameters
    ----------
    left, right : Symbol or number
        The operands; two Symbols must have the same shape.

    Returns
    -------
    Symbol or number
        A ``_minimum`` / ``_minimum_scalar`` node, or the smaller number.
    """
    return _commutative(left, right, "_minimum", lambda a, b: a if a < b else b)


def pow(base: Any, exp: Any) -> Any:  # noqa: A001 - MXNet's name
    """``base ** exp`` elementwise, for Symbols and numbers in any combination.

    Parameters
    ----------
    base, exp : Symbol or number
        Two Symbols must have the same shape (``broadcast_power`` broadcasts).

    Returns
    -------
    Symbol or number
        A ``_power``, ``_power_scalar`` (number exponent) or ``_rpower_scalar`` (number
        base) node, or ``base ** exp`` for two numbers.
    """
    if isinstance(base, Symbol) and isinstance(exp, Symbol):
        return create("_power", [base, exp], {})
    if isinstance(base, Symbol) and isinstance(exp, Number):
        return create("_power_scalar", [base], {"scalar": exp}, hint="_powerscalar")
    if isinstance(base, Number) and isinstance(exp, Symbol):
        return create("_rpower_scalar", [exp], {"scalar": base}, hint="_rpowerscalar")
    if isinstance(base, Number) and isinstance(exp, Number):
        return base ** exp
    raise _refuse(base, exp)


def power(base: Any, exp: Any) -> Any:
    """The same as :func:`pow` (MXNet's newer name)."""
    return pow(base, exp)


def hypot(left: Any, right: Any) -> Any:
    """``sqrt(left**2 + right**2)`` elementwise, for Symbols and numbers in any combination.

    Parameters
    ----------
    left, right : Symbol or number
        The operands; two Symbols must have the same shape.

    Returns
    -------
    Symbol or number
        A ``_hypot`` / ``_hypot_scalar`` node, or the number for two numbers.
    """
    return _commutative(left, right, "_hypot", lambda a, b: (a * a + b * b) ** 0.5)

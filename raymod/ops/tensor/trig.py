"""Trigonometric and hyperbolic functions and angle conversion: tan, arcsin, arccos, arctan,
sinh, cosh, arcsinh, arccosh, arctanh, degrees, radians (``sin``/``cos``/``tanh`` live in
``unary``). Sparse inputs follow :class:`~raymod.ops.tensor.unary._Unary`: the ops with
``f(0) == 0`` keep a csr or row_sparse input's storage; arccos, cosh and arccosh compute on a
dense copy (MXNet's dense-result ops)."""
from __future__ import annotations

import math

from .unary import _Unary


class Tan(_Unary):
    """Tangent. Backward keeps the output (the derivative is ``1 + out**2``)."""

    name = "tan"
    keeps_zero = True
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: xp.tan(x))
    df = staticmethod(lambda xp, g, x, y: g * (1 + y * y))


class Arcsin(_Unary):
    """Inverse sine, defined on [-1, 1]. Backward keeps the input
    (the derivative is ``1 / sqrt(1 - x**2)``)."""

    name = "arcsin"
    keeps_zero = True
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.arcsin(x))
    df = staticmethod(lambda xp, g, x, y: g / xp.sqrt(1 - x * x))


class Arccos(_Unary):
    """Inverse cosine, defined on [-1, 1]. Backward keeps the input
    (the derivative is ``-1 / sqrt(1 - x**2)``)."""

    name = "arccos"
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.arccos(x))
    df = staticmethod(lambda xp, g, x, y: -g / xp.sqrt(1 - x * x))


class Arctan(_Unary):
    """Inverse tangent. Backward keeps the input (the derivative is ``1 / (1 + x**2)``)."""

    name = "arctan"
    keeps_zero = True
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.arctan(x))
    df = staticmethod(lambda xp, g, x, y: g / (1 + x * x))


class Sinh(_Unary):
    """Hyperbolic sine. Backward keeps the input (the derivative is ``cosh(x)``)."""

    name = "sinh"
    keeps_zero = True
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.sinh(x))
    df = staticmethod(lambda xp, g, x, y: g * xp.cosh(x))


class Cosh(_Unary):
    """Hyperbolic cosine. Backward keeps the input (the derivative is ``sinh(x)``)."""

    name = "cosh"
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.cosh(x))
    df = staticmethod(lambda xp, g, x, y: g * xp.sinh(x))


class Arcsinh(_Unary):
    """Inverse hyperbolic sine. Backward keeps the input
    (the derivative is ``1 / sqrt(x**2 + 1)``)."""

    name = "arcsinh"
    keeps_zero = True
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.arcsinh(x))
    df = staticmethod(lambda xp, g, x, y: g / xp.sqrt(x * x + 1))


class Arccosh(_Unary):
    """Inverse hyperbolic cosine, defined on [1, inf). Backward keeps the input
    (the derivative is ``1 / sqrt(x**2 - 1)``)."""

    name = "arccosh"
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.arccosh(x))
    df = staticmethod(lambda xp, g, x, y: g / xp.sqrt(x * x - 1))


class Arctanh(_Unary):
    """Inverse hyperbolic tangent, defined on (-1, 1). Backward keeps the input
    (the derivative is ``1 / (1 - x**2)``)."""

    name = "arctanh"
    keeps_zero = True
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.arctanh(x))
    df = staticmethod(lambda xp, g, x, y: g / (1 - x * x))


class Degrees(_Unary):
    """Radians to degrees (``x * 180 / pi``). The gradient is the head gradient times
    ``180 / pi``, in the head gradient's storage; backward keeps nothing."""

    name = "degrees"
    keeps_zero = True
    grad_scale = 180.0 / math.pi
    f = staticmethod(lambda xp, x: xp.degrees(x))


class Radians(_Unary):
    """Degrees to radians (``x * pi / 180``). The gradient is the head gradient times
    ``pi / 180``, in the head gradient's storage; backward keeps nothing."""

    name = "radians"
    keeps_zero = True
    grad_scale = math.pi / 180.0
    f = staticmethod(lambda xp, x: xp.radians(x))

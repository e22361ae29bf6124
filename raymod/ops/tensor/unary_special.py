"""Roots, logarithms in base 10 and 2, and the gamma functions: cbrt, rcbrt, log10, log2,
gamma, gammaln. ``cbrt`` keeps a csr or row_sparse input's storage (``cbrt(0) == 0``; see
:class:`~raymod.ops.tensor.unary._Unary`); the others compute sparse inputs on a dense copy.
gamma and gammaln use scipy.special (cupyx.scipy.special for CuPy arrays)."""
from __future__ import annotations

import math

from ._sparse_math import digamma, special
from .unary import _Unary


class Cbrt(_Unary):
    """Cube root. Backward keeps the output (the derivative is ``1 / (3 * out**2)``)."""

    name = "cbrt"
    keeps_zero = True
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: xp.cbrt(x))
    df = staticmethod(lambda xp, g, x, y: g / (3 * y * y))


class Rcbrt(_Unary):
    """Reciprocal cube root ``1 / cbrt(data)``. Backward keeps the input
    (the derivative is ``-1 / (3 * cbrt(x) * x)``)."""

    name = "rcbrt"
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: 1 / xp.cbrt(x))
    df = staticmethod(lambda xp, g, x, y: -g / (3 * xp.cbrt(x) * x))


class Log10(_Unary):
    """Base-10 logarithm. Backward keeps the input (the derivative is ``1 / (x ln 10)``)."""

    name = "log10"
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.log10(x))
    df = staticmethod(lambda xp, g, x, y: g / (x * math.log(10.0)))


class Log2(_Unary):
    """Base-2 logarithm. Backward keeps the input (the derivative is ``1 / (x ln 2)``)."""

    name = "log2"
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.log2(x))
    df = staticmethod(lambda xp, g, x, y: g / (x * math.log(2.0)))


class Gamma(_Unary):
    """The gamma function. Backward keeps the input and the output (the derivative is
    ``gamma(x) * digamma(x)``, with digamma infinite at 0 and the negative integers as in
    MXNet)."""

    name = "gamma"
    retain_inputs = (0,)
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: special(xp).gamma(x))
    df = staticmethod(lambda xp, g, x, y: g * y * digamma(xp, x))


class Gammaln(_Unary):
    """The log of the absolute value of the gamma function. Backward keeps the input (the
    derivative is ``digamma(x)``, infinite at 0 and the negative integers as in MXNet)."""

    name = "gammaln"
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: special(xp).gammaln(x))
    df = staticmethod(lambda xp, g, x, y: g * digamma(xp, x))

"""Elementwise math on one input: exp, log, sqrt, square, abs, negative, reciprocal, sigmoid,
tanh, relu, rsqrt, log1p, expm1, sin, cos, and the zero-gradient sign and rounding ops.
Each op says whether backward reads its input or its output."""
from __future__ import annotations

from ...sparse import CSRArray
from ..base import ElementwiseOp
from ..nn._relu import relu


class _Unary(ElementwiseOp):
    params = {}
    # f(0) == 0: applied to a csr input's stored values only, the result stays csr (MXNet's
    # sparse unary ops); a csr input is data and takes no gradient
    keeps_zero = False

    def takes_sparse(self, in_stypes):
        return self.keeps_zero and in_stypes[0] == "csr"

    def infer_storage(self, in_stypes):
        if self.takes_sparse(in_stypes):
            return ["csr"], ["default"]
        return super().infer_storage(in_stypes)

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if isinstance(x, CSRArray):
            return [CSRArray(self.f(xp, x.data).astype(x.dtype, copy=False), x.indices,
                             x.indptr, x.shape, check=False)], None
        return [self.f(xp, x).astype(x.dtype, copy=False)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if isinstance(inputs[0], CSRArray) or isinstance(outputs[0], CSRArray):
            return [None]
        return [self.df(xp, out_grads[0], inputs[0], outputs[0])]


class Exp(_Unary):
    """``e ** data``. Backward keeps the output."""

    name = "exp"
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: xp.exp(x))
    df = staticmethod(lambda xp, g, x, y: g * y)


class Log(_Unary):
    """Natural logarithm. Backward keeps the input."""

    name = "log"
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.log(x))
    df = staticmethod(lambda xp, g, x, y: g / x)


class Sqrt(_Unary):
    """Square root. Backward keeps the output."""

    name = "sqrt"
    keeps_zero = True
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: xp.sqrt(x))
    df = staticmethod(lambda xp, g, x, y: g / (2 * y))


class Square(_Unary):
    """``data ** 2``. Backward keeps the input."""

    name = "square"
    keeps_zero = True
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: x * x)
    df = staticmethod(lambda xp, g, x, y: 2 * g * x)


class Abs(_Unary):
    """Absolute value; the gradient at 0 is 0 (``sign``). Backward keeps the input."""

    name = "abs"
    keeps_zero = True
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.abs(x))
    df = staticmethod(lambda xp, g, x, y: g * xp.sign(x))


class Negative(_Unary):
    """``-data``. Backward keeps nothing."""

    name = "negative"
    keeps_zero = True
    f = staticmethod(lambda xp, x: -x)
    df = staticmethod(lambda xp, g, x, y: -g)


class Reciprocal(_Unary):
    """``1 / data``. Backward keeps the output (d(1/x)/dx = -y**2)."""

    name = "reciprocal"
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: 1 / x)
    df = staticmethod(lambda xp, g, x, y: -g * y * y)


class Sigmoid(_Unary):
    """``1 / (1 + e ** -data)``. Backward keeps the output."""

    name = "sigmoid"
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: 1 / (1 + xp.exp(-x)))
    df = staticmethod(lambda xp, g, x, y: g * y * (1 - y))


class Tanh(_Unary):
    """Hyperbolic tangent. Backward keeps the output."""

    name = "tanh"
    keeps_zero = True
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: xp.tanh(x))
    df = staticmethod(lambda xp, g, x, y: g * (1 - y * y))


class Relu(_Unary):
    """``max(data, 0)``; the gradient at 0 is 0. Backward keeps the output."""

    name = "relu"
    keeps_zero = True
    retain_outputs = (0,)
    f = staticmethod(relu)
    df = staticmethod(lambda xp, g, x, y: g * (y > 0))


class Rsqrt(_Unary):
    """``1 / sqrt(data)``. Backward keeps the output (d/dx = -y**3 / 2)."""

    name = "rsqrt"
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: 1 / xp.sqrt(x))
    df = staticmethod(lambda xp, g, x, y: -0.5 * g * y * y * y)


class Log1p(_Unary):
    """``log(1 + data)``, accurate near 0. Backward keeps the input."""

    name = "log1p"
    keeps_zero = True
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.log1p(x))
    df = staticmethod(lambda xp, g, x, y: g / (1 + x))


class Expm1(_Unary):
    """``exp(data) - 1``, accurate near 0. Backward keeps the output (d/dx = y + 1)."""

    name = "expm1"
    keeps_zero = True
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: xp.expm1(x))
    df = staticmethod(lambda xp, g, x, y: g * (y + 1))


class Sin(_Unary):
    """Sine. Backward keeps the input."""

    name = "sin"
    keeps_zero = True
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.sin(x))
    df = staticmethod(lambda xp, g, x, y: g * xp.cos(x))


class Cos(_Unary):
    """Cosine. Backward keeps the input."""

    name = "cos"
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.cos(x))
    df = staticmethod(lambda xp, g, x, y: -g * xp.sin(x))


class _Piecewise(_Unary):
    """Piecewise-constant ops: the gradient is zero everywhere (as MXNet defines it)."""
    keeps_zero = True  # sign and the roundings keep 0

    df = staticmethod(lambda xp, g, x, y: xp.zeros_like(g))


class Sign(_Piecewise):
    """-1, 0 or 1 by the sign of ``data``. Zero gradient; backward keeps nothing."""

    name = "sign"
    f = staticmethod(lambda xp, x: xp.sign(x))


class Floor(_Piecewise):
    """Largest integer <= ``data``. Zero gradient; backward keeps nothing."""

    name = "floor"
    f = staticmethod(lambda xp, x: xp.floor(x))


class Ceil(_Piecewise):
    """Smallest integer >= ``data``. Zero gradient; backward keeps nothing."""

    name = "ceil"
    f = staticmethod(lambda xp, x: xp.ceil(x))


class Round(_Piecewise):
    """Nearest integer, halves rounded away from zero (MXNet's ``round``, unlike numpy's).

    Zero gradient; backward keeps nothing.
    """

    name = "round"
    f = staticmethod(lambda xp, x: _round_half_away(xp, x))


def _round_half_away(xp, x):
    t = xp.trunc(x)
    return t + xp.sign(x) * (xp.abs(x - t) >= 0.5)


class Rint(_Piecewise):
    """Nearest integer, halves rounded to even. Zero gradient; backward keeps nothing."""

    name = "rint"
    f = staticmethod(lambda xp, x: xp.rint(x))


class Trunc(_Piecewise):
    """``data`` rounded toward zero. Zero gradient; backward keeps nothing."""

    name = "trunc"
    aliases = ("fix",)
    f = staticmethod(lambda xp, x: xp.trunc(x))

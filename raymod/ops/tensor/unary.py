"""Elementwise math on one input: exp, log, sqrt, square, abs, negative, reciprocal, sigmoid,
tanh, relu. Each op says whether backward reads its input or its output."""
from __future__ import annotations

from ..base import ElementwiseOp


class _Unary(ElementwiseOp):
    params = {}

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        return [self.f(xp, x).astype(x.dtype, copy=False)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
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
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: xp.sqrt(x))
    df = staticmethod(lambda xp, g, x, y: g / (2 * y))


class Square(_Unary):
    """``data ** 2``. Backward keeps the input."""

    name = "square"
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: x * x)
    df = staticmethod(lambda xp, g, x, y: 2 * g * x)


class Abs(_Unary):
    """Absolute value; the gradient at 0 is 0 (``sign``). Backward keeps the input."""

    name = "abs"
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.abs(x))
    df = staticmethod(lambda xp, g, x, y: g * xp.sign(x))


class Negative(_Unary):
    """``-data``. Backward keeps nothing."""

    name = "negative"
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
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: xp.tanh(x))
    df = staticmethod(lambda xp, g, x, y: g * (1 - y * y))


class Relu(_Unary):
    """``max(data, 0)``; the gradient at 0 is 0. Backward keeps the output."""

    name = "relu"
    retain_outputs = (0,)
    f = staticmethod(lambda xp, x: xp.maximum(x, 0))
    df = staticmethod(lambda xp, g, x, y: g * (y > 0))

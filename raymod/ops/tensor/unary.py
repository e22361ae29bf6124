"""Elementwise math on one input: exp, log, sqrt, square, abs, negative, reciprocal, sigmoid,
tanh, relu, rsqrt, log1p, expm1, sin, cos, and the zero-gradient sign and rounding ops.
Each op says whether backward reads its input or its output.

Sparse inputs, as MXNet 1.9.1's storage rules: an op with ``f(0) == 0`` (``keeps_zero``)
computes a csr or row_sparse input's stored values only, and its output keeps the input's
storage; the others compute on a dense copy. Backward of a sparse input: where the derivative
at 0 is 0 too (``grad_keeps_zero``: square, abs, relu, and the zero-gradient ops) the gradient
has the input's pattern (its held rows, or its csr places), read from the head gradient there;
an op with a constant derivative (``grad_scale``: negative) scales the head gradient in its own
storage; every other op gives the dense gradient ``head * f'(x)`` over the whole array (MXNet's
dense-result backward), whose value at the places the input does not store is ``head * f'(0)``.
"""
from __future__ import annotations

from ...sparse import is_sparse
from ..base import ElementwiseOp
from ..nn._relu import relu
from ._sparse_math import SPARSE, bare, dense, empty_like, scale, values_at, with_values


class _Unary(ElementwiseOp):
    params = {}
    # f(0) == 0: a csr or row_sparse input's stored values are computed and the result keeps
    # the input's storage (MXNet's sparse unary ops)
    keeps_zero = False
    # f'(0) == 0: a sparse input's gradient has the input's pattern
    grad_keeps_zero = False
    # the derivative is this constant: the gradient is the head gradient scaled, in its storage
    grad_scale: float | None = None
    # the gradient is 0 everywhere (sign, the roundings)
    zero_grad = False

    def takes_sparse(self, in_stypes):
        return self.keeps_zero and in_stypes[0] in SPARSE

    def infer_storage(self, in_stypes):
        if not self.takes_sparse(in_stypes):
            return super().infer_storage(in_stypes)
        stype = in_stypes[0]
        rows = stype == "row_sparse" and (self.grad_keeps_zero or self.zero_grad)
        return [stype], ["row_sparse" if rows else "default"]

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if is_sparse(x):
            x = bare(x)
            values = self.f(xp, x.data).astype(x.dtype, copy=False)
            return [with_values(x, values)], empty_like(x)
        return [self.f(xp, x).astype(x.dtype, copy=False)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        if not need_grad[0]:  # a csr data input, say: nothing to compute
            return [None]
        g, x, y = out_grads[0], inputs[0], outputs[0]
        if self.grad_scale is not None:
            return [scale(g, self.grad_scale)]
        if saved is None:  # a dense input (a sparse head gradient only from a fallback)
            g = dense(g)
            if self.zero_grad:
                return [xp.zeros_like(g)]
            return [self.df(xp, g, x, y)]
        if self.zero_grad:  # saved: an empty array of the input's storage and shape
            return [saved]
        if self.grad_keeps_zero:
            like = bare(x if x is not None else y)
            xv = None if x is None else bare(x).data
            yv = None if y is None else bare(y).data
            values = self.df(xp, values_at(xp, g, like), xv, yv)
            return [with_values(like, values.astype(like.dtype, copy=False))]
        return [self.df(xp, dense(g), None if x is None else dense(x),
                        None if y is None else dense(y))]


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
    grad_keeps_zero = True
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: x * x)
    df = staticmethod(lambda xp, g, x, y: 2 * g * x)


class Abs(_Unary):
    """Absolute value; the gradient at 0 is 0 (``sign``). Backward keeps the input."""

    name = "abs"
    keeps_zero = True
    grad_keeps_zero = True
    retain_inputs = (0,)
    f = staticmethod(lambda xp, x: xp.abs(x))
    df = staticmethod(lambda xp, g, x, y: g * xp.sign(x))


class Negative(_Unary):
    """``-data``. Backward keeps nothing."""

    name = "negative"
    keeps_zero = True
    grad_scale = -1
    f = staticmethod(lambda xp, x: -x)


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
    grad_keeps_zero = True
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
    zero_grad = True


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

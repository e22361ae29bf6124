"""Arithmetic with a scalar: ``x + s``, ``x - s``, ``s - x``, ``x * s``, ``x / s``, ``s / x``."""
from __future__ import annotations

from ..base import ElementwiseOp, Param


class _ScalarOp(ElementwiseOp):
    params = {"scalar": Param("float", 1.0), "is_int": Param("bool", True)}

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        return [self.compute(x, self.scalar).astype(x.dtype, copy=False)], None


class PlusScalar(_ScalarOp):
    """``data + scalar``. Backward keeps nothing."""

    name = "_plus_scalar"
    aliases = ("_PlusScalar",)

    def compute(self, x, s):
        return x + s

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0]]


class MinusScalar(_ScalarOp):
    """``data - scalar``. Backward keeps nothing."""

    name = "_minus_scalar"
    aliases = ("_MinusScalar",)

    def compute(self, x, s):
        return x - s

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0]]


class RMinusScalar(_ScalarOp):
    """``scalar - data``. Backward keeps nothing."""

    name = "_rminus_scalar"
    aliases = ("_RMinusScalar",)

    def compute(self, x, s):
        return s - x

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [-out_grads[0]]


class MulScalar(_ScalarOp):
    """``data * scalar``. Backward keeps nothing."""

    name = "_mul_scalar"
    aliases = ("_MulScalar",)

    def compute(self, x, s):
        return x * s

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0] * self.scalar]


class DivScalar(_ScalarOp):
    """``data / scalar``. Backward keeps nothing."""

    name = "_div_scalar"
    aliases = ("_DivScalar",)

    def compute(self, x, s):
        return x / s

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0] / self.scalar]


class RDivScalar(_ScalarOp):
    """``scalar / data``. Backward keeps the input."""

    name = "_rdiv_scalar"
    aliases = ("_RDivScalar",)
    retain_inputs = (0,)

    def compute(self, x, s):
        return s / x

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x = inputs[0]
        return [out_grads[0] * (-self.scalar / (x * x))]

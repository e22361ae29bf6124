"""elemwise_add/sub/mul/div, _power, _maximum, _minimum: arithmetic on two inputs of one shape."""
from __future__ import annotations

from ..base import ElementwiseOp


class _ElemwiseBinary(ElementwiseOp):
    inputs = ("lhs", "rhs")
    params = {}


class ElemwiseAdd(_ElemwiseBinary):
    """``lhs + rhs`` for equal shapes. Backward keeps nothing."""

    name = "elemwise_add"
    aliases = ("_Plus", "_plus", "_add")

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0] + inputs[1]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        return [g if need_grad[0] else None, g if need_grad[1] else None]


class ElemwiseSub(_ElemwiseBinary):
    """``lhs - rhs`` for equal shapes. Backward keeps nothing."""

    name = "elemwise_sub"
    aliases = ("_Minus", "_minus", "_sub")

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0] - inputs[1]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        return [g if need_grad[0] else None, -g if need_grad[1] else None]


class ElemwiseMul(_ElemwiseBinary):
    """``lhs * rhs`` for equal shapes. Backward keeps both inputs."""

    name = "elemwise_mul"
    aliases = ("_Mul", "_mul")
    retain_inputs = (0, 1)

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0] * inputs[1]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g, (a, b) = out_grads[0], inputs
        return [g * b if need_grad[0] else None, g * a if need_grad[1] else None]


class ElemwiseDiv(_ElemwiseBinary):
    """``lhs / rhs`` for equal shapes. Backward keeps ``rhs`` and the output."""

    name = "elemwise_div"
    aliases = ("_Div", "_div")
    retain_inputs = (1,)
    retain_outputs = (0,)

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0] / inputs[1]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        ga = out_grads[0] / inputs[1]  # d(a/b)/db = -(a/b)/b
        return [ga if need_grad[0] else None, -ga * outputs[0] if need_grad[1] else None]


class Power(_ElemwiseBinary):
    """``lhs ** rhs`` for equal shapes. Backward keeps both inputs and the output.

    The gradients are ``rhs * lhs ** (rhs - 1)`` and ``out * log(lhs)``; as in MXNet they are
    not finite where ``lhs <= 0`` (for ``rhs``) or at ``0 ** 0`` (for ``lhs``).
    """

    name = "_power"
    aliases = ("_Power",)
    retain_inputs = (0, 1)
    retain_outputs = (0,)

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0] ** inputs[1]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g, (a, b) = out_grads[0], inputs
        return [g * b * a ** (b - 1) if need_grad[0] else None,
                g * outputs[0] * xp.log(a) if need_grad[1] else None]


class Maximum(_ElemwiseBinary):
    """Elementwise ``max(lhs, rhs)``; on ties ``lhs`` gets the gradient (as in MXNet).

    Backward keeps both inputs.
    """

    name = "_maximum"
    aliases = ("_Maximum",)
    retain_inputs = (0, 1)

    def forward(self, xp, inputs, aux, is_train):
        return [xp.maximum(inputs[0], inputs[1])], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g, (a, b) = out_grads[0], inputs
        left = a >= b
        return [g * left if need_grad[0] else None, g * ~left if need_grad[1] else None]


class Minimum(_ElemwiseBinary):
    """Elementwise ``min(lhs, rhs)``; on ties ``lhs`` gets the gradient (as in MXNet).

    Backward keeps both inputs.
    """

    name = "_minimum"
    aliases = ("_Minimum",)
    retain_inputs = (0, 1)

    def forward(self, xp, inputs, aux, is_train):
        return [xp.minimum(inputs[0], inputs[1])], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g, (a, b) = out_grads[0], inputs
        left = a <= b
        return [g * left if need_grad[0] else None, g * ~left if need_grad[1] else None]

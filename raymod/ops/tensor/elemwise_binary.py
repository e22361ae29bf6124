"""elemwise_add/sub/mul/div: arithmetic on two inputs of one shape."""
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

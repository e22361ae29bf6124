"""Activation: relu, sigmoid, tanh, softrelu, softsign."""
from __future__ import annotations

from ..base import ElementwiseOp, Param
from ._relu import relu, relu_grad

# act_type -> backward needs the output (True) or the input (False)
_USES_OUTPUT = {"relu": True, "sigmoid": True, "tanh": True, "softrelu": False, "softsign": False}


class Activation(ElementwiseOp):
    """Elementwise activation ``act_type``: relu, sigmoid, tanh, softrelu (log(1+e^x)), softsign.

    Backward keeps the output for relu, sigmoid and tanh, the input for softrelu and softsign.
    """

    name = "Activation"
    params = {"act_type": Param("str", choices=tuple(_USES_OUTPUT))}

    def check(self) -> None:
        if _USES_OUTPUT[self.act_type]:
            self.retain_outputs = (0,)
        else:
            self.retain_inputs = (0,)

    def forward(self, xp, inputs, aux, is_train):
        x, act = inputs[0], self.act_type
        if act == "relu":
            y = relu(xp, x)
        elif act == "sigmoid":
            y = 1 / (1 + xp.exp(-x))
        elif act == "tanh":
            y = xp.tanh(x)
        elif act == "softrelu":
            y = xp.logaddexp(x, 0)
        else:
            y = x / (1 + xp.abs(x))
        return [y.astype(x.dtype, copy=False)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g, act = out_grads[0], self.act_type
        if act == "relu":
            return [relu_grad(xp, g, outputs[0])]
        if act == "sigmoid":
            y = outputs[0]
            return [g * y * (1 - y)]
        if act == "tanh":
            y = outputs[0]
            return [g * (1 - y * y)]
        x = inputs[0]
        if act == "softrelu":
            return [g / (1 + xp.exp(-x))]
        return [g / (1 + xp.abs(x)) ** 2]

"""BlockGrad and _copy (identity): pass the input through, with or without its gradient."""
from __future__ import annotations

from ..base import ElementwiseOp


class BlockGrad(ElementwiseOp):
    """The input, unchanged; no gradient flows back through it. Backward keeps nothing."""

    name = "BlockGrad"
    aliases = ("stop_gradient",)
    params = {}

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None]


class Copy(ElementwiseOp):
    """The input, unchanged, with the gradient passed straight back. Backward keeps nothing.

    The output shares memory with the input (op outputs are never written in place).
    """

    name = "_copy"
    aliases = ("identity",)
    params = {}

    def forward(self, xp, inputs, aux, is_train):
        return [inputs[0]], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0]]

"""add_n (ElementWiseSum): the sum of any number of same-shape inputs."""
from __future__ import annotations

from ..base import ElementwiseOp, Param


class AddN(ElementwiseOp):
    """``arg0 + arg1 + ... + arg{num_args-1}``, all of one shape.

    Backward keeps nothing: every input receives the output gradient.
    """

    name = "add_n"
    aliases = ("ElementWiseSum",)
    variadic = "num_args"
    params = {"num_args": Param("int")}

    def forward(self, xp, inputs, aux, is_train):
        out = inputs[0] + inputs[1] if len(inputs) > 1 else inputs[0].copy()
        for x in inputs[2:]:
            out += x  # `out` is a fresh array, safe to update in place
        return [out], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0] if need else None for need in need_grad]

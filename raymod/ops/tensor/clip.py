"""clip: limit values to [a_min, a_max]."""
from __future__ import annotations

from ...base import AttributeValueError
from ..base import ElementwiseOp, Param


class Clip(ElementwiseOp):
    """``min(max(data, a_min), a_max)``.

    The gradient passes where ``a_min <= data <= a_max`` (bounds included, as MXNet) and is 0
    outside. Backward keeps the input.
    """

    name = "clip"
    params = {"a_min": Param("float"), "a_max": Param("float")}
    retain_inputs = (0,)

    def check(self) -> None:
        if self.a_min > self.a_max:
            raise AttributeValueError(f"clip: a_min={self.a_min} is above a_max={self.a_max}")

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        return [xp.clip(x, self.a_min, self.a_max).astype(x.dtype, copy=False)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x = inputs[0]
        return [out_grads[0] * ((x >= self.a_min) & (x <= self.a_max))]

"""smooth_l1: the Huber-like loss of Fast R-CNN's box regression, elementwise."""
from __future__ import annotations

from ..base import ElementwiseOp, Param


class SmoothL1(ElementwiseOp):
    """``0.5 * (sigma * x)^2`` where ``|x| < 1 / sigma^2``, else ``|x| - 0.5 / sigma^2``.

    ``scalar`` is sigma (default 1); ``is_int`` is accepted for MXNet compatibility and
    unused. The gradient is ``sigma^2 * x`` inside that band and ``sign(x)`` outside.
    Backward keeps the input.
    """

    name = "smooth_l1"
    params = {"scalar": Param("float", 1.0), "is_int": Param("bool", True)}
    retain_inputs = (0,)

    def _band(self, dt):
        """sigma^2 and 1 / sigma^2 in the data type, as MXNet computes them."""
        sq = dt(self.scalar) * dt(self.scalar)
        return sq, dt(1) / sq

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        dt = x.dtype.type
        sq, inv = self._band(dt)
        half_inv = dt(0.5) * inv
        out = xp.where(x > inv, x - half_inv,
                       xp.where(x < -inv, -x - half_inv, dt(0.5) * x * x * sq))
        return [out], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        x = inputs[0]
        dt = x.dtype.type
        sq, inv = self._band(dt)
        slope = xp.where(x > inv, dt(1), xp.where(x < -inv, dt(-1), sq * x))
        return [out_grads[0] * slope]

"""softmax, log_softmax and SoftmaxActivation: normalised exponentials along one axis."""
from __future__ import annotations

import numpy as np

from ...base import AttributeValueError, ShapeError
from ..base import ElementwiseOp, Param
from ._axis import norm_axis

_FLOATS = (np.dtype("float16"), np.dtype("float32"), np.dtype("float64"))


def _shifted(xp, x, axis: int, temperature):
    """``x / temperature`` minus its maximum along ``axis`` (so exp never overflows)."""
    z = x / temperature if temperature is not None and temperature != 1.0 else x
    return z - z.max(axis=axis, keepdims=True)


class _SoftmaxBase(ElementwiseOp):
    params = {"axis": Param("int", -1), "temperature": Param("float", None, optional=True),
              "dtype": Param("dtype", None, optional=True, choices=_FLOATS),
              "use_length": Param("bool", False, optional=True)}
    retain_outputs = (0,)

    def check(self) -> None:
        if self.use_length:
            raise AttributeValueError(f"{self.name}: use_length=True is not supported")

    def infer_shape(self, in_shapes, out_shapes):
        shapes = super().infer_shape(in_shapes, out_shapes)
        if shapes[0][0] is not None:
            norm_axis(self.axis, len(shapes[0][0]))
        return shapes

    def infer_type(self, in_types, out_types):
        if self.dtype is None:
            return super().infer_type(in_types, out_types)
        return [in_types[0]], [self.dtype], []

    def _scale(self, g):
        t = self.temperature
        return g / t if t is not None and t != 1.0 else g


class Softmax(_SoftmaxBase):
    """``exp(x / T) / sum(exp(x / T))`` along ``axis``, with T = ``temperature`` (default 1).

    ``dtype`` sets the output (and compute) dtype; ``use_length`` must stay False. Not to be
    confused with ``Softmax`` (capital S, SoftmaxOutput). Backward keeps the output.
    """

    name = "softmax"

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if self.dtype is not None:
            x = x.astype(self.dtype, copy=False)
        e = xp.exp(_shifted(xp, x, self.axis, self.temperature))
        return [e / e.sum(axis=self.axis, keepdims=True)], inputs[0].dtype

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        y, g = outputs[0], out_grads[0]
        gx = y * (g - (g * y).sum(axis=self.axis, keepdims=True))
        return [self._scale(gx).astype(saved, copy=False)]


class LogSoftmax(_SoftmaxBase):
    """``log(softmax(x))`` along ``axis``, computed stably. Backward keeps the output."""

    name = "log_softmax"

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        if self.dtype is not None:
            x = x.astype(self.dtype, copy=False)
        z = _shifted(xp, x, self.axis, self.temperature)
        return [z - xp.log(xp.exp(z).sum(axis=self.axis, keepdims=True))], inputs[0].dtype

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        y, g = outputs[0], out_grads[0]
        gx = g - xp.exp(y) * g.sum(axis=self.axis, keepdims=True)
        return [self._scale(gx).astype(saved, copy=False)]


class SoftmaxActivation(ElementwiseOp):
    """Softmax as an activation: ``mode='instance'`` over the last axis, ``'channel'`` over axis 1.

    'instance' follows MXNet's CPU kernel, which folds every axis but the last into rows (for
    the usual 2-d input that is one softmax per sample). 'channel' needs at least 3 dims.
    Backward keeps the output and gives the true gradient of this forward. (MXNet 1.9's
    backward always sums over axis 1, so for 'instance' with 3 or more dims its gradient does
    not match its own forward; raymod does not copy that.)
    """

    name = "SoftmaxActivation"
    params = {"mode": Param("str", "instance", choices=("instance", "channel"))}
    retain_outputs = (0,)

    def infer_shape(self, in_shapes, out_shapes):
        shapes = super().infer_shape(in_shapes, out_shapes)
        data = shapes[0][0]
        if self.mode == "channel" and data is not None and len(data) < 3:
            raise ShapeError(f"mode='channel' needs data with at least 3 dims, got {data}")
        return shapes

    def forward(self, xp, inputs, aux, is_train):
        axis = 1 if self.mode == "channel" else -1
        e = xp.exp(_shifted(xp, inputs[0], axis, None))
        return [e / e.sum(axis=axis, keepdims=True)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        axis = 1 if self.mode == "channel" else -1
        y, g = outputs[0], out_grads[0]
        return [y * (g - (g * y).sum(axis=axis, keepdims=True))]

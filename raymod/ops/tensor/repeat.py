"""repeat: repeat each element along an axis."""
from __future__ import annotations

import math

from ...base import AttributeValueError
from ..base import Op, Param
from ._checks import axis_of


class Repeat(Op):
    """Each element of ``data`` repeated ``repeats`` times in a row along ``axis``, as
    ``numpy.repeat``; ``axis=None`` works on the flattened input and gives a 1-D output.

    ``repeats`` must be >= 1 (MXNet's ``repeats=0`` gives an empty array, which raymod does
    not represent). The gradient sums each element's copies. Backward keeps the input shape.
    """

    name = "repeat"
    params = {"repeats": Param("int"), "axis": Param("int", None, optional=True)}

    def check(self) -> None:
        if self.repeats < 1:
            raise AttributeValueError(f"repeat: repeats must be >= 1, got {self.repeats}")

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        if data is None:
            return [None], [out_shapes[0]], []
        if self.axis is None:
            return [data], [(math.prod(data) * self.repeats,)], []
        ax = axis_of(self.axis, data)
        out = tuple(data[:ax]) + (data[ax] * self.repeats,) + tuple(data[ax + 1:])
        return [data], [out], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        ax = None if self.axis is None else axis_of(self.axis, x.shape)
        return [xp.repeat(x, self.repeats, axis=ax)], (x.shape, ax)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        shape, ax = saved
        g = out_grads[0]
        if ax is None:
            return [g.reshape(-1, self.repeats).sum(axis=1).reshape(shape)]
        split = shape[:ax] + (shape[ax], self.repeats) + shape[ax + 1:]
        return [g.reshape(split).sum(axis=ax + 1)]

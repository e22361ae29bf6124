"""squeeze: drop axes of size 1."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param
from ._checks import axis_of


class Squeeze(Op):
    """``data`` without its size-1 axes: all of them when ``axis`` is None, else those listed
    (each must have size 1). Squeezing every axis gives shape (1,), as MXNet. Backward keeps
    the input shape.
    """

    name = "squeeze"
    params = {"axis": Param("shape", None, optional=True)}

    def _dropped(self, data: tuple) -> tuple:
        """The input shape (unknown dims of squeezed axes set to 1) and the output shape."""
        if self.axis is None:
            return tuple(data), tuple(d for d in data if d != 1) or (1,)
        axes = [axis_of(a, data, f"axis={self.axis}: axis") for a in self.axis]
        if len(set(axes)) != len(axes):
            raise ShapeError(f"axis={self.axis} names an axis twice")
        bad = [a for a in axes if data[a] not in (0, 1)]
        if bad:
            raise ShapeError(f"axis={self.axis}: axis {bad[0]} of data of shape {tuple(data)} "
                             f"has size {data[bad[0]]}, not 1")
        data = tuple(1 if i in axes else d for i, d in enumerate(data))
        return data, tuple(d for i, d in enumerate(data) if i not in axes) or (1,)

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        if data is None:
            return [None], [out_shapes[0]], []
        data, out = self._dropped(data)
        return [data], [out], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        return [x.reshape(self._dropped(x.shape)[1])], x.shape

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0].reshape(saved)]

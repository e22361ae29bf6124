"""expand_dims: insert a size-1 axis."""
from __future__ import annotations

from ..base import Op, Param
from ._axis import fill_unknown, norm_axis


class ExpandDims(Op):
    """Insert an axis of size 1 at position ``axis`` (``-ndim-1 <= axis <= ndim``).

    Backward keeps only the input shape.
    """

    name = "expand_dims"
    params = {"axis": Param("int")}

    def infer_shape(self, in_shapes, out_shapes):
        data, out = in_shapes[0], out_shapes[0]
        if data is None and out is not None:
            ax = norm_axis(self.axis, len(out) - 1, extra=1)
            data = out[:ax] + out[ax + 1:]
        if data is None:
            return [None], [out], []
        ax = norm_axis(self.axis, len(data), extra=1)
        if out is not None and len(out) == len(data) + 1:
            data = fill_unknown(data, out[:ax] + out[ax + 1:])
        return [data], [data[:ax] + (1,) + data[ax:]], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        return [xp.expand_dims(x, norm_axis(self.axis, x.ndim, extra=1))], x.shape

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0].reshape(saved)]

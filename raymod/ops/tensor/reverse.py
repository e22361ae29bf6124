"""reverse (flip): the input read backwards along some axes."""
from __future__ import annotations

from ..base import ElementwiseOp, Param
from ._axis import norm_axis


class Reverse(ElementwiseOp):
    """``data`` with the order of its entries reversed along every axis in ``axis``.

    Attributes
    ----------
    axis : tuple of int
        The axes to reverse (negative values count from the end); the shape is unchanged.
        An axis named twice is reversed twice, i.e. not at all (as in MXNet).

    Backward reverses the head gradient the same way and keeps nothing.
    """

    name = "reverse"
    aliases = ("flip",)
    params = {"axis": Param("shape", doc="axes to reverse")}

    def _flip(self, x):
        axes = [norm_axis(a, x.ndim) for a in self.axis]
        axes = {a for a in axes if axes.count(a) % 2}  # as MXNet, an axis named twice flips back
        return x[tuple(slice(None, None, -1) if i in axes else slice(None)
                       for i in range(x.ndim))]

    def infer_shape(self, in_shapes, out_shapes):
        ins, outs, aux = super().infer_shape(in_shapes, out_shapes)
        if ins[0] is not None:
            for a in self.axis:
                norm_axis(a, len(ins[0]))  # raises ShapeError when out of range
        return ins, outs, aux

    def forward(self, xp, inputs, aux, is_train):
        return [self._flip(inputs[0])], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [self._flip(out_grads[0])]

"""slice_like: cut the leading part of some axes to the sizes of another array."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param
from ._checks import axis_of


class SliceLike(Op):
    """``data[:n0, :n1, ...]`` where the sizes ``n`` come from ``shape_like``'s shape.

    ``axes`` names the axes to cut (negative counts from the end of ``data``); empty means
    every axis, and then both inputs must have the same rank. Each size of ``shape_like``
    must be at most ``data``'s. ``shape_like`` supplies only its shape and gets a zero
    gradient. Backward keeps ``data``'s shape and scatters the gradient into zeros.
    """

    name = "slice_like"
    inputs = ("data", "shape_like")
    params = {"axes": Param("shape", ())}
    no_grad_inputs = ("shape_like",)

    def cut_axes(self, data: tuple, like: tuple) -> list[int]:
        if not self.axes:
            if len(data) != len(like):
                raise ShapeError(f"with axes=() data of shape {tuple(data)} and shape_like of "
                                 f"shape {tuple(like)} must have the same rank")
            return list(range(len(data)))
        axes = [axis_of(a, data, f"axes={self.axes}: axis") for a in self.axes]
        for a, given in zip(axes, self.axes):
            if a >= len(like):
                raise ShapeError(f"axes={self.axes}: axis {given} is out of range for "
                                 f"shape_like of shape {tuple(like)}")
        return axes

    def infer_shape(self, in_shapes, out_shapes):
        data, like = in_shapes
        if data is None or like is None:
            return [data, like], [out_shapes[0]], []
        out = list(data)
        for a in self.cut_axes(data, like):
            if data[a] and like[a] > data[a]:
                raise ShapeError(f"shape_like of shape {tuple(like)} is larger than data of "
                                 f"shape {tuple(data)} along axis {a}")
            out[a] = like[a]
        return [data, like], [tuple(out)], []

    def window(self, data: tuple, like: tuple) -> tuple:
        index = [slice(None)] * len(data)
        for a in self.cut_axes(data, like):
            index[a] = slice(0, like[a])
        return tuple(index)

    def forward(self, xp, inputs, aux, is_train):
        x, like = inputs
        index = self.window(x.shape, like.shape)
        return [x[index]], (x.shape, index)

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        shape, index = saved
        g = out_grads[0]
        grad = xp.zeros(shape, g.dtype)
        grad[index] = g
        return [grad, None]

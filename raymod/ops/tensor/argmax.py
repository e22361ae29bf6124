"""argmax, argmin: the position of the largest or smallest entry along an axis."""
from __future__ import annotations

from ..base import Op, Param
from ._checks import axis_of


class _ArgExtreme(Op):
    params = {"axis": Param("int", None, optional=True), "keepdims": Param("bool", False)}

    def out_shape(self, data: tuple) -> tuple:
        if self.axis is None:
            return (1,) * len(data) if self.keepdims else (1,)
        ax = axis_of(self.axis, data)
        if self.keepdims:
            return tuple(data[:ax]) + (1,) + tuple(data[ax + 1:])
        return tuple(data[:ax]) + tuple(data[ax + 1:]) or (1,)

    def infer_shape(self, in_shapes, out_shapes):
        data = in_shapes[0]
        return [data], [out_shapes[0] if data is None else self.out_shape(data)], []

    def forward(self, xp, inputs, aux, is_train):
        x = inputs[0]
        ax = None if self.axis is None else axis_of(self.axis, x.shape)
        pos = self.find(xp, x, ax)
        return [pos.astype(x.dtype).reshape(self.out_shape(x.shape))], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [None]


class ArgMax(_ArgExtreme):
    """Position of the largest entry along ``axis`` (of the flattened input when None), as
    a number of ``data``'s dtype. The first of equal maxima wins; a NaN counts as the
    maximum. The axis is dropped (kept as size 1 with ``keepdims``). No gradient; backward
    keeps nothing.
    """

    name = "argmax"

    @staticmethod
    def find(xp, x, ax):
        return xp.argmax(x, axis=ax)


class ArgMin(_ArgExtreme):
    """Position of the smallest entry along ``axis``; otherwise as :class:`ArgMax` (a NaN
    counts as the minimum)."""

    name = "argmin"

    @staticmethod
    def find(xp, x, ax):
        return xp.argmin(x, axis=ax)

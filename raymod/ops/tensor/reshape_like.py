"""reshape_like: give part of one array's shape the sizes of part of another's."""
from __future__ import annotations

import math

from ...base import ShapeError
from ..base import Op, Param


def _span(shape: tuple, side: str, begin: int | None, end: int | None) -> tuple[int, int]:
    """``[begin, end)`` of ``shape``'s axes, negatives counted from the end, None = whole."""
    n = len(shape)
    b = 0 if begin is None else begin + n if begin < 0 else begin
    e = n if end is None else end + n if end < 0 else end
    if not 0 <= b < e <= n:
        raise ShapeError(f"{side}_begin={begin}, {side}_end={end} is not a non-empty range of "
                         f"the axes of {side} of shape {tuple(shape)}")
    return b, e


class ReshapeLike(Op):
    """``lhs`` reshaped so that its axes ``[lhs_begin, lhs_end)`` are replaced by ``rhs``'s
    axes ``[rhs_begin, rhs_end)`` (None: from the first / to the last axis; negatives count
    from the end). The sizes must keep ``lhs``'s element count. ``rhs`` supplies only its
    shape and gets a zero gradient. Backward keeps ``lhs``'s shape.
    """

    name = "reshape_like"
    inputs = ("lhs", "rhs")
    params = {"lhs_begin": Param("int", None, optional=True),
              "lhs_end": Param("int", None, optional=True),
              "rhs_begin": Param("int", None, optional=True),
              "rhs_end": Param("int", None, optional=True)}
    no_grad_inputs = ("rhs",)

    def out_shape(self, lhs: tuple, rhs: tuple) -> tuple:
        lb, le = _span(lhs, "lhs", self.lhs_begin, self.lhs_end)
        rb, re = _span(rhs, "rhs", self.rhs_begin, self.rhs_end)
        out = tuple(lhs[:lb]) + tuple(rhs[rb:re]) + tuple(lhs[le:])
        if all(lhs) and all(out) and math.prod(lhs) != math.prod(out):
            raise ShapeError(f"lhs of shape {tuple(lhs)} has {math.prod(lhs)} elements, the "
                             f"shape {out} taken from rhs of shape {tuple(rhs)} has "
                             f"{math.prod(out)}")
        return out

    def infer_shape(self, in_shapes, out_shapes):
        lhs, rhs = in_shapes
        if lhs is None or rhs is None:
            return [lhs, rhs], [out_shapes[0]], []
        return [lhs, rhs], [self.out_shape(lhs, rhs)], []

    def forward(self, xp, inputs, aux, is_train):
        lhs, rhs = inputs
        return [lhs.reshape(self.out_shape(lhs.shape, rhs.shape))], lhs.shape

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        return [out_grads[0].reshape(saved), None]

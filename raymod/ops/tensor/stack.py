"""stack: join arrays of one shape along a new axis."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, Param, merge_shape
from ._checks import axis_of


class Stack(Op):
    """``num_args`` inputs (``arg0``, ``arg1``, ...) of one shape joined along a new axis
    ``axis`` (``-1`` appends it). Backward keeps nothing: input ``i`` gets slice ``i`` of
    the head gradient.
    """

    name = "stack"
    variadic = "num_args"
    params = {"axis": Param("int", 0), "num_args": Param("int")}

    def infer_shape(self, in_shapes, out_shapes):
        shape, ref = None, None
        for i, s in enumerate(in_shapes):
            if s is None:
                continue
            try:
                shape = merge_shape(shape, s)
            except ShapeError:
                raise ShapeError(f"input arg{i} has shape {tuple(s)} but {ref[0]} has "
                                 f"{ref[1]}: stack needs inputs of one shape") from None
            ref = ref or (f"arg{i}", tuple(s))
        out = out_shapes[0]
        if out is not None:  # the inputs come back from the output, less the new axis
            ax = axis_of(self.axis, out)
            shape = merge_shape(shape, tuple(out[:ax]) + tuple(out[ax + 1:]),
                                "the output less the stacked axis must be the inputs' shape")
        if shape is None:
            return list(in_shapes), [out], []
        ax = axis_of(self.axis, shape, extra=1)
        out = tuple(shape[:ax]) + (self.num_args,) + tuple(shape[ax:])
        return [shape] * len(in_shapes), [out], []

    def forward(self, xp, inputs, aux, is_train):
        return [xp.stack(inputs, axis=axis_of(self.axis, inputs[0].shape, extra=1))], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        ax = axis_of(self.axis, g.shape)
        # a loop over the inputs, a fixed small count
        return [g[(slice(None),) * ax + (i,)] if need else None
                for i, need in enumerate(need_grad)]

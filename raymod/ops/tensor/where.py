"""where: pick from ``x`` where a condition holds and from ``y`` elsewhere."""
from __future__ import annotations

from ...base import ShapeError
from ..base import Op, merge_shape


class Where(Op):
    """``x`` where ``condition`` is non-zero, ``y`` elsewhere.

    ``x`` and ``y`` share one shape. ``condition`` has that shape too, or is 1-D with one
    entry per index of the first axis (whole rows are then taken from ``x`` or ``y``); it may
    be of any dtype and gets no gradient. The head gradient goes to ``x`` where the condition
    holds and to ``y`` elsewhere. Backward keeps ``condition``.
    """

    name = "where"
    inputs = ("condition", "x", "y")
    params = {}
    no_grad_inputs = ("condition",)
    retain_inputs = (0,)

    def infer_shape(self, in_shapes, out_shapes):
        cond, x, y = in_shapes
        shape = None
        for s in (x, y, out_shapes[0]):
            shape = merge_shape(shape, s, "x, y and the output must share a shape")
        if shape is None and cond is not None and len(cond) > 1:
            shape = tuple(cond)
        if cond is not None and shape is not None:
            same = len(cond) == len(shape)
            try:
                if not same and len(cond) != 1:
                    raise ShapeError("rank")
                cond = merge_shape(cond, shape if same else shape[:1])
            except ShapeError:
                raise ShapeError(f"condition of shape {tuple(cond)} must have x's shape "
                                 f"{shape} or be 1-D of size {shape[0]}") from None
            shape = cond if same else cond + shape[1:]  # a 1-D condition gives the first dim
        return [cond, shape, shape], [shape], []

    def infer_type(self, in_types, out_types):
        dtype = next((t for t in (in_types[1], in_types[2], out_types[0]) if t is not None),
                     None)
        cond = in_types[0] if in_types[0] is not None else dtype
        return [cond, dtype, dtype], [dtype], []

    @staticmethod
    def _mask(cond, ndim):
        return (cond != 0).reshape(cond.shape + (1,) * (ndim - cond.ndim))

    def forward(self, xp, inputs, aux, is_train):
        cond, x, y = inputs
        return [xp.where(self._mask(cond, x.ndim), x, y)], None

    def backward(self, xp, out_grads, inputs, outputs, saved, need_grad):
        g = out_grads[0]
        mask = self._mask(inputs[0], g.ndim)
        zero = xp.zeros((), g.dtype)
        return [None, xp.where(mask, g, zero) if need_grad[1] else None,
                xp.where(mask, zero, g) if need_grad[2] else None]

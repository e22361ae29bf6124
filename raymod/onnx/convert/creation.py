"""Arrays made from nothing or from a shape: _zeros, _ones, zeros_like, ones_like (constants
of the inferred shape, or, when that shape follows the batch, filled at run time)."""
from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ..graph import BatchDim, NodeContext, converts


def _filled(value: float, like_input: bool):
    def convert(ctx: NodeContext) -> None:
        dtype = ctx.in_dtype(0) if like_input else ctx.out_dtype()
        dims = ctx.out_dims()
        if any(isinstance(d, BatchDim) for d in dims):
            # an RNN's begin state (L, N, H): its batch is the input's, known at run time only
            fill = numpy_helper.from_array(np.full(1, value, dtype=dtype))
            ctx.add("ConstantOfShape", [ctx.shape("shape", dims)], ctx.output(), value=fill)
            return
        const = ctx.const("value", np.full(ctx.out_shape(), value, dtype=dtype))
        ctx.add("Identity", [const], ctx.output())
    return convert


converts("_zeros")(_filled(0.0, False))
converts("_ones")(_filled(1.0, False))
converts("zeros_like")(_filled(0.0, True))
converts("ones_like")(_filled(1.0, True))
